"""The offline MaxSim-as-a-reranker-column estimate (benchmarks/estimate_late_interaction.py): its columns, and a
whole run (real use-m3 and e5, real SQLite) on tiny sets written here (no evaluation data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from benchmarks import estimate_late_interaction as est
from benchmarks import probe_late_interaction as probe

from tests.locomo_files import write_locomo


def test_columns_equal_the_reference_candidate_by_candidate() -> None:
    rng = np.random.default_rng(3)

    def enc(n: int) -> probe.Encoded:
        tokens = rng.normal(size=(n, 16)).astype(np.float32)
        tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
        return probe.Encoded(list(rng.integers(0, 30, size=n)), tokens, {})

    mems = {f"m{i}": enc(n) for i, n in enumerate((1, 6, 3, 9))}
    others = [enc(4), enc(5)]  # the run's other memories: the fixed mean and idf count them, the store's do not
    run = [*mems.values(), *others]
    fixed_mean = np.concatenate([e.tokens for e in run]).mean(axis=0)
    passages = est.Passages(mems, fixed_mean, probe.idf(run))
    query = enc(5)
    order = ["m2", "m0", "m3"]
    table = passages.columns(query, order)
    assert table.shape == (3, len(est.COLUMNS))
    mean = np.concatenate([e.tokens for e in mems.values()]).mean(axis=0)
    w, fw = probe.idf(list(mems.values()))(query.ids), probe.idf(run)(query.ids)

    def cen(x: np.ndarray, m: np.ndarray) -> np.ndarray:
        return np.asarray((x - m) / np.linalg.norm(x - m, axis=1, keepdims=True), np.float32)

    for row, mid in enumerate(order):
        q, d = query.tokens, mems[mid].tokens
        expect = [probe.maxsim(q, d), probe.maxsim(q, d, w), probe.maxsim(cen(q, mean), cen(d, mean)),
                  probe.maxsim(cen(q, mean), cen(d, mean), w), probe.maxsim(cen(q, fixed_mean), cen(d, fixed_mean), w),
                  probe.maxsim(cen(q, fixed_mean), cen(d, fixed_mean), fw)]
        assert table[row] == pytest.approx(expect, abs=1e-5), mid
    assert not np.allclose(table[:, 3], table[:, 5])  # the store's idf and mean are not the run's


def _store(sid: str, memories: list[str], questions: list[tuple[str, str, list[int]]]) -> dict[str, object]:
    return {"store": sid, "split": "train", "persona": "a test owner",
            "memories": [{"id": f"{sid}-m{i}", "text": t, "language": "en", "occurred_at": "2025-03-01T09:00:00+00:00"}
                         for i, t in enumerate(memories)],
            "questions": [{"id": f"{sid}-q{i}", "text": t, "language": "en", "type": kind,
                           "now": "2025-06-01T12:00:00+00:00", "answers": [f"{sid}-m{a}" for a in ans],
                           **({"subtype": "task"} if kind == "unanswerable" else {})}
                          for i, (t, kind, ans) in enumerate(questions)]}


def test_a_whole_run_reports_both_settings_and_reuses_its_cache(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    locomo = tmp_path / "locomo"
    locomo.mkdir()
    write_locomo(locomo)
    everyday = tmp_path / "train.jsonl"
    everyday.write_text("".join(json.dumps(s) + "\n" for s in (
        _store("s1", ["My cat is called Mochi.", "I live in Leeds.", "I play tennis on Fridays."],
               [("What is my cat called?", "direct", [0]), ("What is 17 times 3?", "unanswerable", [])]),
        _store("s2", ["My sister Jo is a nurse.", "I drive a red van.", "I am allergic to peanuts."],
               [("What car do I drive?", "direct", [1]), ("Can I eat satay?", "constraint", [2])]))))
    argv = ["--locomo", str(locomo), "--everyday", str(everyday), "--workdir", str(tmp_path / "work"),
            "--cache", str(tmp_path / "cache"), "--columns", "centred-idf,maxsim", "--json"]
    assert est.main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    rows = first["rows"]
    assert [(r["setting"], r["column"]) for r in rows] == [
        (s, c) for s in ("A", "B") for c in ("without", "centred-idf", "maxsim")]
    for r in rows:
        assert 0 <= r["locomo_recall@5"] <= 1 and 0 <= r["locomo_mrr"] <= 1
        assert r["train_answerable"] == 3 and 0 <= r["train_first"] <= 3
        if r["column"] != "without":
            up, down = r["locomo_up_down"]
            assert up + down <= 4
    assert {p.name for p in (tmp_path / "cache").iterdir()} == {"rows-use-m3.pkl", "e5-tokens.pkl"}
    assert est.main(argv) == 0  # from the cache: the same figures
    assert json.loads(capsys.readouterr().out)["rows"] == rows
    with pytest.raises(SystemExit):
        est.main([*argv[:-3], "--columns", "no-such-column"])


def test_correlations_read_each_question_s_candidates_apart() -> None:
    from memroute.retrieval import FEATURES

    rng = np.random.default_rng(5)
    rows = []
    for n in (6, 9, 3):  # the question with three candidates is left out
        x = rng.normal(size=(n, len(FEATURES)))
        m = np.zeros((n, len(est.COLUMNS)))
        m[:, est.COLUMNS.index("maxsim")] = 2 * x[:, FEATURES.index("bm25")] + 100 * len(rows)  # bm25's order
        m[:, est.COLUMNS.index("maxsim-idf")] = -x[:, FEATURES.index("cosine")]  # cosine's reversed
        rows.append({"ids": tuple(range(n)), "x": x, "m": m})
    corr = est.correlations(rows, ["maxsim", "maxsim-idf"])
    assert corr["maxsim"]["bm25"] == pytest.approx(1.0)
    assert corr["maxsim-idf"]["cosine"] == pytest.approx(-1.0)
    assert abs(corr["maxsim"]["cosine"]) < 1
