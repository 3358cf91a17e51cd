"""The corpus of ``memroute bench recall``: distinct texts with their sources, combinations past them, the
vector cache keyed by model and texts, and template sentences without a data folder. Tiny fixtures written
here (no evaluation data)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memroute.embed import CachedEmbedder
from memroute.embed.base import Side, Vectors
from memroute.eval.bench_corpus import COMBINED, TEMPLATES, bench_corpus, corpus_vectors, distinct_texts


def _write(path: Path, records: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    turn = {"speaker": "USER", "utterance": "Find me a quiet cafe near the river."}
    reply = {"speaker": "SYSTEM", "utterance": "Two cafes match; one opens at seven."}
    _write(root / "sgd_routing/dev.jsonl", [
        {"history": [], "utterance": turn["utterance"]},
        {"history": [turn, reply], "utterance": "The one that opens at seven, please."},
    ])
    _write(root / "sgd_routing/train.jsonl", [{"history": [turn], "utterance": "  Book it for two.  "}])
    _write(root / "realpersonachat_ja/sessions.jsonl", [
        {"turns": [{"text": "週末は山に登りました。"}, {"text": "いいですね、どの山ですか。"}, {"text": ""}]}])
    _write(root / "kochat_ko_intent/dev.jsonl", [{"text": "내일 서울 날씨 알려줘"}, {"text": "부산 맛집 추천해줘"}])
    # the same text in a later set counts once, for the first set
    _write(root / "banking77/train.jsonl", [{"text": "Book it for two."}, {"text": "Where is my new card?"}])
    return root


def test_every_text_is_counted_once_with_the_set_it_was_first_found_in(data: Path) -> None:
    d = distinct_texts(data)
    assert len(d.texts) == len(set(d.texts)) == 9
    by_text = dict(zip(d.texts, zip(d.sources, d.languages, strict=True), strict=True))
    assert by_text["Book it for two."] == ("SGD", "en")
    assert by_text["Where is my new card?"] == ("Banking77", "en")
    assert by_text["Two cafes match; one opens at seven."] == ("SGD", "en")  # a system turn
    assert by_text["週末は山に登りました。"] == ("RealPersonaChat", "ja")
    assert by_text["부산 맛집 추천해줘"] == ("kochat", "ko")
    assert "" not in by_text
    assert str(data) in d.origin


def test_the_corpus_holds_out_its_queries_and_labels_its_mix(data: Path) -> None:
    c = bench_corpus(5, queries=2, root=data)
    texts = [c.text(i) for i in range(5)]
    assert len(set(texts)) == 5 and not set(texts) & set(c.queries)
    assert sum(c.mix.values()) == 5 and COMBINED not in c.mix
    assert "no noisy copies" not in c.describe() and "5 memories" in c.describe()
    assert bench_corpus(5, queries=2, root=data).parts == c.parts  # seeded


def test_past_the_distinct_texts_every_memory_is_a_distinct_combination_of_one_language(data: Path) -> None:
    c = bench_corpus(12, queries=2, root=data)  # 7 distinct texts left, so 5 combinations
    assert c.combined == 5 and c.mix[COMBINED] == 5
    texts = [c.text(i) for i in range(12)]
    assert len(set(texts)) == 12 and not set(texts) & set(c.queries)
    for i in range(7, 12):
        a, b = c.parts[i]
        assert a != b and c.distinct.languages[a] == c.distinct.languages[b]
    assert "5 distinct combinations of two" in c.describe()
    vecs = np.random.default_rng(0).normal(size=(len(c.distinct.texts), 4)).astype(np.float32)
    a, b = c.parts[9]
    want = (vecs[a] + vecs[b]) / np.linalg.norm(vecs[a] + vecs[b])
    assert np.allclose(c.vector(9, vecs), want) and np.isclose(np.linalg.norm(c.vector(9, vecs)), 1.0)
    with pytest.raises(ValueError, match="distinct pairs"):
        bench_corpus(40, queries=2, root=data)


def test_without_a_data_folder_the_corpus_is_template_sentences_and_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    d = distinct_texts(empty, templates=300)
    assert set(d.sources) == {TEMPLATES} and TEMPLATES in d.origin
    c = bench_corpus(50, queries=5, distinct=d)
    assert len(c.queries) == 5 and len({c.text(i) for i in range(50)}) == 50
    assert c.describe().startswith(f"50 memories from {TEMPLATES}")


class CountingEmbedder:
    """The test embedder under another model id if asked, counting the texts it embeds."""

    def __init__(self, inner: CachedEmbedder, model_id: str | None = None) -> None:
        self.inner, self.dimension, self.texts = inner, inner.dimension, 0
        self.model_id = model_id or inner.model_id

    def embed(self, texts: Sequence[str], side: Side = "passage") -> Vectors:
        self.texts += len(texts)
        return self.inner.embed(texts, side)


def test_the_vectors_are_cached_by_model_and_texts(embedder: CachedEmbedder, tmp_path: Path) -> None:
    texts = ["a walk by the river", "川沿いを散歩した", "강가를 산책했다"]
    first = CountingEmbedder(embedder)
    vecs, how = corpus_vectors(first, texts, tmp_path, batch=2)
    assert first.texts == 3 and "embedded now" in how and vecs.shape == (3, embedder.dimension)
    again = CountingEmbedder(embedder)
    cached, how = corpus_vectors(again, texts, tmp_path)
    assert again.texts == 0 and "read from the cache" in how and np.array_equal(cached, vecs)
    other_texts = CountingEmbedder(embedder)
    corpus_vectors(other_texts, [*texts[:2], "강가를 산책했어"], tmp_path)
    other_model = CountingEmbedder(embedder, model_id="another-model")
    corpus_vectors(other_model, texts, tmp_path)
    assert other_texts.texts == 3 and other_model.texts == 3
    assert len(list(tmp_path.glob("vectors-*.npy"))) == 3 and not list(tmp_path.glob("*.tmp"))


def test_bench_recall_runs_on_the_corpus_and_checks_every_first_pass_against_brute_force(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memroute.eval.recall_bench import bench_recall

    root = tmp_path / "data"
    places, things = ("the harbour", "the old library", "a noodle bar", "the night market"), ("tickets", "a map",
                                                                                            "my umbrella")
    _write(root / "sgd_routing/dev.jsonl", [{"history": [], "utterance": f"I left {t} at {p} on day {d}."}
                                            for p in places for t in things for d in range(3)])
    ja = [{"text": f"{d}日目に{p}へ行きました。"} for p in ("京都", "札幌", "那覇") for d in range(8)]
    _write(root / "realpersonachat_ja/sessions.jsonl", [{"turns": ja}])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    distinct = distinct_texts(root)
    assert len(distinct.texts) == 36 + 24
    r = bench_recall(80, queries=4, pool=30, workdir=tmp_path, distinct=distinct)
    assert r["memories"] == 80 and r["distinct_texts"] == 60
    assert r["corpus_mix"] == {"SGD": r["corpus_mix"]["SGD"], "RealPersonaChat": 80 - 24 - r["corpus_mix"]["SGD"],
                               COMBINED: 24}
    assert "24 distinct combinations of two" in r["corpus"] and "embedded now" in r["vectors"]
    # a small store has exact searches only: both must agree with the brute-force scan of the table
    assert r["vector"]["default"]["recall@10"] == r["vector"]["exact"]["recall@10"] == 1.0
    assert r["vector"]["exact"]["first_pass"] == "float32 scan (no first pass)"
    assert 0 < r["recall_cpu_ms"]["p50"] <= r["recall_cpu_ms"]["p95"]
    again = bench_recall(40, queries=4, pool=10, workdir=tmp_path, distinct=distinct)
    assert "read from the cache" in again["vectors"] and COMBINED not in again["corpus_mix"]


def test_the_measuring_process_reports_its_own_peak_memory_not_its_parents() -> None:
    import subprocess
    import sys

    held = np.ones(300 * 2**20 // 8)  # 300 MB resident here, in the parent
    code = "from memroute.eval.measure import peak_rss_mb; print(peak_rss_mb())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert float(held.sum()) > 0 and 10 < float(out) < 250


def test_the_bench_names_the_exact_search_each_size_runs() -> None:
    from memroute.eval.recall_bench import _exact_pass
    from memroute.stores import quantized

    assert _exact_pass(quantized.BYTES_MIN_ROWS - 1) == "float32 scan (no first pass)"
    assert _exact_pass(10_000).startswith("in-memory 8-bit scan")
    assert _exact_pass(quantized.MIN_ROWS).startswith("8-bit scan")
