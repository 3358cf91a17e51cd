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
