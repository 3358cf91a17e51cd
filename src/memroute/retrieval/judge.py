"""The calibrated relevance judge: seed 001's high / medium / none from the encoder's and the store's own
score distributions, not from fixed cosines.

A fixed cosine cut-off means different things for different encoders (use-m3 puts a close paraphrase
at 0.5, e5-small puts unrelated texts at 0.75) and for different stores (in ten personal memories one
clear answer stands far above the rest at a cosine that, in a chat log of thousands of turns, is noise).
So the judge reads, for every candidate of one recall:

- ``cosine``: its cosine to the query, in the encoder's own scale (the model is fitted per encoder);
- ``cosine_z``, ``cosine_lead``: how far it stands above this owner's other candidates, as a z-score
  against their mean and spread, and as its lead over the best other candidate (store-relative);
- ``keyword_overlap``: share of the query's keywords in it, after morphological normalisation (English
  stems, Japanese and Korean dictionary forms);
- ``rerank_logit``: the local reranker's logit; ``rank_rr``: 1 / (1 + its rank in the final order);
  ``bm25``: its min-max keyword score;
- ``rerank_z``, ``rerank_lead``: the reranker's logit against this recall's other candidates (z-score,
  and lead over the best other one): the reranker was fitted on LoCoMo and gives a small store's
  candidates probabilities near 0.001, but its order among them still says something;
- ``constraint``: the constraint search found it for a request (:mod:`memroute.retrieval.constraints`);
  such a constraint is no rival of the other candidates in their leads (it answers the request's need,
  not the question the others answer);
- a fact that changed (an older memory superseded by a newer one among the first
  :data:`~memroute.retrieval.changes.CONTENDERS`, found before the judge) is one answer told twice: the
  newer memory takes the stronger of the pair's cosine, reranker probability, keyword overlap, BM25 and
  rank, and neither is the other's rival in the leads (else the stale fact would hold the newer one's
  lead at zero, and the newer one would be judged ``none`` for standing no higher than what it replaces);
- ``pool``: log of the number of candidates (few in a small store, fifty in a long chat log), and
  ``few`` = 1 / ``pool`` times each store-relative feature (``cosine_z_few``, ``cosine_lead_few``,
  ``keyword_overlap_few``, ``rerank_logit_few``, ``rerank_z_few``, ``rerank_lead_few``): a linear model
  can then weigh a feature differently in a store of ten memories and in a chat log of thousands,
  learned from the data; the store size is a feature, not a switch;
- the query type (factual, conceptual, temporal; the others are the baseline);
- ``interaction``: the logit of the encoder's question-memory interaction model
  (:mod:`memroute.retrieval.interaction`, from the query's and the memory's vectors), and against this
  recall's other candidates ``interaction_z`` and ``interaction_lead``; zeros for an encoder without one.

A logistic model over these gives the probability that the candidate answers the message. Which
features it reads (the first twelve; with ``rerank_z`` and ``rerank_lead``; or all, with the store-size
products) and its L2 strength are chosen per encoder by leave-one-group-out on the training data (each
everyday store and each LoCoMo conversation held out in turn; :func:`memroute.retrieval.judge_fit.select`),
by the objective that also sets the cut-offs. It is fitted
per packaged encoder by ``memroute eval recall --fit-judge`` (:mod:`memroute.retrieval.judge_fit`) on
training questions: LoCoMo's (a candidate answers when it is an evidence turn) and the everyday-recall
training split (a candidate answers when it is one of the question's answering memories; unanswerable
questions have none; a stale or merely related memory is left out). Each data set weighs the same.
The same fit then chooses, by a grid over the fitted probabilities of those training questions, two
cut-offs and a relative share: the ones closest to issue 21's targets for answerable questions whose
answering memory is injected (0.85), injected memories that answer (0.80) and unanswerable questions
with nothing injected (0.90) (:mod:`memroute.retrieval.judge_fit`). A candidate at or above the high
cut-off is high, between the two medium, below none, and none as well when its probability is under
the relative share of the best candidate's in this recall (a second memory is offered only when it
stands near the first); seed 001's rule (one high, or two medium) then decides injection. The fitted
models ship in ``judge_weights.json`` with what they were fitted on; an encoder without its own fit
uses the ``any`` model, fitted on the same data without the raw cosine (only the store-relative
features). Without the reranker (``RecallOptions(rerank=False)``) the fixed rules of
:mod:`memroute.retrieval.decide` apply; with an LLM configured, seed 001's LLM judge still has the
last word on the candidates it saw (:mod:`memroute.retrieval.llm_steps`). Without an LLM, the judge's
probability also orders the memories a recall returns (the first ``limit`` of the reranker's order, so the
same memories): the reranker was fitted on LoCoMo with use-m3's cosine and reads another encoder's
cosine on the wrong scale, where the judge is fitted per encoder and on small personal stores too (on the
everyday train split, each store's judge refitted without it, before newer facts are moved first: the first
memory answers 63 -> 76 of 102 questions with use-m3+e5-small, 67 -> 68 with use-m3). The everyday set's dev split
is never read by the fit: ``memroute eval everyday --split dev`` reports it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from memroute.errors import ConfigError

JUDGE_FEATURES = ("cosine", "cosine_z", "cosine_lead", "keyword_overlap", "rerank_logit", "rank_rr", "bm25",
                  "constraint", "pool", "qt_factual", "qt_conceptual", "qt_temporal", "rerank_z", "rerank_lead",
                  "cosine_z_few", "cosine_lead_few", "keyword_overlap_few", "rerank_logit_few", "rerank_z_few",
                  "rerank_lead_few", "interaction", "interaction_z", "interaction_lead")
_FEW = ("cosine_z", "cosine_lead", "keyword_overlap", "rerank_logit", "rerank_z", "rerank_lead")
"""Features also given multiplied by ``few`` (1 / log of the number of candidates)."""
ANY_ENCODER = "any"
_QUERY_TYPES = {"factual": "qt_factual", "conceptual": "qt_conceptual", "temporal": "qt_temporal"}


@dataclass(frozen=True, slots=True)
class JudgeModel:
    """A logistic model over :data:`JUDGE_FEATURES` (a zero weight leaves a feature out) and its cut-offs."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    high: float
    medium: float
    relative: float = 0.0
    """A candidate under this share of the recall's best probability is ``none`` (store-relative)."""
    fitted_on: str = ""

    def probability(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        logits = z @ np.asarray(self.weights) + self.bias
        out: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))
        return out

    def level(self, p: float, best: float) -> Literal["high", "medium", "none"]:
        """``p``'s level in a recall whose best candidate has probability ``best``."""
        if p < self.relative * best:
            return "none"
        return "high" if p >= self.high else "medium" if p >= self.medium else "none"

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(JUDGE_FEATURES), "weights": list(self.weights), "bias": self.bias,
                "mean": list(self.mean), "scale": list(self.scale), "high": self.high, "medium": self.medium,
                "relative": self.relative, "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeModel:
        if list(data.get("features", ())) != list(JUDGE_FEATURES):
            raise ConfigError("the judge was fitted for other features; refit it with "
                              "`memroute eval recall --data DIR --fit-judge`")
        return cls(tuple(map(float, data["weights"])), float(data["bias"]), tuple(map(float, data["mean"])),
                   tuple(map(float, data["scale"])), float(data["high"]), float(data["medium"]),
                   float(data.get("relative", 0.0)), str(data.get("fitted_on", "")))


Floats = Sequence[float] | npt.NDArray[np.float64]


def judge_features(cosines: Floats, rerank: Floats, keyword_overlap: Floats, bm25: Floats, ranks: Sequence[int],
                   constraint: Sequence[bool], query_type: str,
                   changed: Sequence[tuple[int, int]] = (),
                   interaction: Floats | None = None) -> npt.NDArray[np.float64]:
    """One row of :data:`JUDGE_FEATURES` per candidate; ``ranks`` are positions in the final order;
    ``changed`` are (older, newer) candidate indices of facts that changed (:mod:`memroute.retrieval.changes`);
    ``interaction``: the interaction model's logits (:mod:`memroute.retrieval.interaction`), None without one.

    A fact that changed is one answer told twice: the newer memory takes the stronger of the pair's
    evidence (cosine, reranker probability, keyword overlap, BM25, rank), and neither counts as the
    other's rival in the leads (how far a candidate stands above the best *other* one); nor does a
    constraint the constraint search found for a request count as a rival of the other candidates."""
    n = len(cosines)
    x = np.zeros((n, len(JUDGE_FEATURES)), dtype=np.float64)
    if n == 0:
        return x
    col = {name: j for j, name in enumerate(JUDGE_FEATURES)}
    cos = np.array(cosines, dtype=np.float64)
    rerank = np.array(rerank, dtype=np.float64)
    keyword_overlap = np.array(keyword_overlap, dtype=np.float64)
    bm25 = np.array(bm25, dtype=np.float64)
    ranks = list(ranks)
    inter = np.array(interaction, dtype=np.float64) if interaction is not None else None
    for old, new in changed:
        for values in (cos, rerank, keyword_overlap, bm25) + ((inter,) if inter is not None else ()):
            values[new] = max(values[new], values[old])
        ranks[new] = min(ranks[new], ranks[old])
    cos_mean, spread = mean_std(cos) if n > 1 else (0.0, 0.0)
    x[:, col["cosine"]] = cos
    x[:, col["cosine_z"]] = np.clip((cos - cos_mean) / max(spread, 0.02), -5, 5) if n > 1 else 0.0
    p = np.clip(rerank, 1e-6, 1 - 1e-6)
    x[:, col["rerank_logit"]] = np.log(p / (1 - p))
    x[:, col["keyword_overlap"]] = keyword_overlap
    x[:, col["bm25"]] = bm25
    x[:, col["rank_rr"]] = 1.0 / (1.0 + np.asarray(ranks, dtype=np.float64))
    x[:, col["constraint"]] = np.asarray(constraint, dtype=np.float64)
    x[:, col["pool"]] = math.log(n)
    qt = _QUERY_TYPES.get(query_type)
    if qt is not None:
        x[:, col[qt]] = 1.0
    logit = x[:, col["rerank_logit"]]
    if n > 1:
        logit_mean, logit_std = mean_std(logit)
        x[:, col["rerank_z"]] = (logit - logit_mean) / max(logit_std, 0.1)
        x[:, col["cosine_lead"]] = _leads(cos, constraint, changed, 0.3)
        x[:, col["rerank_lead"]] = _leads(logit, constraint, changed, 3.0)
    if inter is not None:
        x[:, col["interaction"]] = inter
        if n > 1:
            inter_mean, inter_std = mean_std(inter)
            x[:, col["interaction_z"]] = (inter - inter_mean) / max(inter_std, 0.1)
        x[:, col["interaction_lead"]] = _leads(inter, constraint, changed, 3.0) if n > 1 else 3.0
    few = 1.0 / math.log(n) if n > 1 else 1.0
    for name in _FEW:
        x[:, col[f"{name}_few"]] = x[:, col[name]] * few
    return x


def mean_std(values: npt.NDArray[np.float64]) -> tuple[float, float]:
    """``(values.mean(), values.std())`` to the bit, in a third of their time: numpy's own steps (the pairwise
    sum divided by n; the sum of the squared deviations from that mean divided by n; its square root) without
    the argument handling of ``np.mean`` / ``np.std``, which cost ~10 µs a call on a recall's 50 values."""
    n = len(values)
    mean = float(np.add.reduce(values)) / n
    deviations = values - mean
    deviations *= deviations
    return mean, math.sqrt(float(np.add.reduce(deviations)) / n)


def _leads(values: npt.NDArray[np.float64], constraint: Sequence[bool], changed: Sequence[tuple[int, int]],
           alone: float) -> npt.NDArray[np.float64]:
    """Each value's lead over the best value of its rivals: the other candidates, less its partner in a fact
    that changed and the constraints found for a request (unless it is one); ``alone`` when none is left."""
    n = len(values)
    if not changed and not any(constraint):
        top = int(np.argmax(values))
        out: npt.NDArray[np.float64] = values - np.where(np.arange(n) == top, np.partition(values, -2)[-2],
                                                         values[top])
        return out
    out = np.full(n, alone, dtype=np.float64)
    promoted = {k for k in range(n) if constraint[k]}
    partners: dict[int, set[int]] = {}
    for old, new in changed:
        partners.setdefault(old, set()).add(new)
        partners.setdefault(new, set()).add(old)
    best_first = [int(j) for j in np.argsort(-values, kind="stable")]
    for k in range(n):
        left = {k} | partners.get(k, set()) | (promoted - {k})
        rival = next((j for j in best_first if j not in left), None)
        if rival is not None:
            out[k] = values[k] - values[rival]
    return out


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    try:
        text = resources.files("memroute.retrieval").joinpath("judge_weights.json").read_text("utf-8")
    except FileNotFoundError:
        return {}  # before the first fit only: recall falls back to the fixed rules of decide.py
    data: dict[str, Any] = json.loads(text)
    return data


def judge_for(model_id: str) -> JudgeModel | None:
    """The judge fitted for the encoder ``model_id`` (an embedder's ``model_id``), else the ``any`` one;
    None when nothing was fitted yet (``judge_weights.json`` missing)."""
    encoders: Mapping[str, Any] = _shipped().get("encoders", {})
    key = model_id if model_id in encoders else ANY_ENCODER
    return _model(key) if key in encoders else None


@lru_cache(maxsize=8)
def _model(key: str) -> JudgeModel:
    return JudgeModel.from_dict(_shipped()["encoders"][key])


def clear_cache() -> None:
    _shipped.cache_clear()
    _model.cache_clear()
