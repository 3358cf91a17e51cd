"""Prometheus metrics for the whole product (SPEC section 7), on one registry the service serves."""

from memroute.observability.metrics import (
    LLM_CALLS,
    LLM_FALLBACKS,
    LLM_LATENCY,
    REGISTRY,
    RERANK_LATENCY,
    RETRIEVAL_EMPTY,
    RETRIEVAL_LATENCY,
    RETRIEVAL_STRATEGY,
    ROUTING_LATENCY,
    exposition,
)

__all__ = [
    "LLM_CALLS",
    "LLM_FALLBACKS",
    "LLM_LATENCY",
    "REGISTRY",
    "RERANK_LATENCY",
    "RETRIEVAL_EMPTY",
    "RETRIEVAL_LATENCY",
    "RETRIEVAL_STRATEGY",
    "ROUTING_LATENCY",
    "exposition",
]
