"""Prometheus metrics for the whole product (SPEC section 7), on one registry the service serves."""

from memroute.observability.metrics import (
    HTTP_LATENCY,
    HTTP_REQUESTS,
    LLM_CALLS,
    LLM_FALLBACKS,
    LLM_LATENCY,
    LLM_TOKENS,
    REGISTRY,
    RERANK_LATENCY,
    RETRIEVAL_EMPTY,
    RETRIEVAL_LATENCY,
    RETRIEVAL_STRATEGY,
    ROUTING_LATENCY,
    exposition,
)

__all__ = [
    "HTTP_LATENCY",
    "HTTP_REQUESTS",
    "LLM_CALLS",
    "LLM_FALLBACKS",
    "LLM_LATENCY",
    "LLM_TOKENS",
    "REGISTRY",
    "RERANK_LATENCY",
    "RETRIEVAL_EMPTY",
    "RETRIEVAL_LATENCY",
    "RETRIEVAL_STRATEGY",
    "ROUTING_LATENCY",
    "exposition",
]
