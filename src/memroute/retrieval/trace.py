"""What one recall did, step by step: the trace that rides along with every :class:`Recall`.

Plain frozen dataclasses with ``to_dict()`` for the CLI's and the service's JSON. Candidate lists are
kept short (ids and scores, no texts) so a trace costs little to build and to log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class SearchTrace:
    name: str
    """``bm25:0``: the kind of search and the index of its query."""
    weight: float
    ms: float
    hits: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class CandidateTrace:
    id: str
    fused: float
    fused_rank: int
    rerank: float | None
    scores: dict[str, float]
    """Min-max score per search list."""
    features: dict[str, float] = field(default_factory=dict)
    final: float | None = None
    """The local score blended with the LLM's judgement, when the LLM rerank saw this candidate."""
    final_rank: int | None = None
    """Its position in the order the judge read (0: first): the reranker's, with the constraints a request
    found promoted; ``Recall.memories`` then orders the first ``limit`` by the judge's probability and moves
    newer facts above the ones they supersede."""
    judge: float | None = None
    """The calibrated judge's probability that it answers the message (:mod:`memroute.retrieval.judge`)."""

    def rounded(self, numbers: Iterator[float]) -> dict[str, Any]:
        """This candidate in the trace's JSON, taking its numbers from ``numbers`` (rounded to 4 places) in the
        order :func:`_candidate_numbers` wrote them: ``fused``, ``rerank``, ``final``, ``judge``, the scores,
        the features."""
        fused, rerank, final, judge = next(numbers), next(numbers), next(numbers), next(numbers)
        # zip reads the keys first: it stops at their end without taking a number of the next candidate
        return {"id": self.id, "fused": fused, "fused_rank": self.fused_rank,
                "rerank": None if self.rerank is None else rerank,
                "final": None if self.final is None else final,
                "final_rank": self.final_rank, "judge": None if self.judge is None else judge,
                "scores": dict(zip(self.scores, numbers, strict=False)),
                "features": dict(zip(self.features, numbers, strict=False))}


@dataclass(frozen=True, slots=True)
class RecallTrace:
    strategy: str
    strategy_forced: bool
    params: dict[str, Any]
    analysis: dict[str, Any] | None
    queries: tuple[dict[str, Any], ...]
    searches: tuple[SearchTrace, ...]
    fusion: str
    candidates: tuple[CandidateTrace, ...]
    """After fusion, dedupe and decay, before rerank, in fused order (each with its rerank score)."""
    duplicates: dict[str, str]
    """Dropped near-duplicate -> the kept memory it repeats."""
    stages_ms: dict[str, float]
    notes: tuple[str, ...]
    """Why the answer is what it is when that is not obvious (empty query, nothing matched, ...)."""
    llm: tuple[dict[str, Any], ...] = ()
    """Each LLM step of this recall, called or skipped: ``step``, ``called``, ``used_llm``, ``fallback`` (why
    the rule result was used: disabled, not_needed, budget, after_failure, timeout, http_500, contract, ...),
    ``detail``, ``latency_ms``, ``tokens_in``, ``tokens_out``, ``cached`` and ``output`` (what it changed)."""
    superseded: dict[str, str] = field(default_factory=dict)
    """Older memory -> the newer memory of the answer that replaces it (a fact that changed)."""
    constraints: dict[str, str] = field(default_factory=dict)
    """Memory -> why the constraint search brought it ("a constraint for a request about food")."""

    def to_dict(self) -> dict[str, Any]:
        # the candidates' numbers (~35 each, ~1,800 a recall) and the hits' scores rounded in one pass each,
        # not one round() apiece, and handed out from one iterator (no list per candidate): half of this
        # method's time
        numbers = iter(_round4(_candidate_numbers(self.candidates)))
        hits = iter(_round4([v for s in self.searches for _, v in s.hits]))
        return {
            "strategy": self.strategy, "strategy_forced": self.strategy_forced, "params": self.params,
            "analysis": self.analysis, "queries": list(self.queries),
            "searches": [{"name": s.name, "weight": round(s.weight, 4), "ms": round(s.ms, 3),
                          "hits": [[h[0], next(hits)] for h in s.hits]} for s in self.searches],
            "fusion": self.fusion,
            "candidates": [c.rounded(numbers) for c in self.candidates],
            "duplicates": self.duplicates,
            "stages_ms": {k: round(v, 3) for k, v in self.stages_ms.items()},
            "notes": list(self.notes),
            "llm": list(self.llm),
            "superseded": self.superseded,
            "constraints": self.constraints,
        }


_SURE_BELOW = 1e4
"""Below this magnitude ``x * 1e4`` is off the exact product by under 1.2e-8, far inside :func:`_round4`'s margin."""
_TIE_MARGIN = 1e-6


def _round4(values: list[float]) -> list[float]:
    """``[round(v, 4) for v in values]``, the same floats, in a few array operations.

    ``round(x, 4)`` is the double nearest ``N / 10**4``, ``N`` the exact ``x * 10**4`` rounded half to even.
    Where ``x * 1e4`` in floating point is farther than ``_TIE_MARGIN`` from a half, its error (under 1.2e-8
    for ``|x| < 1e4``) cannot change the nearest integer, so ``rint`` finds ``N``, and ``N / 1e4`` (both exact,
    the division correctly rounded) is that nearest double. The rest (near a half, large, not finite) go to
    ``round`` itself."""
    if len(values) < 16:
        return [round(v, 4) for v in values]
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # huge or not finite: ``round`` below, no warning
        scaled = x * 1e4
        whole = np.rint(scaled)
        unsure = ~(np.abs(x) < _SURE_BELOW) | (np.abs(np.abs(scaled - whole) - 0.5) < _TIE_MARGIN)
    out: list[float] = (whole / 1e4).tolist()
    for i in np.flatnonzero(unsure).tolist():
        out[i] = round(values[i], 4)
    return out


def _candidate_numbers(candidates: tuple[CandidateTrace, ...]) -> list[float]:
    """Every candidate's numbers in the order :meth:`CandidateTrace.rounded` takes them back: ``fused``,
    ``rerank``, ``final``, ``judge`` (0.0 for none), the scores, the features."""
    out: list[float] = []
    add, extend = out.append, out.extend
    for c in candidates:
        add(c.fused)
        add(0.0 if c.rerank is None else c.rerank)
        add(0.0 if c.final is None else c.final)
        add(0.0 if c.judge is None else c.judge)
        extend(c.scores.values())
        extend(c.features.values())
    return out
