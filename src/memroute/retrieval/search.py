"""Phase 2 of seed 001 / seed 003's multi-search executor: every search for every query.

BM25 over a memory's own words and its context tokens for every query; vector KNN for the original
query only, whose vector text already carries the recent turns and the resolved references (an exact
KNN is a full pass over the owner's vectors, ~60-100 ms at 1M: one per recall is the budget); with a
time range (temporal strategy), the same two searches again inside the range, or the newest memories
of the range when the message has no content words ("what did we talk about last week?"). Each search
is a weighted list for fusion. On a sync store the searches run in turn by default; ``parallel=True`` runs
them in a small thread pool, which on SQLite does not overlap them (the store runs one search at a time under
its lock) and made recalls slower at 10k, 100k and 1M memories on 2 cores (docs/benchmarks.md, "branch par1":
BM25's summing into a row array per search is also 2.5-4x slower beside another thread). On an async store
(PostgreSQL under ``AsyncMemory``) they always run concurrently, each on a connection of the pool.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from memroute.embed import Embedder
from memroute.embed.tokens import TokenVectors, token_source
from memroute.retrieval.expand import ExpandedQuery
from memroute.retrieval.strategy import SearchParams
from memroute.stores.calls import Call, Gather, Steps
from memroute.text import query_terms
from memroute.types import ScoredId, SearchFilter

EMBED_CHARS = 2000
FLOOR_KEEPS = 5
"""A vector search's best hits kept under ``similarity_threshold`` (the returned five, at most)."""
QUERY_TOKENS = 256
"""BM25 reads at most this many query tokens: a pasted 100k-character log must not cost seconds."""


@dataclass(frozen=True, slots=True)
class SearchList:
    """One search's result: what ran, for which query, its weight in fusion, its hits and its time."""

    kind: str
    """bm25, vector, time_bm25, time_vector, time or constraint."""
    query: int
    """Index of the expanded query."""
    weight: float
    hits: list[ScoredId] = field(default_factory=list)
    ms: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.query}"


@dataclass(frozen=True, slots=True)
class SearchOutput:
    lists: list[SearchList]
    query_vectors: npt.NDArray[np.float32] | None
    query_tokens: list[list[str]]
    embed_ms: float
    query_token_vectors: TokenVectors | None = None
    """The original query's token vectors, from its embedding's own pass, when the embedder gives them
    (:mod:`memroute.embed.tokens`); read by late interaction (:mod:`memroute.retrieval.late`)."""


def search_steps(embedder: Embedder, queries: Sequence[ExpandedQuery], params: SearchParams, flt: SearchFilter,
                 time_flt: SearchFilter | None, context_weight: float, parallel: bool = False,
                 first_limit: int | None = None, constraint: Sequence[str] = ()) -> Steps[SearchOutput]:
    """``params.limit`` results per search; the original query's (index 0) get ``first_limit`` if larger.
    ``constraint``: the keyword query of the constraint search (a request, see
    :mod:`memroute.retrieval.constraints`), a list of kind ``constraint`` that is not fused.

    The searches are yielded as one :class:`~memroute.stores.calls.Gather` (see :mod:`memroute.stores.calls`):
    a sync store runs them in turn (or in two threads with ``parallel``), an async one concurrently.
    """
    tokens = [query_terms(q.text, QUERY_TOKENS) for q in queries]
    vectors: npt.NDArray[np.float32] | None = None
    query_tokens: TokenVectors | None = None
    embed_ms = 0.0
    use_vector = params.uses_vector or (time_flt is not None and params.uses_time)
    source = token_source(embedder)
    if use_vector and queries:
        t0 = time.perf_counter()
        if source is not None:
            vectors, (query_tokens,) = source.embed_with_tokens([queries[0].embed_text[:EMBED_CHARS]], side="query")
        else:
            vectors = embedder.embed([queries[0].embed_text[:EMBED_CHARS]], side="query")
        embed_ms = (time.perf_counter() - t0) * 1000
    weights = (1.0, context_weight)
    jobs: list[tuple[SearchList, Call]] = []
    for i, q in enumerate(queries):
        limit = max(params.limit, first_limit or 0) if i == 0 else params.limit
        if params.uses_keyword and tokens[i]:
            jobs.append((SearchList("bm25", i, params.keyword_weight * q.weight),
                         Call("search_bm25", (tokens[i], flt, limit, weights))))
        if params.uses_vector and vectors is not None and i == 0:
            jobs.append((SearchList("vector", i, params.vector_weight * q.weight),
                         Call("search_vector", (vectors[0], flt, limit))))
    if time_flt is not None and params.uses_time:
        if tokens[0]:
            share = params.time_weight
            jobs.append((SearchList("time_bm25", 0, share * max(params.keyword_weight, 0.5)),
                         Call("search_bm25", (tokens[0], time_flt, params.limit, weights))))
            if vectors is not None:
                jobs.append((SearchList("time_vector", 0, share * max(params.vector_weight, 0.5)),
                             Call("search_vector", (vectors[0], time_flt, params.limit))))
        else:
            jobs.append((SearchList("time", 0, params.time_weight), Call("search_time", (time_flt, params.limit))))
    if constraint:
        jobs.append((SearchList("constraint", 0, 0.0), Call("search_bm25", (list(constraint), flt, params.limit,
                                                                                 weights))))
    done: list[tuple[list[ScoredId], float]] = (yield Gather(tuple(c for _, c in jobs), parallel)) if jobs else []
    lists = [replace(spec, hits=_thresholded(spec, hits, params.similarity_threshold), ms=ms)
             for (spec, _), (hits, ms) in zip(jobs, done, strict=True)]
    return SearchOutput(lists, vectors, tokens, embed_ms, query_tokens)


def _thresholded(spec: SearchList, hits: list[ScoredId], threshold: float) -> list[ScoredId]:
    """A vector list keeps its hits at or above ``threshold`` and, whatever their cosine, its best
    :data:`FLOOR_KEEPS`: the floor prunes a long list, it never empties a small store (a paraphrase with
    no shared word can sit at cosine 0.1 and be the only memory that answers; the judge decides)."""
    if spec.kind not in ("vector", "time_vector"):
        return hits
    return [h for i, h in enumerate(hits) if i < FLOOR_KEEPS or h.score >= threshold]
