"""The life-topic agreement column: the bank loads, the column is computed from the vectors recall already has, a
model reads it (a missing score as the column's mean), and a paraphrase written here ranks its answer higher with it.
The sentences below are this file's own, not evaluation data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memroute import Memory
from memroute.embed import get_embedder
from memroute.errors import ConfigError
from memroute.retrieval import topics
from memroute.retrieval.rerank import FEATURES, LATE, TOPIC, RerankModel, reranker_for, small_names
from memroute.retrieval.rerank_fit import fit_reranker


def test_the_bank_loads_with_every_language_in_every_topic() -> None:
    bank = topics.bank()
    assert 25 <= len(bank) <= 40
    for name, t in bank.items():
        text = " ".join(topics.texts(t))
        assert any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in text), name  # Japanese
        assert any("\uac00" <= ch <= "\ud7a3" for ch in text), name  # Korean
        assert any(ch.isascii() and ch.isalpha() for ch in t["questions"][0]), name  # an English question


def test_a_topic_without_questions_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = {"topics": {"work": {"description": "jobs", "statements": ["I work."], "questions": []}}}
    monkeypatch.setattr(topics, "_bank_text", lambda: json.dumps(broken))
    with pytest.raises(ConfigError, match="work"):
        topics.bank.__wrapped__()


def test_agreement_is_the_probability_of_one_topic_and_nan_without_a_vector() -> None:
    class TwoTopics:
        """Every text of the bank's first topic along the first axis, every other along the second."""

        model_id = "test/two-topics"

        def embed(self, texts: list[str], side: str = "passage") -> np.ndarray:
            first = set(topics.texts(next(iter(topics.bank().values()))))
            return np.array([[1.0, 0.0] if t in first else [0.0, 1.0] for t in texts], dtype=np.float32)

    e = TwoTopics()
    pq, pp = topics.prototypes(e)
    assert pq.shape == (len(topics.bank()), 2) and np.allclose(np.linalg.norm(pp, axis=1), 1.0)
    got = topics.agreement(e, np.array([1.0, 0.0], np.float32),
                           [np.array([1.0, 0.0], np.float32), None, np.array([0.0, 1.0], np.float32)])
    assert got[0] == pytest.approx(1.0, abs=1e-6) and np.isnan(got[1]) and got[2] == pytest.approx(0.0, abs=1e-6)


def test_a_topic_model_reads_a_missing_score_as_the_columns_mean_and_round_trips() -> None:
    rng = np.random.default_rng(4)
    x = rng.random((200, len(FEATURES)))
    late, topic = rng.random(200), rng.random(200)
    y = (topic + 0.3 * x[:, 0] > 0.8).astype(float)
    model = fit_reranker(x, y, l2=1.0, late=late, topic=topic, small=(rng.random(200) > 0.5).astype(float))
    assert model.topic and model.late and model.to_dict()["features"][len(FEATURES):len(FEATURES) + 2] == [LATE, TOPIC]
    assert RerankModel.from_dict(model.to_dict()) == model
    alone = fit_reranker(x, y, l2=1.0, topic=topic)
    assert alone.columns == (*FEATURES, TOPIC) and not alone.late
    assert alone.to_dict()["features"] == [*FEATURES, TOPIC]
    assert RerankModel.from_dict(alone.to_dict()) == alone
    assert small_names(alone.columns)[-2] == f"small_{TOPIC}"
    xs = x[:3]
    mean = alone.mean[len(FEATURES)]
    assert np.allclose(alone.score(xs, topic=np.array([0.9, np.nan, 0.1])),
                       alone.score(xs, topic=np.array([0.9, mean, 0.1])))
    assert np.allclose(alone.score(xs), alone.score(xs, topic=np.full(3, mean)))
    assert alone.score(xs[:1], topic=[0.95])[0] > alone.score(xs[:1], topic=[0.05])[0]  # fitted to raise it


def test_recall_traces_the_agreement_only_where_it_is_read_or_asked_for(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    mem = Memory.open(f"sqlite:///{tmp_path / 't.db'}", owner="o", embedder="use-m3")
    texts = ["I repair elevators for a company in town.", "I'm living with two roommates right now.",
             "I do pottery on Sundays.", "We adopted a grey rabbit named Pebble."]
    mem.remember_many([{"id": f"m{i}", "text": t} for i, t in enumerate(texts)])
    question = "What do I do for a living?"
    assert not reranker_for(mem.embedder.model_id).topic  # use-m3's reranker does not read it: not computed
    assert all(TOPIC not in c.features for c in mem.recall(question).trace.candidates)
    monkeypatch.setattr(topics, "TRACE", True)  # as `memroute eval recall --fit` sets it
    cands = mem.recall(question).trace.candidates
    assert cands and all(TOPIC in c.features for c in cands)
    e = get_embedder("use-m3")
    qv = e.embed([question], side="query")[0]
    want = topics.agreement(e, qv, list(e.embed([texts[int(c.id[1:])] for c in cands])))
    assert [c.features[TOPIC] for c in cands] == pytest.approx(want.tolist(), abs=1e-4)
    mem.close()


def test_a_paraphrase_ranks_its_answer_higher_with_the_agreement() -> None:
    """A question sharing no word with its answer, and a distractor sharing "living" with it: cosine alone puts the
    distractor first; cosine plus the agreement puts the answer first."""
    e = get_embedder("use-m3")
    question = "What do I do for a living?"
    answer, distractor = "I repair elevators for a company in town.", "I'm living with two roommates right now."
    qv = e.embed([question], side="query")[0]
    mv = e.embed([answer, distractor])
    cosine = mv @ qv
    agreement = topics.agreement(e, qv, list(mv))
    assert cosine[0] < cosine[1]
    assert agreement[0] > agreement[1]
    assert (cosine + 0.3 * agreement)[0] > (cosine + 0.3 * agreement)[1]


def test_the_pairs_late_reranker_reads_the_agreement() -> None:
    from memroute.embed.tokens import ranking_id

    model = reranker_for(ranking_id(get_embedder("use-m3+e5-small")))
    assert model.late and model.topic and model.columns[-1] == TOPIC


@pytest.mark.parametrize("name", ["use-m3", "use-m3+e5-small"])
def test_the_shipped_prototypes_are_the_banks_embedded(name: str) -> None:
    e = get_embedder(name)
    entry = topics._shipped()[str(e.model_id)]
    assert entry["bank"] == topics.digest()
    for shipped, computed in zip((topics._decoded(entry, "query"), topics._decoded(entry, "passage")),
                                 topics.embedded(e), strict=True):
        assert shipped.shape == (len(topics.bank()), e.dimension)
        assert np.abs(shipped - computed).max() < 1e-3


def test_prototypes_of_another_bank_are_computed_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    e = get_embedder("use-m3")
    monkeypatch.setattr(topics, "_prototypes", {})
    monkeypatch.setattr(topics, "digest", lambda: "another bank")
    calls: list[object] = []
    monkeypatch.setattr(topics, "embedded", lambda emb: calls.append(emb) or (np.eye(2, dtype=np.float32),) * 2)
    assert topics.prototypes(e)[0].shape == (2, 2) and calls == [e]
