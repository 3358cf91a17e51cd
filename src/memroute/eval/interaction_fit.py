"""Fitting the question-memory interaction model (:mod:`memroute.retrieval.interaction`), and stacking it
under the judge.

Training pairs are what a recall's judge sees: the candidates of each question in the final order, with
the query's vector and the candidate's; the first :data:`FIRST` enter the fit. LoCoMo: a candidate answers
when it is an evidence turn, every other retrieved turn is a negative. The everyday set's train split: a
candidate answers when it is one of the question's answering memories; an unanswerable question's
candidates are all negatives; a stale or merely related memory is left out. The data sets weigh the same
(LoCoMo has ten times the candidates).

The fit is a logistic regression over :func:`~memroute.retrieval.interaction.pair_features` (standardised
for the fit, stored in the raw scale), L2 :data:`L2` on every weight but the cosine's and the bias (a ridge
towards the plain cosine).

**Stacking.** The judge (:mod:`memroute.retrieval.judge_fit`) reads the interaction logit as a feature, so
it must be fitted on logits like those it meets at recall time, from a model that has not seen the
question: :func:`stacked` scores each training question by an interaction model fitted without its group
(an everyday store, a LoCoMo conversation; a data set with one group in :data:`FOLDS` folds by position),
and fits the model that ships on everything. In sample the logits look near perfect (everyday train AUC
0.98 against 0.88 cross-fitted) and a judge fitted on them trusts them too much (``docs/benchmarks.md``,
"Seventh pass" and "Eighth pass"). ``memroute eval recall --fit-judge`` does both and writes the model
fitted on everything into ``retrieval/interaction_weights.json`` when the judge's chosen feature set reads
it (as of the eighth pass, for no encoder).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memroute.errors import InputError
from memroute.memory import Memory
from memroute.retrieval.interaction import InteractionModel, pair_features
from memroute.retrieval.judge_fit import JudgedQuestion, judged_question
from memroute.retrieval.rerank_fit import fit_logistic
from memroute.retrieval.trace import RecallTrace

FIRST = 10
"""Candidates per question that enter the fit (the judge reads the first five to ten)."""
L2 = 10_000.0
"""Ridge strength on the standardised per-dimension weights (chosen among 300, 3,000, 10,000 and 30,000 on
the everyday train split with each store held out, ``docs/benchmarks.md``, "Seventh pass")."""
FOLDS = 4
"""Folds by position for a data set with a single group (LoCoMo cut to its first questions)."""


@dataclass(frozen=True, slots=True)
class Pairs:
    """One question's rows: every candidate the judge reads, in the final order."""

    dataset: str
    group: str
    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    """1: answers; 0: does not; nan: left out (stale or related, or after the first :data:`FIRST`)."""


@dataclass(frozen=True, slots=True)
class TrainingQuestion:
    """A recall of the judge's training data, kept so that it can be judged again with other logits."""

    trace: RecallTrace
    answers: frozenset[str]
    dataset: str
    group: str
    answerable: bool = True
    ignore: frozenset[str] = frozenset()
    limit: int = 5
    pairs: Pairs | None = None

    def judged(self, logits: Sequence[float] | None) -> JudgedQuestion:
        return judged_question(self.trace, self.answers, self.dataset, self.answerable, self.ignore, self.limit,
                               interaction=logits)


def judged_candidates(trace: RecallTrace) -> list[str]:
    """The ids of the candidates the judge reads, in the final order (as :func:`judged_question` takes them)."""
    cands = [c for c in trace.candidates if c.final_rank is not None and c.rerank is not None]
    cands.sort(key=lambda c: c.final_rank if c.final_rank is not None else 0)
    return [c.id for c in cands]


def question_pairs(mem: Memory, owner: str, trace: RecallTrace, answers: Collection[str], dataset: str,
                   group: str, ignore: Collection[str] = ()) -> Pairs | None:
    """The judged candidates of one recall as rows (None when it has none); the query vector is the
    recall's first query embedded again, as the search embedded it."""
    ids = judged_candidates(trace)
    if not ids or not trace.queries:
        return None
    first = trace.queries[0]
    text = str(first.get("vector_text") or first["text"])[:2000]
    qvec = mem.embedder.embed([text], side="query")[0]
    vectors = mem.store.get_vectors(ids, owner)
    if any(i not in vectors for i in ids):
        return None
    x = pair_features(qvec, np.vstack([vectors[i] for i in ids]))
    y = np.array([np.nan if i in ignore or k >= FIRST else float(i in answers) for k, i in enumerate(ids)])
    return Pairs(dataset, group, x, y)


def model_logits(model: InteractionModel, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The model's logits for rows of :func:`pair_features`."""
    w = np.concatenate([[model.cosine], model.product, model.distance])
    out: npt.NDArray[np.float64] = x @ w + model.bias
    return out


def fold_keys(pairs: Sequence[Pairs], folds: int = FOLDS) -> list[str]:
    """Each question's fold: its group, or for a data set with a single group, its position modulo ``folds``."""
    groups: dict[str, set[str]] = {}
    for p in pairs:
        groups.setdefault(p.dataset, set()).add(p.group)
    seen: dict[str, int] = {}
    out = []
    for p in pairs:
        if len(groups[p.dataset]) > 1:
            out.append(f"{p.dataset}:{p.group}")
        else:
            out.append(f"{p.dataset}:fold{seen.get(p.dataset, 0) % folds}")
            seen[p.dataset] = seen.get(p.dataset, 0) + 1
    return out


def cross_fitted(pairs: Sequence[Pairs], l2: float = L2, folds: int = FOLDS) -> list[npt.NDArray[np.float64]]:
    """Each question's logits from a model fitted without its fold (:func:`fold_keys`)."""
    keys = fold_keys(pairs, folds)
    out: list[npt.NDArray[np.float64]] = [np.zeros(0)] * len(pairs)
    for key in dict.fromkeys(keys):
        model = fit([p for p, k in zip(pairs, keys, strict=True) if k != key], l2, f"all but {key}")
        for i, (p, k) in enumerate(zip(pairs, keys, strict=True)):
            if k == key:
                out[i] = model_logits(model, p.x)
    return out


def stacked(questions: Sequence[TrainingQuestion], fitted_on: str, l2: float = L2,
            folds: int = FOLDS) -> tuple[list[JudgedQuestion], InteractionModel]:
    """The judge's training questions with cross-fitted interaction logits, and the model fitted on all of
    them (the one that ships). A question without pairs gets no logits (as a recall without candidates)."""
    idx = [i for i, q in enumerate(questions) if q.pairs is not None]
    pairs = [q.pairs for q in questions if q.pairs is not None]
    logits: list[npt.NDArray[np.float64] | None] = [None] * len(questions)
    for i, s in zip(idx, cross_fitted(pairs, l2, folds), strict=True):
        logits[i] = s
    judged = [q.judged(None if s is None else s.tolist()) for q, s in zip(questions, logits, strict=True)]
    return judged, fit(pairs, l2, fitted_on)


def fit(pairs: Sequence[Pairs], l2: float = L2, fitted_on: str = "", iterations: int = 15) -> InteractionModel:
    """The logistic model of the module docstring on ``pairs`` (Newton's method)."""
    rows = [(p.dataset, p.x[k], p.y[k]) for p in pairs for k in range(len(p.y)) if not np.isnan(p.y[k])]
    y = np.array([r[2] for r in rows])
    if not 0 < y.sum() < len(y):
        raise InputError("the interaction model needs candidates that answer and candidates that do not")
    x = np.vstack([r[1] for r in rows])
    sets = [r[0] for r in rows]
    count = {d: sets.count(d) for d in set(sets)}
    weight = np.array([len(rows) / (len(count) * count[d]) for d in sets])
    w, b, mean, scale = fit_logistic(x, y, l2, iterations, weight, unshrunk=(0,))  # the cosine is not shrunk
    raw = w / scale
    bias = float(b - mean @ raw)
    dim = (len(raw) - 1) // 2
    return InteractionModel(dim, float(raw[0]), raw[1: dim + 1], raw[dim + 1:], bias, fitted_on)
