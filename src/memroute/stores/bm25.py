"""Okapi BM25, shared by every backend so that scores mean the same everywhere.

Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond" (2009), with k1 = 1.2,
b = 0.75 and the non-negative IDF log(1 + (N - n + 0.5) / (n + 0.5)) that Lucene uses. A memory has two
fields, its own tokens and its context tokens; a search weighs them BM25F-style: the weighted term
frequencies and lengths are summed before saturation.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

K1 = 1.2
B = 0.75

T = TypeVar("T", float, npt.NDArray[np.floating[Any]])


def idf(docs: int, df: int) -> float:
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def term_score(term_idf: float, tf: T, dl: T, avgdl: float) -> T:
    """One term's contribution for documents with frequency ``tf`` and (weighted) length ``dl``."""
    return normed_term_score(term_idf, tf, length_norm(dl, avgdl))


def length_norm(dl: T, avgdl: float) -> T:
    """The length part of the saturation, ``k1 · (1 − b + b · dl / avgdl)``: one value per document, whatever
    the term (the in-memory index computes it once for every row)."""
    return K1 * (1 - B + B * dl / avgdl)


def normed_term_score(term_idf: float, tf: T, norm: T) -> T:
    """:func:`term_score` from the document's :func:`length_norm`."""
    return term_idf * tf * (K1 + 1) / (tf + norm)


def weighted_frequencies(own: npt.NDArray[np.float32], ctx: npt.NDArray[np.float32], w_own: float,
                         w_ctx: float) -> npt.NDArray[np.float32]:
    """``w_own * own + w_ctx * ctx`` of float32 frequencies, bit for bit as numpy evaluates that expression (each
    weight rounded to float32 as a Python float is), into one new array instead of three: the sum's operands are
    swapped (IEEE 754 addition is commutative) and a weight of 1 is not multiplied (``x * 1 == x`` exactly)."""
    tf: npt.NDArray[np.float32] = ctx * np.float32(w_ctx)
    if w_own == 1.0:
        np.add(own, tf, out=tf)
    else:
        tf += own * np.float32(w_own)
    return tf


def impacts(term_idf: float, tf: npt.NDArray[np.float32], norm: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """:func:`normed_term_score` of float32 arrays, bit for bit (the same float32 operations in the same order, an
    addition's operands swapped, which IEEE 754 leaves exact), into one new array instead of four; ``norm`` is
    overwritten (with ``tf + norm``). A long message's first BM25 search at 1M rows computes this for ~300k postings,
    and each new array is fresh pages to write (docs/benchmarks.md, branch bm1)."""
    norm += tf
    score: npt.NDArray[np.float32] = tf * np.float32(term_idf)
    score *= np.float32(K1 + 1)
    score /= norm
    return score
