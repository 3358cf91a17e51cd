"""The product's Prometheus metrics, defined once, on a dedicated registry.

A dedicated :data:`REGISTRY` (not prometheus_client's global one) so that importing memroute never
collides with an application's own metrics of the same name, and so the service can serve exactly
these: ``exposition()`` returns the text format for a ``/metrics`` endpoint. Names follow SPEC section 7
and seed 003; latencies are in milliseconds, as their names say.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)

# Milliseconds: the recall targets are 15 / 40 / 150 ms, routing's 25 ms, an LLM call's seconds.
_FAST_MS = (0.5, 1, 2, 5, 10, 15, 20, 30, 40, 60, 100, 150, 250, 500, 1000, 2500)
_LLM_MS = (50, 100, 250, 500, 1000, 2000, 5000, 10000, 30000)

RETRIEVAL_LATENCY = Histogram("retrieval_latency_ms", "Latency of one recall, end to end, in milliseconds",
                              ["strategy"], buckets=_FAST_MS, registry=REGISTRY)
RETRIEVAL_STRATEGY = Counter("retrieval_strategy_usage_total", "Recalls per search strategy", ["strategy"],
                             registry=REGISTRY)
RETRIEVAL_EMPTY = Counter("retrieval_empty_results_total", "Recalls that returned no memory", ["reason"],
                          registry=REGISTRY)
RERANK_LATENCY = Histogram("rerank_latency_ms", "Latency of reranking the fused candidates, in milliseconds",
                           ["reranker"], buckets=_FAST_MS, registry=REGISTRY)
ROUTING_LATENCY = Histogram("routing_latency_ms", "Latency of one routing decision, in milliseconds",
                            ["router"], buckets=_FAST_MS, registry=REGISTRY)
LLM_CALLS = Counter("llm_calls_total", "LLM calls sent, by step and outcome (ok, or the fallback reason: timeout, "
                    "connection, http_<status>, not_openai, too_large, contract)", ["step", "outcome"],
                    registry=REGISTRY)
LLM_LATENCY = Histogram("llm_latency_ms", "Latency of one LLM call (retries included), in milliseconds", ["step"],
                        buckets=_LLM_MS, registry=REGISTRY)
LLM_FALLBACKS = Counter("llm_fallbacks_total", "LLM steps that fell back to the rule-based result, by step and "
                        "reason (budget, after_failure and every failed call's reason)", ["step", "reason"],
                        registry=REGISTRY)
LLM_TOKENS = Counter("llm_tokens_total", "LLM tokens as reported by the endpoint (estimated from characters when "
                     "it reports none), by step and direction (in, out)", ["step", "direction"], registry=REGISTRY)

HTTP_REQUESTS = Counter("http_requests_total", "HTTP requests answered by the service, by method, route template "
                        "(the path pattern, e.g. /v1/memories/{memory_id}) and status", ["method", "route", "status"],
                        registry=REGISTRY)
HTTP_LATENCY = Histogram("http_request_latency_ms", "Time from a request's arrival to the end of its answer, in "
                         "milliseconds", ["method", "route"], buckets=_FAST_MS, registry=REGISTRY)


def exposition() -> bytes:
    """The metrics in Prometheus text format, for a ``/metrics`` endpoint."""
    return generate_latest(REGISTRY)
