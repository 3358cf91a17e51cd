"""Unit tests of the recall stages that need no store: fusion, dedupe, decay, strategy, options, pack, metrics."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memroute.analysis import analyze
from memroute.errors import InputError
from memroute.eval.locomo import load_locomo, parse_session_date
from memroute.eval.recall_eval import scores
from memroute.retrieval import (
    RecallOptions,
    Strategy,
    minmax,
    rrf,
    search_params,
    select_strategy,
    should_inject,
    weighted_minmax,
)
from memroute.retrieval.decay import decay_multiplier
from memroute.retrieval.dedupe import near_duplicates
from memroute.retrieval.pack import PackEntry, estimate_tokens, render
from memroute.types import ScoredId

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)


def _list(*pairs: tuple[str, float]) -> list[ScoredId]:
    return [ScoredId(i, s) for i, s in pairs]


def test_rrf_is_cormack_formula() -> None:
    fused = rrf([_list(("a", 9), ("b", 5)), _list(("b", 0.9))])
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)


def test_weighted_minmax_scales_each_list_and_weighs_it() -> None:
    fused = weighted_minmax([_list(("a", 10), ("b", 5), ("c", 0)), _list(("c", 0.8), ("a", 0.4))], [0.7, 0.3])
    assert fused["a"] == pytest.approx(0.7 * 1.0 + 0.3 * 0.5)  # the minimum is floored at 0: 0.4 / 0.8
    assert fused["b"] == pytest.approx(0.35)
    assert fused["c"] == pytest.approx(0.3)
    assert minmax(_list(("x", 2.0), ("y", 2.0))) == {"x": 1.0, "y": 1.0}
    assert minmax(_list(("x", 0.5), ("y", -0.5))) == {"x": 1.0, "y": 0.0}


_lists = st.lists(st.lists(st.tuples(st.sampled_from("abcdefg"), st.floats(0, 100)), max_size=6,
                           unique_by=lambda t: t[0]), min_size=1, max_size=4)


@given(_lists)
def test_fusion_does_not_depend_on_the_order_of_the_lists(raw: list[list[tuple[str, float]]]) -> None:
    lists = [sorted(_list(*r), key=lambda h: -h.score) for r in raw]
    weights = [0.5 + i for i in range(len(lists))]
    assert rrf(lists) == pytest.approx(rrf(list(reversed(lists))))
    forward = weighted_minmax(lists, weights)
    backward = weighted_minmax(list(reversed(lists)), list(reversed(weights)))
    assert forward.keys() == backward.keys()
    for key, value in forward.items():
        assert backward[key] == pytest.approx(value)


def test_dedupe_drops_the_worse_copy_only() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(size=16).astype(np.float32)
    other = rng.normal(size=16).astype(np.float32)
    vectors = {"first": base, "copy": base + 0.01, "different": other}
    assert near_duplicates(["first", "copy", "different"], vectors, 0.95) == {"copy": "first"}
    assert near_duplicates(["copy", "first"], vectors, 0.95) == {"first": "copy"}
    assert near_duplicates(["first", "copy"], vectors, 0.99999999) == {}


def test_dedupe_keeps_neighbours_whose_context_embeddings_agree() -> None:
    # Two turns embedded with their surroundings can have almost the same vector and different words.
    base = np.ones(8, dtype=np.float32)
    vectors = {"a": base, "b": base * 1.01, "c": base * 0.99}
    texts = {"a": "Caroline: I went to the LGBTQ support group yesterday",
             "b": "Melanie: That sounds great, how did it go?",
             "c": "caroline: I went to the LGBTQ support group yesterday!"}
    assert near_duplicates(["a", "b", "c"], vectors, 0.95, texts) == {"c": "a"}
    assert near_duplicates(["a", "b", "c"], vectors, 0.95) == {"b": "a", "c": "a"}
    same = {"x": "同じ文です", "y": "同じ文です"}
    assert near_duplicates(["x", "y"], {"x": base, "y": base}, 0.95, same) == {"y": "x"}


def _greedy_duplicates(ids: list[str], vectors: dict[str, np.ndarray], threshold: float,
                       texts: dict[str, str]) -> dict[str, str]:
    """The rule stated plainly: each id against every kept one before it, in rank order."""
    kept: list[str] = []
    dropped: dict[str, str] = {}
    for j in ids:
        twin = None
        for i in kept:
            a, b = vectors[i].astype(np.float64), vectors[j].astype(np.float64)
            cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
            wa, wb = set(texts[i].split()), set(texts[j].split())
            if cos > threshold and len(wa & wb) / len(wa | wb) >= 0.6:
                twin = i
                break
        if twin is None:
            kept.append(j)
        else:
            dropped[j] = twin
    return dropped


@given(st.integers(0, 2**32 - 1), st.integers(2, 40))
def test_dedupe_is_the_greedy_rule_on_many_copies(seed: int, n: int) -> None:
    # clusters of close vectors whose texts share most words or few: chains of copies, copies of dropped ones
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, n // 4), 24))
    ids = [f"m{k}" for k in range(n)]
    which = rng.integers(0, len(centres), size=n)
    vectors = {i: (centres[c] + rng.normal(scale=0.15, size=24)).astype(np.float32)
               for i, c in zip(ids, which, strict=True)}
    texts = {i: " ".join(f"w{c}_{t}" for t in range(5)) + (f" x{k}" if rng.random() < 0.5 else f" x{k} y{k} z{k}")
             for k, (i, c) in enumerate(zip(ids, which, strict=True))}
    got = near_duplicates(ids, vectors, 0.95, texts)
    assert got == _greedy_duplicates(ids, vectors, 0.95, texts)


def test_decay_is_seed_003_factor_per_year() -> None:
    assert decay_multiplier(NOW - timedelta(days=365.25), NOW, 0.1) == pytest.approx(math.exp(-0.1))
    assert decay_multiplier(NOW + timedelta(days=3), NOW, 0.1) == 1.0
    assert decay_multiplier(None, NOW, 0.1) == 1.0
    assert decay_multiplier(NOW - timedelta(days=900), NOW, 0.0) == 1.0


def test_strategy_decision_tree() -> None:
    assert select_strategy(analyze("先週のあれどうなった？", now=NOW)) == Strategy.TEMPORAL
    assert select_strategy(analyze("지난주 부산 출장 어땠어?", now=NOW)) == Strategy.TEMPORAL
    factual = analyze("When is Kenji's flight to Osaka?", now=NOW)
    assert select_strategy(factual) == Strategy.KEYWORD_BOOST
    today = analyze("今日の会議のメモ", now=NOW)
    assert search_params(Strategy.TEMPORAL, today, RecallOptions()).time_decay_factor == 0.0
    params = search_params(Strategy.HYBRID, factual, RecallOptions(vector_weight=0.9))
    assert params.vector_weight == 0.9 and params.keyword_weight == 0.65
    # conceptual questions search keywords too (measured better on conversation memories than semantic_only)
    assert select_strategy(analyze("Why did Caroline start painting?", now=NOW)) == Strategy.HYBRID


@pytest.mark.parametrize("bad", [dict(limit=0), dict(strategy="fastest"), dict(fusion="sum"),
                                 dict(vector_weight=1.5), dict(dedupe_threshold=0.0), dict(window_days=0)])
def test_options_say_which_field_is_wrong(bad: dict[str, object]) -> None:
    with pytest.raises(InputError):
        RecallOptions(**bad).validated()  # type: ignore[arg-type]


def test_should_inject_is_seed_001_rule() -> None:
    assert should_inject(["high"])
    assert should_inject(["medium", "none", "medium"])
    assert not should_inject(["medium", "none"])
    assert not should_inject([])


def test_a_relevant_memory_is_never_explained_as_weak() -> None:
    from memroute.retrieval.decide import reason

    bare = {"cosine": 0.1, "session_best": 0.0}
    assert reason(bare, [], None, None, "ja") == "関連は弱い"
    assert reason(bare, [], None, None, "ja", "medium", 0.13) == "リランカーの評価が高い（p 0.13）"
    assert reason(bare, [], None, None, "en", "high", 0.5) == "ranked likely by the reranker (p 0.50)"
    assert reason(bare, ["Osaka"], None, None, "en", "medium", 0.2) == "mentions Osaka"


def test_pack_is_in_the_conversation_language_and_within_budget() -> None:
    entries = [PackEntry(NOW - timedelta(days=8), "プロジェクトXの締切は金曜日" * 20, "サポートしますよ", None,
                         "「締切」に言及"),
               PackEntry(NOW - timedelta(days=9), "二件目の記憶", None, "田中", "意味が近い")]
    full = render(entries, "ja", max_chars=10_000)
    assert full.startswith("[EPISODE_EVIDENCE]\n以下は現在の会話に関連する過去のやりとりです。")
    assert "[2025-06-10] ユーザー: 「プロジェクトX" in full and "パートナー: 「サポートしますよ」" in full
    assert "田中: 「二件目の記憶」" in full and "→ 関連: 意味が近い" in full
    small = render(entries, "ja", max_chars=300)
    assert len(small) <= 300 and "…" in small and "二件目" not in small
    assert estimate_tokens(render(entries, "ja", max_chars=None, max_tokens=120)) <= 120
    assert render(entries, "ja", max_chars=20) == ""
    assert render([], "en") == ""
    assert "The following past exchanges" in render(entries[1:], "en")


def test_eval_scores() -> None:
    s = scores(["x", "e1", "y", "z", "w", "e2"], frozenset({"e1", "e2"}))
    assert s["recall@5"] == 0.5 and s["recall@10"] == 1.0 and s["hit@5"] == 1.0 and s["mrr"] == 0.5
    ideal = 1 + 1 / math.log2(3)
    assert s["ndcg@10"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(7)) / ideal)
    assert scores([], frozenset({"a"}))["mrr"] == 0.0


def test_locomo_loader_on_a_tiny_fixture(tmp_path: Path) -> None:
    assert parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    with pytest.raises(InputError):
        parse_session_date("sometime")
    turns = [{"dia_id": f"D1:{i}", "speaker": "Ann" if i % 2 else "Bo", "text": f"line {i}"} for i in range(1, 6)]
    turns[2]["img_caption"] = "a cat on a sofa"
    (tmp_path / "sessions.jsonl").write_text(json.dumps({"sample_id": "c1", "speaker_a": "Ann", "speaker_b": "Bo",
        "sessions": [{"session": 1, "date_time": "10:00 am on 2 June, 2024", "turns": turns}]}) + "\n")
    (tmp_path / "qa.jsonl").write_text(
        json.dumps({"sample_id": "c1", "qa_idx": 0, "question": "q?", "category": 4, "evidence_resolved": ["D1:3"]})
        + "\n" + json.dumps({"sample_id": "c1", "qa_idx": 1, "question": "none?", "category": 5,
                             "evidence_resolved": []}) + "\n")
    (conv,) = load_locomo(tmp_path)
    assert [q.evidence for q in conv.questions] == [("c1:D1:3",)]
    mems = list(conv.memories())
    assert mems[2]["text"] == "Ann: line 3 [shared a photo: a cat on a sofa]"
    assert mems[2]["context"].split("\n") == ["Ann: line 1", "Bo: line 2", "Bo: line 4", "Ann: line 5"]
    assert conv.now == datetime(2024, 6, 3, 10, 0, 4, tzinfo=UTC)


_HALVES = [k / 10_000 + 0.00005 for k in range(-300, 300)]  # ties in decimal, a hair off in binary
_AWKWARD = [0.0, -0.0, 1.0, 2.675, 0.12345, -0.12345, 1e4 + 0.00005, 123456.78905, 1e20, -1e-9, 5e-5,
            float("inf"), float("-inf"), 1.0000499999999999, 0.30000000000000004]


@given(st.lists(st.floats(allow_nan=False, width=64), min_size=20, max_size=80))
def test_trace_rounds_every_feature_as_round_does(values: list[float]) -> None:
    _check_trace_rounding(values)


def test_trace_rounds_decimal_ties_and_odd_values_as_round_does() -> None:
    _check_trace_rounding(_HALVES + _AWKWARD)
    _check_trace_rounding([-0.0] * 20)  # a rerank, final or judge of -0.0 is written -0.0, as round gives it
    nan = _trace_features([float("nan")] * 20)
    assert all(math.isnan(v) for v in nan)


def _trace_features(values: list[float]) -> list[float]:
    from memroute.retrieval.trace import CandidateTrace, RecallTrace, SearchTrace
    half = len(values) // 2
    cands = (CandidateTrace("a", values[0], 0, None, {"bm25:0": values[1]},
                            {f"f{i}": v for i, v in enumerate(values[:half])}, judge=values[2]),
             CandidateTrace("b", 0.5, 1, values[3], {}, {f"f{i}": v for i, v in enumerate(values[half:])}))
    search = SearchTrace("bm25:0", 1.0, 0.1, tuple((f"m{i}", v) for i, v in enumerate(values)))
    out = RecallTrace("semantic", False, {}, None, (), (search,), "rrf", cands, {}, {}, ()).to_dict()
    hits = [v for _, v in out["searches"][0]["hits"]]
    features = [v for c in out["candidates"] for v in c["features"].values()]
    assert [repr(v) for v in hits] == [repr(v) for v in features]
    first, second = out["candidates"]
    assert [repr(first["fused"]), repr(first["scores"]["bm25:0"]), repr(first["judge"]), repr(second["rerank"])] == \
        [repr(round(v, 4)) for v in values[:4]]
    assert first["rerank"] is None and first["final"] is None and second["judge"] is None
    return features


def _check_trace_rounding(values: list[float]) -> None:
    # repr: -0.0 and 0.0 compare equal but are written differently
    assert [repr(v) for v in _trace_features(values)] == [repr(round(v, 4)) for v in values]


def test_rerank_features_read_each_candidates_lists_session_and_date() -> None:
    from memroute.retrieval.rerank import FEATURES, Candidate, features
    from memroute.types import MemoryItem

    def cand(i: str, fused: float, rank: int, scores: dict[str, float], session: str | None, days: int,
             text: str) -> Candidate:
        return Candidate(MemoryItem(i, "o", text, session_id=session, occurred_at=NOW - timedelta(days=days)),
                         fused, rank, scores, 0.1 * (3 - rank))

    cands = [cand("a", 0.8, 0, {"bm25:0": 0.5, "vector:0": 1.0, "bm25:1": 0.75}, "s1", 10, "I adopted a cat"),
             cand("b", 0.4, 1, {"vector:0": 0.25}, "s1", 0, "The cat sleeps"),
             cand("c", 0.2, 2, {"bm25:1": 1.0}, "s2", 20, "Nothing here"),
             cand("d", 0.1, 3, {}, None, 5, "Another cat")]
    x = features(cands, analyze("my cat"), NOW)
    col = {name: j for j, name in enumerate(FEATURES)}
    assert x[:, col["bm25"]].tolist() == [0.75, 0.0, 1.0, 0.0]  # the best of the candidate's keyword lists
    assert x[:, col["vector"]].tolist() == [1.0, 0.25, 0.0, 0.0]
    assert x[:, col["n_lists"]].tolist() == [1.0, 1 / 3, 1 / 3, 0.0]
    assert x[:, col["fused"]].tolist() == [1.0, 0.5, 0.25, 0.125]
    # the other candidates of its session: none for one alone or without a session
    assert x[:, col["session_best"]].tolist() == [0.5, 1.0, 0.0, 0.0]
    assert x[:, col["session_sum"]].tolist() == [0.5 / 4, 1.0 / 4, 0.0, 0.0]
    assert x[:, col["session_share"]].tolist() == [0.5, 0.5, 0.25, 0.0]
    assert x[:, col["recency"]].tolist() == [0.5, 1.0, 0.0, 0.75]
    assert x[:, col["keyword_overlap"]].tolist() == [1.0, 1.0, 0.0, 1.0]


def test_rerank_feature_asks_when_dated_reads_each_text_again_alike() -> None:
    from memroute.retrieval.rerank import FEATURES, Candidate, features
    from memroute.types import MemoryItem

    texts = ["We met last week", "The cat sleeps", "先週ランチに行った", "고양이가 자요", "Back in 2019 I moved"]
    cands = [Candidate(MemoryItem(f"m{i}", "o", t), 1.0 / (i + 1), i, {}, 0.5) for i, t in enumerate(texts)]
    col = FEATURES.index("asks_when_dated")
    for _ in range(2):  # the second time from the kept answers
        assert features(cands, analyze("When did we meet?"), NOW)[:, col].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0]
        assert features(cands, analyze("Where did we meet?"), NOW)[:, col].tolist() == [0.0] * 5
