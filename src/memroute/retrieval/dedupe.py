"""Near-duplicate removal by embedding cosine (seed 003 section 3.4.2, threshold 0.95), confirmed by words.

Greedy in rank order: a candidate whose vector is more similar than the threshold to one already kept is
dropped, so the better-ranked copy of a repeated message survives. O(n^2) on at most ``max_candidates``
vectors: one small matrix product.

The cosine alone is not enough: a memory may be embedded with its surroundings (``remember(...,
embed_text=previous + turn + next)``), and then neighbouring turns of a chat share two thirds of their
embedded text. On LoCoMo the cosine alone dropped those neighbours as duplicates: with use-m3 it cost
leave-one-out temporal recall@5 0.809 -> 0.795, and with e5-small, whose cosines sit higher, recall@5
0.745 -> 0.613. So a pair is a duplicate only when the memories' own words also mostly coincide (Jaccard
of their word sets at least ``min_word_overlap``, default 0.6): a repeated or lightly edited message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

MIN_WORD_OVERLAP = 0.6
_WORD = re.compile(r"\w+")


def near_duplicates(ids: Sequence[str], vectors: Mapping[str, npt.NDArray[np.float32]], threshold: float,
                    texts: Mapping[str, str] | None = None,
                    min_word_overlap: float = MIN_WORD_OVERLAP) -> dict[str, str]:
    """``{dropped id: the kept id it duplicates}`` for ``ids`` in rank order (ids without a vector stay).

    With ``texts`` (id -> the memory's own text), a pair over the cosine threshold must also share
    ``min_word_overlap`` of its words (case-folded ``\\w+`` runs: CJK text compares by runs of characters,
    which is strict, as a duplicate should be)."""
    have = [i for i in ids if i in vectors]
    if len(have) < 2:
        return {}
    mat = np.array([vectors[i] for i in have], dtype=np.float64)  # float32 -> float64 is exact
    norms = np.sqrt(np.add.reduce(mat * mat, axis=1, keepdims=True))  # what np.linalg.norm(axis=1) computes
    mat = mat / np.where(norms == 0, 1.0, norms)
    # for each candidate, the better-ranked ones over the threshold (most have none): the rows probed in Python
    # are only those, not every pair
    over = np.tril(mat @ mat.T > threshold, -1)
    earlier = {j: np.flatnonzero(over[j]).tolist() for j in np.flatnonzero(over.any(axis=1)).tolist()}
    words: dict[int, frozenset[str]] = {}

    def same_words(a: int, b: int) -> bool:
        if texts is None:
            return True
        for j in (a, b):
            if j not in words:
                words[j] = frozenset(_WORD.findall(texts.get(have[j], "").casefold()))
        union = words[a] | words[b]
        return not union or len(words[a] & words[b]) / len(union) >= min_word_overlap

    kept: set[int] = set()
    dropped: dict[str, str] = {}
    for j in range(len(have)):
        # the first kept one in rank order that is over the threshold and shares the words
        twin = next((i for i in earlier.get(j, ()) if i in kept and same_words(i, j)), None)
        if twin is None:
            kept.add(j)
        else:
            dropped[have[j]] = have[twin]
    return dropped
