"""Fitting the calibrated judge (:mod:`memroute.retrieval.judge`) on training questions.

A training question is what one recall judged: the judge's features of its first ``limit`` memories in
the final order (computed over all its candidates, as at run time, from the trace alone), which of them
answer, and whether anything could. Candidates labelled neither way (an everyday question's stale or
related memories) are left out of the fit and of precision.

The fit is a logistic regression (:func:`memroute.retrieval.rerank_fit.fit_logistic`), each data set
weighed equally (LoCoMo has ten times the questions). The two cut-offs are then chosen on the same
training questions by a grid over the fitted probabilities (with the relative share of
:data:`RELATIVE_GRID`): the triple that comes closest to the targets
of issue 21 (:data:`TARGETS`), summed over the data sets. For each share that a set can measure
(answerable questions whose answer is injected; injected memories that answer; unanswerable questions
with nothing injected) the objective counts the share up to its target and no further (a share above
its target buys nothing another one lost), plus a twentieth of the plain mean to break ties; seed
001's rule decides injection (one high, or two medium).

:func:`select` chooses the feature set (:data:`FEATURE_SETS`) and the L2 strength (:data:`L2S`) by
the same objective, each everyday store and each LoCoMo conversation held out in turn.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memroute.errors import InputError
from memroute.retrieval.changes import CONTENDERS
from memroute.retrieval.judge import JUDGE_FEATURES, JudgeModel, judge_features
from memroute.retrieval.rerank_fit import fit_logistic
from memroute.retrieval.trace import RecallTrace

TARGETS = {"answer_injected": 0.85, "precision": 0.80, "abstention": 0.90}
"""The shares the cut-offs aim at (issue 21): a share counts up to its target in the objective."""
RELATIVE_GRID = (0.0, 0.3, 0.5, 0.7, 0.85)
"""The relative shares the fit tries."""
FEATURE_SETS = {
    "seed": tuple(i < 12 for i in range(len(JUDGE_FEATURES))),
    "store": tuple(i < 14 for i in range(len(JUDGE_FEATURES))),
    "store-size": tuple(i < 20 for i in range(len(JUDGE_FEATURES))),
    "interaction": tuple(True for _ in JUDGE_FEATURES),
}
"""The feature sets :func:`select` chooses from: the first judge's twelve; with the reranker's logit
relative to this recall's other candidates (``rerank_z``, ``rerank_lead``); and with the store-relative
features also multiplied by ``few`` (1 / log of the number of candidates), so their weights may differ
between a small personal store and a long chat log, learned from the data rather than switched; and all of
these with the interaction model's logit (``interaction``, ``interaction_z``, ``interaction_lead``)."""
L2S = (1.0, 3.0)
"""The L2 strengths :func:`select` chooses from."""
COSINE_FREE = tuple(f != "cosine" and not f.startswith("interaction") for f in JUDGE_FEATURES)
"""The features of the ``any`` judge (an encoder without a fit of its own): all but the raw cosine and the
interaction model's (an encoder without a judge of its own has no interaction model either)."""


@dataclass(frozen=True, slots=True)
class JudgedQuestion:
    dataset: str
    x: npt.NDArray[np.float64]
    """Judge features of the first ``limit`` memories in the final order."""
    y: npt.NDArray[np.float64]
    """1: answers; 0: does not; nan: neither (left out)."""
    answerable: bool


def judged_question(trace: RecallTrace, answers: Collection[str], dataset: str, answerable: bool = True,
                    ignore: Collection[str] = (), limit: int = 5,
                    interaction: Sequence[float] | None = None) -> JudgedQuestion:
    """The judge's rows for the first ``limit`` candidates of ``trace``; ``interaction``: the interaction
    logits of every candidate the judge reads, in the final order, in place of the trace's (the judge's fit
    passes cross-fitted ones, :func:`memroute.eval.interaction_fit.stacked`)."""
    cands = [c for c in trace.candidates if c.final_rank is not None and c.rerank is not None]
    cands.sort(key=lambda c: c.final_rank if c.final_rank is not None else 0)
    qtype = str((trace.analysis or {}).get("query_type", ""))
    index = {c.id: k for k, c in enumerate(cands)}
    # the facts that changed among the first contenders, as the judge saw them before the final order
    changed = [(index[old], index[new]) for old, new in trace.superseded.items()
               if max(index.get(old, CONTENDERS), index.get(new, CONTENDERS)) < CONTENDERS]
    x = judge_features([c.features.get("cosine", 0.0) for c in cands], [c.rerank or 0.0 for c in cands],
                       [c.features.get("keyword_overlap", 0.0) for c in cands],
                       [c.features.get("bm25", 0.0) for c in cands], [c.final_rank or 0 for c in cands],
                       [c.id in trace.constraints for c in cands], qtype, changed,
                       interaction if interaction is not None else
                       [c.features["interaction"] for c in cands]
                       if cands and all("interaction" in c.features for c in cands) else None)[:limit]
    y = np.array([np.nan if c.id in ignore else float(c.id in answers) for c in cands[:limit]], dtype=np.float64)
    return JudgedQuestion(dataset, x, y, answerable)


def fit_judge(questions: Sequence[JudgedQuestion], fitted_on: str, use: Sequence[bool] | None = None,
              l2: float = 1.0) -> JudgeModel:
    """The logistic model and its two cut-offs (see the module docstring); ``use`` masks features out."""
    rows = [(q.dataset, q.x[i], q.y[i]) for q in questions for i in range(len(q.y)) if not np.isnan(q.y[i])]
    if not rows:
        raise InputError("no training candidates to fit the judge on")
    sets = sorted({d for d, _, _ in rows})
    count = {d: sum(1 for r in rows if r[0] == d) for d in sets}
    weight = np.array([len(rows) / (len(sets) * count[d]) for d, _, _ in rows])
    x = np.vstack([r[1] for r in rows])
    y = np.array([r[2] for r in rows])
    mask = np.array(use if use is not None else [True] * len(JUDGE_FEATURES), dtype=bool)
    w, bias, mean, scale = fit_logistic(x[:, mask], y, l2=l2, weight=weight)
    full_w = np.zeros(len(JUDGE_FEATURES))
    full_w[mask] = w
    full_mean = np.zeros(len(JUDGE_FEATURES))
    full_mean[mask] = mean
    full_scale = np.ones(len(JUDGE_FEATURES))
    full_scale[mask] = scale
    model = JudgeModel(tuple(map(float, full_w)), float(bias), tuple(map(float, full_mean)),
                       tuple(map(float, full_scale)), 1.0, 1.0, 0.0, fitted_on)
    high, medium, relative = choose_cutoffs(questions, model)
    return JudgeModel(model.weights, model.bias, model.mean, model.scale, high, medium, relative, fitted_on)


@dataclass(frozen=True, slots=True)
class Selection:
    features: str
    l2: float
    objective: float
    """The leave-one-group-out value of :func:`_objective` (higher is better)."""
    shares: dict[str, dict[str, float | None]]
    tried: dict[str, float]


def select(questions: Sequence[JudgedQuestion], groups: Sequence[str], folds: int = 4,
           features: Sequence[str] | None = None, l2s: Sequence[float] | None = None) -> Selection:
    """The feature set (:data:`FEATURE_SETS`) and L2 strength (:data:`L2S`) whose judge, refitted without
    each group (an everyday store, a LoCoMo conversation) and scored on it, comes closest to the targets
    (:func:`_objective`). A data set with a single group is split into ``folds`` by position. ``features`` and
    ``l2s`` narrow the choice (one of each holds the selection fixed: its held-out figures are still computed)."""
    unknown = sorted(set(features or ()) - set(FEATURE_SETS))
    if unknown:
        raise InputError(f"unknown judge feature set(s) {', '.join(unknown)}; known: {', '.join(FEATURE_SETS)}")
    if l2s is not None and (not l2s or any(not l2 > 0 for l2 in l2s)):
        raise InputError(f"the judge's L2 strengths must be positive, got {list(l2s)}")
    keys = _folds(questions, groups, folds)
    tried: dict[str, float] = {}
    best: Selection | None = None
    for name, use in FEATURE_SETS.items():
        if features is not None and name not in features:
            continue
        for l2 in l2s if l2s is not None else L2S:
            tally: dict[str, list[int]] = {}
            for key in dict.fromkeys(keys):
                model = fit_judge([q for q, k in zip(questions, keys, strict=True) if k != key], "", use, l2)
                for q, k in zip(questions, keys, strict=True):
                    if k == key:
                        add(tally, q, model.probability(q.x) if len(q.y) else np.zeros(0), model)
            got = {d: {k: v for k, v in s.items() if k != "answer_injected_when_found"}
                   for d, s in shares(tally).items()}
            value = _objective(got)
            tried[f"{name}, L2 {l2:g}"] = round(value, 4)
            if best is None or value > best.objective + 1e-9:
                best = Selection(name, l2, value, got, tried)
    if best is None:
        raise InputError("no training questions to select the judge's features on")
    return best


def _folds(questions: Sequence[JudgedQuestion], groups: Sequence[str], folds: int) -> list[str]:
    per_set: dict[str, set[str]] = {}
    for q, g in zip(questions, groups, strict=True):
        per_set.setdefault(q.dataset, set()).add(g)
    out: list[str] = []
    seen = {q.dataset: 0 for q in questions}
    for q, g in zip(questions, groups, strict=True):
        if len(per_set[q.dataset]) > 1:
            out.append(f"{q.dataset}:{g}")
        else:
            out.append(f"{q.dataset}:fold{seen[q.dataset] % folds}")
            seen[q.dataset] += 1
    return out


def choose_cutoffs(questions: Sequence[JudgedQuestion], model: JudgeModel) -> tuple[float, float, float]:
    """The high and medium cut-offs and the relative share (see :class:`~memroute.retrieval.judge.JudgeModel`)."""
    probs = [model.probability(q.x) if len(q.y) else np.zeros(0) for q in questions]
    every = np.concatenate([p for p in probs if len(p)]) if any(len(p) for p in probs) else np.zeros(1)
    grid = sorted({round(float(v), 4) for v in np.quantile(every, np.linspace(0.3, 0.995, 60))})
    sets = {d: _Padded([q for q in questions if q.dataset == d],
                       [p for q, p in zip(questions, probs, strict=True) if q.dataset == d])
            for d in dict.fromkeys(q.dataset for q in questions)}
    best, best_value = (1.0, 1.0, 0.0), -1.0
    for rel in RELATIVE_GRID:
        for hi in grid:
            for med in grid:
                if med > hi:
                    break
                value = _objective({d: padded.shares(hi, med, rel) for d, padded in sets.items()})
                if value > best_value + 1e-9:
                    best, best_value = (hi, med, rel), value
    return best


class _Padded:
    """One data set's questions as (questions, ``limit``) matrices, to score many cut-offs fast."""

    def __init__(self, questions: Sequence[JudgedQuestion], probs: Sequence[npt.NDArray[np.float64]]) -> None:
        width = max((len(q.y) for q in questions), default=0)
        self.p = np.full((len(questions), width), -1.0)
        self.y = np.full((len(questions), width), np.nan)
        for i, (q, p) in enumerate(zip(questions, probs, strict=True)):
            self.p[i, : len(p)] = p
            self.y[i, : len(q.y)] = q.y
        self.answerable = np.array([q.answerable for q in questions], dtype=bool)

    def shares(self, hi: float, med: float, rel: float) -> dict[str, float | None]:
        p = np.where(self.p >= rel * self.p.max(axis=1, keepdims=True), self.p, -1.0)
        n_high = (p >= hi).sum(axis=1)
        n_med = ((p >= med) & (p < hi)).sum(axis=1)
        chosen = (p >= med) & ((n_high >= 1) | (n_med >= 2))[:, None]
        good = chosen & (self.y == 1)
        counted = int((chosen & ~np.isnan(self.y)).sum())
        unanswerable = ~self.answerable
        return {"answer_injected": float(good.any(axis=1)[self.answerable].mean()) if self.answerable.any()
                else None,
                "precision": float(good.sum()) / counted if counted else None,
                "abstention": float((~chosen.any(axis=1))[unanswerable].mean()) if unanswerable.any() else None}


def _objective(shares: dict[str, dict[str, float | None]]) -> float:
    total = 0.0
    for s in shares.values():
        values = {k: v for k, v in s.items() if v is not None}
        if values:
            total += (sum(min(v, TARGETS[k]) for k, v in values.items()) + sum(values.values()) / 20) / len(values)
    return total


def add(tally: dict[str, list[int]], q: JudgedQuestion, p: npt.NDArray[np.float64], model: JudgeModel) -> None:
    """Count one question judged by ``model`` into ``tally`` (per data set)."""
    hi, med = model.high, model.medium
    if len(p):
        p = np.where(p >= model.relative * p.max(), p, -1.0)
    # answered, answerable, good, injected, quiet, unanswerable, answer among the first, answered of those
    t = tally.setdefault(q.dataset, [0] * 8)
    n_high = int((p >= hi).sum())
    n_med = int(((p >= med) & (p < hi)).sum())
    inject = n_high >= 1 or n_med >= 2
    chosen = (p >= med) if inject else np.zeros(len(p), dtype=bool)
    counted = chosen & ~np.isnan(q.y)
    if q.answerable:
        t[1] += 1
        t[0] += int(bool((chosen & (q.y == 1)).any()))
        if (q.y == 1).any():
            t[6] += 1
            t[7] += int(bool((chosen & (q.y == 1)).any()))
    else:
        t[5] += 1
        t[4] += int(not chosen.any())
    t[2] += int((counted & (q.y == 1)).sum())
    t[3] += int(counted.sum())


def shares(tally: dict[str, list[int]]) -> dict[str, dict[str, float | None]]:
    return {d: {"answer_injected": round(t[0] / t[1], 4) if t[1] else None,
                "precision": round(t[2] / t[3], 4) if t[3] else None,
                "abstention": round(t[4] / t[5], 4) if t[5] else None,
                "answer_injected_when_found": round(t[7] / t[6], 4) if t[6] else None} for d, t in tally.items()}
