"""Late interaction as a reranker column: centred, idf-weighted MaxSim between the question's token vectors and
each candidate's (ColBERT's MaxSim: Khattab & Zaharia 2020).

For every token of the question, its best cosine with a token of the memory; the mean of those over the
question's tokens, each weighted by BM25's idf of its token id, ``log(1 + (N - df + 0.5) / (df + 0.5))``
(Robertson & Zaragoza 2009), ``df`` counted over the owner's memories that have token vectors (the store's
per-owner table) and ``N`` their number. The vectors are centred with one fixed mean at ingest and at query
time (:mod:`memroute.embed.tokens`). Measured before it was built: docs/benchmarks.md, the eleventh
everyday-recall pass (``centred-idf`` with a fixed mean); built and measured: the thirteenth.

Only the first :data:`CANDIDATES` of the reranker's input (the fused order) are scored: recall reads those
candidates' token vectors alone, and every later one gets ``NaN``, as does a candidate without token vectors
(written before they were kept, or by a path that kept none). The reranker reads ``NaN`` as the column's training
mean (``RerankModel.design``), so such a candidate neither gains nor loses by it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from memroute.embed.tokens import TokenVectors

CANDIDATES = 30
"""How many candidates, first in the fused order, MaxSim scores (docs/benchmarks.md, the fourteenth everyday-recall
pass): the read of their token vectors and the product with them are the column's cost per recall, and the first
30 of 50 keep most of its gain (the thirteenth pass's estimate, ``benchmarks/late_candidates.py``). The pair's
``#late`` reranker and judge are fitted on this."""


def idf(ids: npt.NDArray[np.int32], n_docs: int, df: Mapping[int, int]) -> npt.NDArray[np.float32]:
    """BM25's idf of each of ``ids`` over ``n_docs`` memories (``df``: how many hold each; absent: none)."""
    return np.array([math.log(1 + (n_docs - df.get(int(t), 0) + 0.5) / (df.get(int(t), 0) + 0.5)) for t in ids],
                    dtype=np.float32)


def maxsim(query: TokenVectors, stored: Mapping[str, TokenVectors], ids: Sequence[str], n_docs: int,
           df: Mapping[int, int]) -> npt.NDArray[np.float64]:
    """The idf-weighted MaxSim of ``query`` with each of ``ids`` (``NaN`` for one missing from ``stored`` or
    without tokens), in ``ids``' order."""
    out = np.full(len(ids), np.nan)
    have = [k for k, i in enumerate(ids) if i in stored and len(stored[i])]
    if not have or not len(query):
        return out
    docs = [stored[ids[k]].vectors for k in have]
    starts = np.r_[0, np.cumsum([len(d) for d in docs])[:-1]]
    best = np.maximum.reduceat(query.vectors @ np.concatenate(docs).T, starts, axis=1)  # (query tokens, docs)
    w = idf(query.ids, n_docs, df)
    out[have] = (w @ best) / max(float(w.sum()), 1e-9)
    return out
