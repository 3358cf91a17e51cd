"""The question-level prior "this message needs the owner's memories" (memory_need) and the judge's columns for it,
with the real encoder and real SQLite."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memroute import Memory
from memroute.embed import CachedEmbedder, get_embedder
from memroute.embed.tokens import ranking_id
from memroute.errors import ConfigError
from memroute.retrieval import judge, judge_fit, memory_need
from memroute.retrieval.judge import JUDGE_FEATURES, NEED_FEATURES, NEED_UNKNOWN, judge_features
from memroute.retrieval.judge_fit import judged_question

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)
COL = {n: j for j, n in enumerate(JUDGE_FEATURES)}


def test_the_bank_has_both_sides_in_every_language() -> None:
    kinds = memory_need.kinds()
    assert {side for side, _, _ in kinds} == {"owner", "none"}
    for side in ("owner", "none"):
        texts = [t for s, _, ts in kinds if s == side for t in ts[1:]]
        assert sum(any("\u3040" <= ch <= "\u30ff" for ch in t) for t in texts) >= 25  # Japanese kana
        assert sum(any("\uac00" <= ch <= "\ud7a3" for ch in t) for t in texts) >= 25  # Korean hangul
        assert sum(t.isascii() for t in texts) >= 25


def test_a_kind_without_examples_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = {"sides": {"owner": {"x": {"description": "d", "examples": []}}, "none": {}}}
    monkeypatch.setattr(memory_need, "_bank_text", lambda: json.dumps(broken))
    memory_need.kinds.cache_clear()
    try:
        with pytest.raises(ConfigError, match="examples"):
            memory_need.kinds()
    finally:
        memory_need.kinds.cache_clear()


@pytest.mark.parametrize(("own", "other"), [
    ("What was the name of my sister's new husband?", "What is the boiling point of water at sea level?"),
    ("What time did I say my yoga class starts?", "Hello! Lovely weather today."),
    ("うちの息子、どの塾に通ってたっけ？", "日本で一番長い川は何ですか？"),
    ("내가 다니는 치과 이름이 뭐였지?", "이 문장 일본어로 번역해 줘: '내일 봐요'"),
])
def test_a_question_about_the_owners_life_needs_memory_and_one_about_the_world_does_not(
        embedder: CachedEmbedder, own: str, other: str) -> None:
    q_own, q_other = embedder.embed([own, other], side="query")
    assert memory_need.needs_memory(embedder, q_own) > 0.5 > memory_need.needs_memory(embedder, q_other)


def test_the_columns_are_one_value_for_every_candidate_and_its_products() -> None:
    args = ([0.5, 0.2, 0.1], [0.6, 0.1, 0.05], [1.0, 0.0, 0.5], [1.0, 0.2, 0.0], [0, 1, 2], [False] * 3, "factual")
    x = judge_features(*args, needs_memory=0.8)
    assert np.all(x[:, COL["needs_memory"]] == 0.8)
    assert np.allclose(x[:, COL["needs_memory_rerank_z"]], 0.8 * x[:, COL["rerank_z"]])
    assert np.allclose(x[:, COL["needs_memory_rerank_lead"]], 0.8 * x[:, COL["rerank_lead"]])
    assert np.all(judge_features(*args)[:, COL["needs_memory"]] == NEED_UNKNOWN)


def test_the_feature_sets_with_the_prior_are_the_sets_without_it_plus_its_columns() -> None:
    for name in ("seed", "store", "store-size", "interaction"):
        plain, with_need = judge_fit.FEATURE_SETS[name], judge_fit.FEATURE_SETS[f"{name}+need"]
        assert not any(u for u, f in zip(plain, JUDGE_FEATURES, strict=True) if f in NEED_FEATURES)
        assert [u or f in NEED_FEATURES for u, f in zip(plain, JUDGE_FEATURES, strict=True)] == list(with_need)


MEMORIES = [
    {"id": "dentist", "text": "My dentist is Dr. Ono on Elm Street", "occurred_at": NOW - timedelta(days=30)},
    {"id": "tea", "text": "I drink green tea every afternoon", "occurred_at": NOW - timedelta(days=3)},
]


def test_recall_traces_the_prior_and_the_judges_fit_reads_it_from_the_trace(memory: Memory) -> None:
    memory.remember_many(MEMORIES)
    with memory_need.tracing():  # as `memroute eval recall --fit-judge` sets it
        own = memory.recall("Who is my dentist again?", now=NOW).trace
        world = memory.recall("How tall is Mount Everest?", now=NOW).trace
    values = []
    for trace in (own, world):
        seen = {c.features["needs_memory"] for c in trace.candidates if c.rerank is not None}
        assert len(seen) == 1
        q = judged_question(trace, {"dentist"}, "everyday")
        assert np.all(q.x[:, COL["needs_memory"]] == seen.pop())
        values.append(q.x[0, COL["needs_memory"]])
    assert values[0] > 0.5 > values[1]


def test_recall_computes_no_prior_for_a_judge_that_does_not_read_it(memory: Memory) -> None:
    memory.remember_many(MEMORIES)
    model = judge.judge_for(ranking_id(memory.embedder))
    assert model is not None and not model.reads_need  # use-m3's judge: main's, without the prior
    trace = memory.recall("Who is my dentist again?", now=NOW).trace
    assert trace.candidates and not any("needs_memory" in c.features for c in trace.candidates)


def test_the_pairs_judge_reads_the_prior(tmp_path: Path) -> None:
    pair = get_embedder("use-m3+e5-small")
    model = judge.judge_for(ranking_id(pair))
    assert model is not None and model.reads_need
    mem = Memory.open(f"sqlite:///{tmp_path / 'pair.db'}", owner="alice", embedder=pair)
    try:
        mem.remember_many(MEMORIES)
        trace = mem.recall("Who is my dentist again?", now=NOW).trace
    finally:
        mem.close()
    assert {c.features["needs_memory"] for c in trace.candidates if c.rerank is not None} and \
        all(c.features["needs_memory"] > 0.5 for c in trace.candidates if c.rerank is not None)


@pytest.mark.parametrize("name", ["use-m3", "use-m3+e5-small"])
def test_the_shipped_prototypes_are_the_banks_embedded(name: str) -> None:
    e = get_embedder(name)
    entry = memory_need._shipped()[str(e.model_id)]
    assert entry["bank"] == memory_need.digest()
    shipped, _ = memory_need.prototypes(e)
    assert np.abs(shipped - memory_need.embedded(e)).max() < 1e-3


def test_prototypes_of_another_bank_are_computed_not_read(monkeypatch: pytest.MonkeyPatch,
                                                          embedder: CachedEmbedder) -> None:
    calls = []

    def embedded(e: object) -> np.ndarray:
        calls.append(e)
        return np.eye(len(memory_need.kinds()), 2, dtype=np.float32)

    monkeypatch.setattr(memory_need, "_prototypes", {})
    monkeypatch.setattr(memory_need, "digest", lambda: "another bank")
    monkeypatch.setattr(memory_need, "embedded", embedded)
    memory_need.prototypes(embedder)
    assert calls == [embedder]
