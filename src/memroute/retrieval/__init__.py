"""Recall: the per-turn retrieval pipeline (SPEC section 4, seeds 001 and 003).

    >>> from memroute import Memory
    >>> mem = Memory.open("sqlite://:memory:", owner="alice")
    >>> recent = [{"role": "user", "text": "プロジェクトXの締切が心配"}]
    >>> r = mem.recall("先週のあれどうなった？", recent_messages=recent)
    >>> r.should_inject, r.trace.strategy
    (False, 'temporal')
"""

from memroute.retrieval.decide import Relevance, should_inject
from memroute.retrieval.expand import ExpandedQuery, expand
from memroute.retrieval.fusion import RRF_K, minmax, rrf, weighted_minmax
from memroute.retrieval.options import Fusion, RecallOptions, Strategy
from memroute.retrieval.orchestrator import recall, recall_async
from memroute.retrieval.rerank import FEATURES, RerankModel, default_model, reranker_for
from memroute.retrieval.result import Recall, RecalledMemory
from memroute.retrieval.strategy import SearchParams, search_params, select_strategy
from memroute.retrieval.trace import CandidateTrace, RecallTrace, SearchTrace

__all__ = [
    "FEATURES",
    "RRF_K",
    "CandidateTrace",
    "ExpandedQuery",
    "Fusion",
    "Recall",
    "RecallOptions",
    "RecallTrace",
    "RecalledMemory",
    "Relevance",
    "RerankModel",
    "SearchParams",
    "SearchTrace",
    "Strategy",
    "default_model",
    "expand",
    "minmax",
    "recall",
    "recall_async",
    "reranker_for",
    "rrf",
    "search_params",
    "select_strategy",
    "should_inject",
    "weighted_minmax",
]
