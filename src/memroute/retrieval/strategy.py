"""Choosing a search strategy from the query analysis (seed 003 section 3.2).

The decision tree is seed 003's: a time range -> temporal; a factual question with keywords ->
keyword_boost; a conceptual question -> semantic_only; anything else -> hybrid. A caller may force one.

The parameters keep seed 003's names and its shape (keyword_boost weighs keywords up, "today" switches
decay off), but the vector / keyword balance is measured, not seed 003's 0.7 / 0.3: with the packaged
USE model, a memory's BM25 over its own words and its neighbouring turns was far stronger than its
cosine on LoCoMo (recall@5 0.66 against 0.21 alone; fused best at keyword 0.7-0.8), so hybrid weighs
keywords 0.7 and keyword_boost 0.8. ``similarity_threshold`` drops vector hits below it; seed 003's 0.6
suits larger models, USE puts related chat turns at cosine 0.2-0.5, so the default is 0.15.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memroute.analysis import QueryAnalysis, QueryType
from memroute.retrieval.options import RecallOptions, Strategy


@dataclass(frozen=True, slots=True)
class SearchParams:
    """Seed 003's ``SearchParams`` with measured defaults."""

    vector_weight: float = 0.3
    keyword_weight: float = 0.7
    limit: int = 10
    similarity_threshold: float = 0.15
    time_decay_factor: float = 0.1
    time_weight: float = 0.0
    """Weight of the time-filtered searches (temporal only)."""

    @property
    def uses_vector(self) -> bool:
        return self.vector_weight > 0

    @property
    def uses_keyword(self) -> bool:
        return self.keyword_weight > 0

    @property
    def uses_time(self) -> bool:
        return self.time_weight > 0

    def to_dict(self) -> dict[str, float | int]:
        return {"vector_weight": self.vector_weight, "keyword_weight": self.keyword_weight, "limit": self.limit,
                "similarity_threshold": self.similarity_threshold, "time_decay_factor": self.time_decay_factor,
                "time_weight": self.time_weight}


_PARAMS = {
    Strategy.SEMANTIC_ONLY: SearchParams(vector_weight=1.0, keyword_weight=0.0),
    Strategy.KEYWORD_BOOST: SearchParams(vector_weight=0.35, keyword_weight=0.65),
    Strategy.TEMPORAL: SearchParams(vector_weight=0.35, keyword_weight=0.65, time_weight=0.5),
    Strategy.HYBRID: SearchParams(vector_weight=0.35, keyword_weight=0.65),
}
_TODAY = ("today", "今日", "本日", "오늘")


def select_strategy(analysis: QueryAnalysis) -> Strategy:
    """Seed 003's decision tree, except that conceptual questions search keywords too.

    Seed 003 sends conceptual questions to semantic_only. In a conversation's memories the words of the
    question still matter ("why did Caroline start painting?"): giving them the hybrid weights raised
    LoCoMo recall@5 (leave-one-conversation-out) from 0.732 to 0.740. ``semantic_only`` stays available
    through ``RecallOptions(strategy=...)``.
    """
    if analysis.time_range is not None:
        return Strategy.TEMPORAL
    if analysis.query_type == QueryType.FACTUAL and analysis.keywords:
        return Strategy.KEYWORD_BOOST
    return Strategy.HYBRID


def search_params(strategy: Strategy, analysis: QueryAnalysis | None, options: RecallOptions) -> SearchParams:
    """The strategy's parameters, adjusted to the query and to the caller's overrides."""
    params = replace(_PARAMS[strategy], limit=options.k_per_query)
    if strategy == Strategy.SEMANTIC_ONLY and analysis is not None and not analysis.text.strip():
        params = replace(params, vector_weight=0.0)
    tr = analysis.time_range if analysis is not None else None
    if tr is not None and any(word in tr.expression.lower() for word in _TODAY):
        params = replace(params, time_decay_factor=0.0)  # seed 003: "today" prefers nothing older
    if options.vector_weight is not None:
        params = replace(params, vector_weight=float(options.vector_weight))
    if options.keyword_weight is not None:
        params = replace(params, keyword_weight=float(options.keyword_weight))
    return params
