"""What a caller can set on one recall: a forced strategy, limits, weights, and stages on or off.

Defaults are seed 001's (k = 10 per query and per search, at most 40 candidates, at most
5 expanded queries, 3 exchanges of recent conversation, RRF k = 60) and seed 003's (the strategy
parameters in :mod:`memroute.retrieval.strategy`), except where a measurement on LoCoMo said otherwise;
each such default says why.
"""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from memroute.errors import InputError
from memroute.types import MemoryKind, Sensitivity
from memroute.validate import count, flag, optional_name


class Strategy(enum.StrEnum):
    """Seed 003 section 2.2: which searches run and how their scores are weighed."""

    SEMANTIC_ONLY = "semantic_only"
    """Conceptual questions: vector search only."""
    KEYWORD_BOOST = "keyword_boost"
    """Questions naming things: vector and keyword search, keywords weighed up."""
    TEMPORAL = "temporal"
    """A time range was named: time-filtered search beside vector and keyword search."""
    HYBRID = "hybrid"
    """Everything else: all searches."""

    @classmethod
    def parse(cls, value: Strategy | str) -> Strategy:
        if isinstance(value, Strategy):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise InputError(f"unknown strategy {value!r}; use one of {', '.join(s.value for s in cls)}") from None


class Fusion(enum.StrEnum):
    MINMAX = "minmax"
    """Weighted min-max fusion (seed 003 section 3.4.3): each list's scores scaled to [0, 1], then weighed."""
    RRF = "rrf"
    """Reciprocal Rank Fusion (Cormack, Clarke & Büttcher 2009)."""


@dataclass(frozen=True, slots=True)
class RecallOptions:
    """Options of :func:`memroute.retrieval.recall`; every field has a working default."""

    limit: int = 5
    """Memories returned (seed 001: at most 5 go into a prompt)."""
    strategy: Strategy | str | None = None
    """Force a strategy instead of choosing one from the query analysis."""
    k_per_query: int = 15
    """Results of each search (vector, keyword, time) for each extra query (seed 001 says 10). The
    original message's keyword and vector searches return ``max_candidates`` each, so that the reranker
    has a full pool to choose from even when there is one query (LoCoMo: recall@5 after rerank 0.70 with
    10, 0.72 with 40)."""
    max_candidates: int = 50
    """Candidates kept after fusion and handed to the reranker (seed 001 says 40). 15 / 50 instead of
    10 / 40 puts 66 % of LoCoMo's multi-hop evidence among the candidates instead of 62 % (all
    categories: 89 % / 88 %) for ~0.3 ms more reranking; see docs/benchmarks.md."""
    window_days: int | None = None
    """Only memories from the last this many days; None (the default): every memory, however old. Seed 001
    said 365 days, but long-term memory is the point: two years of imported chats, or a move told to the
    assistant 20 months ago, must still be recalled, so age is a ranking signal (the strategy's time decay)
    and not a cut-off. A time range named in the query is searched even when it is older than the window."""
    max_expanded_queries: int = 5
    recent_turns: int = 6
    """Messages of recent conversation read for references and topic (3 exchanges, seed 001)."""
    fusion: Fusion | str = Fusion.MINMAX
    rrf_k: int = 60
    vector_weight: float | None = None
    """Override the strategy's vector weight (0..1)."""
    keyword_weight: float | None = None
    """Override the strategy's keyword weight (0..1)."""
    context_weight: float = 0.5
    """Weight of a memory's context tokens (neighbouring turns) in BM25 against 1.0 for its own words;
    0.3 measured best on LoCoMo (0.5: same within 0.01; 0: recall@5 -0.15)."""
    dedupe_threshold: float | None = 0.95
    """Cosine above which a candidate is a near-duplicate of a better one and dropped; None: keep all."""
    expand: bool = True
    """Add resolved references, the conversation's topic and compound parts as extra queries."""
    rerank: bool = True
    """Rerank the fused candidates with the local learned reranker."""
    decay: bool = True
    """Apply the strategy's time decay."""
    parallel: bool = False
    """Run the searches in threads. Off by default: on SQLite they still run one at a time (the store's lock),
    so the threads only add their cost: measured slower at 10k, 100k and 1M memories (docs/benchmarks.md)."""
    session: str | None = None
    """Only memories of this session."""
    kinds: Sequence[MemoryKind | str] | None = None
    max_sensitivity: Sensitivity | str | int = Sensitivity.PRIVATE
    """Seed 001 searches up to PRIVATE."""
    pack_chars: int = 2000
    """Character budget of :meth:`Recall.memory_pack`."""
    llm: bool = True
    """Use the LLM given to :func:`recall` (or configured for :class:`memroute.Memory`), if any; False: rules only."""

    def validated(self) -> RecallOptions:
        """Raise :class:`InputError` naming the field when a value cannot work (or has the wrong type)."""
        for field, least in (("limit", 1), ("k_per_query", 1), ("max_candidates", 1), ("rrf_k", 1), ("pack_chars", 1),
                           ("max_expanded_queries", 0), ("recent_turns", 0)):
            count(getattr(self, field), f"RecallOptions.{field}", least, 1_000_000)
        if self.window_days is not None:
            count(self.window_days, "RecallOptions.window_days (or None for no limit)", 1, 10_000_000)
        for field in ("expand", "rerank", "decay", "parallel", "llm"):
            flag(getattr(self, field), f"RecallOptions.{field}")
        bounds: tuple[tuple[str, float, float], ...] = (
            ("vector_weight", 0.0, 1.0), ("keyword_weight", 0.0, 1.0), ("context_weight", 0.0, math.inf),
            ("dedupe_threshold", 0.0, 1.0))
        for field, low, high in bounds:
            value = getattr(self, field)
            if value is None and field != "context_weight":
                continue
            number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
            if not low <= number <= high or (field == "dedupe_threshold" and number == 0):
                raise InputError(f"RecallOptions.{field} must be a number in {low}..{high}, got {value!r:.40}")
        try:
            Fusion(self.fusion)
        except (ValueError, TypeError):
            raise InputError(f"unknown fusion {self.fusion!r:.40}; use minmax or rrf") from None
        if self.strategy is not None:
            Strategy.parse(self.strategy)
        optional_name(self.session, "RecallOptions.session")
        Sensitivity.parse(self.max_sensitivity)
        return self
