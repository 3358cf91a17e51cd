"""Fusing ranked lists: Reciprocal Rank Fusion and weighted min-max fusion.

RRF is Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual Rank
Learning Methods", SIGIR 2009: score = sum over lists of 1 / (k + rank), k = 60. It ignores the scores, so
a list whose tenth hit is nearly as good as its first counts the same as one whose first hit stands out.

Weighted min-max fusion is seed 003 section 3.4: each list's scores are scaled to [0, 1] by its own
minimum and maximum, then summed with the list's weight (a memory missing from a list gets 0 there). The
minimum is floored at 0 (BM25 and cosine scores of a match are positive): a list cut at k hits has an
arbitrary lowest score, and in a short list plain min-max sent a good second hit to 0 (LoCoMo figures
were the same either way, 0.709 against 0.711 recall@5 leave-one-out).
On LoCoMo it beat equal-weight RRF (recall@5 0.67 against 0.62 over the same lists), because BM25 over a
memory and its neighbouring turns is much stronger than the vector list there and RRF cannot say so.

Min-max against the list's best assumes the best is a good match: in a keyword list over thousands of
memories it is. When the searches run out of matches (fewer memories found than the reranker takes: a
small personal store), a keyword list's best hit is the best of a few, often a memory that shares one word
of the question ("gets" for "How do I get to work?"), and min-max makes it 1.0 against a vector hit that
answers. The recall then scales each keyword list by :func:`covered`: the share of its query's content
tokens (normalised as BM25 indexes them) that its best hit holds, so that a list's best counts fully only
when it holds the whole query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from memroute.text import tokenize
from memroute.text.tokenizers import index_terms
from memroute.types import ScoredId

RRF_K = 60
KEYWORD_KINDS = ("bm25", "time_bm25")
"""The search lists scored by BM25 (:mod:`memroute.retrieval.search`)."""


def rrf(lists: Iterable[Sequence[ScoredId]], k: int = RRF_K,
        weights: Sequence[float] | None = None) -> dict[str, float]:
    """Reciprocal Rank Fusion: sum of ``weight / (k + rank)`` over the lists (rank starts at 1)."""
    fused: dict[str, float] = {}
    for n, hits in enumerate(lists):
        w = 1.0 if weights is None else float(weights[n])
        for rank, hit in enumerate(hits, start=1):
            fused[hit.id] = fused.get(hit.id, 0.0) + w / (k + rank)
    return fused


def minmax(hits: Sequence[ScoredId]) -> dict[str, float]:
    """Scores scaled to [0, 1] by the list's maximum and its minimum floored at 0; all equal maps to 1."""
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = min(min(scores), 0.0), max(scores)
    span = hi - lo
    return {h.id: (h.score - lo) / span if span > 0 else 1.0 for h in hits}


def weighted_minmax(lists: Iterable[Sequence[ScoredId]], weights: Sequence[float]) -> dict[str, float]:
    """Seed 003's weighted fusion: sum of ``weight * minmax(score)``; absent from a list counts 0."""
    return weighted([minmax(hits) for hits in lists], weights)


def weighted(lists: Iterable[Mapping[str, float]], weights: Iterable[float]) -> dict[str, float]:
    """The sum of ``weight * score`` over already scaled lists (id -> score), in the lists' order; absent from a
    list counts 0."""
    fused: dict[str, float] = {}
    for scores, w in zip(lists, weights, strict=True):
        for mid, s in scores.items():
            fused[mid] = fused.get(mid, 0.0) + float(w) * s
    return fused


def scaled(scores: Mapping[str, float], factor: float) -> dict[str, float]:
    return {mid: s * factor for mid, s in scores.items()}


def covered(query: str, text: str) -> float:
    """The share of ``query``'s content tokens that ``text`` holds, both normalised as BM25 indexes them
    (English stems, Japanese and Korean dictionary forms); 1.0 for a query without content tokens."""
    terms = set(tokenize(query))
    if not terms:
        return 1.0
    return len(terms & set(index_terms(tokenize(text)))) / len(terms)


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """Best first; ties by id so the order never depends on dict order."""
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
