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
    mat = np.stack([vectors[i] for i in have]).astype(np.float64)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    mat = mat / np.where(norms == 0, 1.0, norms)
    over = (mat @ mat.T > threshold).tolist()  # Python lists: ~40x faster to probe than numpy scalars
    words: dict[int, frozenset[str]] = {}

    def same_words(a: int, b: int) -> bool:
        if texts is None:
            return True
        for j in (a, b):
            if j not in words:
                words[j] = frozenset(_WORD.findall(texts.get(have[j], "").casefold()))
        union = words[a] | words[b]
        return not union or len(words[a] & words[b]) / len(union) >= min_word_overlap

    kept: list[int] = []
    dropped: dict[str, str] = {}
    for j in range(len(have)):
        row = over[j]
        twin = next((i for i in kept if row[i] and same_words(i, j)), None)
        if twin is None:
            kept.append(j)
        else:
            dropped[have[j]] = have[twin]
    return dropped
