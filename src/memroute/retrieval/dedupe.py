"""Near-duplicate removal by embedding cosine (seed 003 section 3.4.2, threshold 0.95).

Greedy in rank order: a candidate whose vector is more similar than the threshold to one already kept is
dropped, so the better-ranked copy of a repeated message survives. O(n^2) on at most ``max_candidates``
vectors: one small matrix product.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt


def near_duplicates(ids: Sequence[str], vectors: Mapping[str, npt.NDArray[np.float32]],
                    threshold: float) -> dict[str, str]:
    """``{dropped id: the kept id it duplicates}`` for ``ids`` in rank order (ids without a vector stay)."""
    have = [i for i in ids if i in vectors]
    if len(have) < 2:
        return {}
    mat = np.stack([vectors[i] for i in have]).astype(np.float64)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    mat = mat / np.where(norms == 0, 1.0, norms)
    over = (mat @ mat.T > threshold).tolist()  # Python lists: ~40x faster to probe than numpy scalars
    kept: list[int] = []
    dropped: dict[str, str] = {}
    for j in range(len(have)):
        row = over[j]
        twin = next((i for i in kept if row[i]), None)
        if twin is None:
            kept.append(j)
        else:
            dropped[have[j]] = have[twin]
    return dropped
