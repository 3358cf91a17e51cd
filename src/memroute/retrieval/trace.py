"""What one recall did, step by step: the trace that rides along with every :class:`Recall`.

Plain frozen dataclasses with ``to_dict()`` for the CLI's and the service's JSON. Candidate lists are
kept short (ids and scores, no texts) so a trace costs little to build and to log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
        return {
            "strategy": self.strategy, "strategy_forced": self.strategy_forced, "params": self.params,
            "analysis": self.analysis, "queries": list(self.queries),
            "searches": [{"name": s.name, "weight": round(s.weight, 4), "ms": round(s.ms, 3),
                          "hits": [[i, round(v, 4)] for i, v in s.hits]} for s in self.searches],
            "fusion": self.fusion,
            "candidates": [{"id": c.id, "fused": round(c.fused, 4), "fused_rank": c.fused_rank,
                            "rerank": None if c.rerank is None else round(c.rerank, 4),
                            "final": None if c.final is None else round(c.final, 4),
                            "final_rank": c.final_rank, "judge": None if c.judge is None else round(c.judge, 4),
                            "scores": {k: round(v, 4) for k, v in c.scores.items()},
                            "features": {k: round(v, 4) for k, v in c.features.items()}}
                           for c in self.candidates],
            "duplicates": self.duplicates,
            "stages_ms": {k: round(v, 3) for k, v in self.stages_ms.items()},
            "notes": list(self.notes),
            "llm": list(self.llm),
            "superseded": self.superseded,
            "constraints": self.constraints,
        }
