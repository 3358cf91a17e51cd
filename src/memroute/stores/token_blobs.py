"""A memory's token vectors as a store keeps them: int8 codes with one float16 scale per token.

A token vector (centred, unit length: :mod:`memroute.embed.tokens`) is kept as ``round(v / s)`` in int8 with
``s = max|v| / 127`` as float16: 386 bytes a 384-d token instead of 1,536 (float32) or 768 (float16), and a
MaxSim score moves by at most 0.002 (docs/benchmarks.md, the eleventh everyday-recall pass). The ids are the
encoder's token ids, space-separated (both backends' document-frequency triggers read them as text).

A blob is checked against the dimension the reader expects: codes that are not ``len(ids) x dimension`` bytes,
or scales that are not ``len(ids)`` float16 values, raise :class:`BadTokenBlob` (the stores leave such a memory
out of late interaction and log it), never a silently misread vector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from memroute.embed.tokens import TokenVectors
from memroute.errors import InputError


class BadTokenBlob(ValueError):
    """A stored token-vector blob that does not fit the dimension expected."""


def encoded(tv: TokenVectors, what: str) -> tuple[str, bytes, bytes]:
    """``(ids, codes, scales)`` of ``tv`` for a store row; an ``InputError`` naming ``what`` if it cannot be
    stored."""
    vectors = np.asarray(tv.vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(tv.ids):
        raise InputError(f"{what} has {len(tv.ids)} token ids and vectors of shape {vectors.shape}")
    if not np.isfinite(vectors).all():
        raise InputError(f"{what} contains NaN or infinity")
    scales = (np.abs(vectors).max(axis=1, initial=0.0) / 127.0).astype(np.float16)
    safe = np.where(scales > 0, scales, np.float16(1)).astype(np.float32)
    codes = np.clip(np.round(vectors / safe[:, None]), -127, 127).astype(np.int8)
    return " ".join(str(int(i)) for i in tv.ids), codes.tobytes(), scales.tobytes()


def decoded_rows(rows: Sequence[tuple[str, str | Sequence[int], bytes, bytes]], dimension: int,
                 refused: Callable[[str, BadTokenBlob], None]) -> dict[str, TokenVectors]:
    """Stored rows ``(memory id, ids, codes, scales)`` as token vectors by memory id, decoded at once (one join,
    one conversion: a recall reads ~50 of them, and decoding each apart cost 3x as much); a row that does not fit
    ``dimension`` is left out and passed to ``refused``."""
    good: list[tuple[str, str | Sequence[int], bytes, bytes]] = []
    counts: list[int] = []
    for mid, ids, codes, scales in rows:
        n = (ids.count(" ") + 1 if ids else 0) if isinstance(ids, str) else len(ids)  # written one space apart
        misfit = _misfit(n, codes, scales, dimension)
        if misfit is not None:
            refused(mid, misfit)
            continue
        good.append((mid, ids, codes, scales))
        counts.append(n)
    if not good:
        return {}
    vectors = _vectors(b"".join(g[2] for g in good), b"".join(g[3] for g in good), dimension)
    all_ids = (_id_array(" ".join(str(g[1]) for g in good)) if all(isinstance(g[1], str) for g in good)
               else np.concatenate([_id_array(g[1]) for g in good]))
    out: dict[str, TokenVectors] = {}
    at = 0
    for g, n in zip(good, counts, strict=True):  # slices (views), not np.split: its 50 pieces cost 0.2 ms
        out[g[0]] = TokenVectors(all_ids[at:at + n], vectors[at:at + n])
        at += n
    return out


def _id_array(ids: str | Sequence[int]) -> npt.NDArray[np.int32]:
    return np.array(ids.split() if isinstance(ids, str) else list(ids), dtype=np.int32)


def decoded(ids: str | Sequence[int], codes: bytes, scales: bytes, dimension: int) -> TokenVectors:
    """The token vectors of a stored row, checked against ``dimension`` (:class:`BadTokenBlob` if they do not
    fit)."""
    id_array = _id_array(ids)
    misfit = _misfit(len(id_array), codes, scales, dimension)
    if misfit is not None:
        raise misfit
    return TokenVectors(id_array, _vectors(codes, scales, dimension))


def copied(ids: str | Sequence[int] | None, codes: bytes | None, scales: bytes | None) -> TokenVectors | None:
    """A stored row's token vectors as a copy writes them again, at any dimension the row is consistent with;
    ``None`` for a row without them or one that fits no dimension."""
    if ids is None or codes is None or scales is None:
        return None
    n = len(_id_array(ids))
    if n == 0 or len(codes) % n:
        return None
    try:
        return decoded(ids, bytes(codes), bytes(scales), len(codes) // n)
    except BadTokenBlob:
        return None


def _misfit(n: int, codes: bytes, scales: bytes, dimension: int) -> BadTokenBlob | None:
    """Why ``n`` tokens' codes and scales do not fit ``dimension``, or ``None`` when they do."""
    if len(codes) != n * dimension or len(scales) != 2 * n:
        return BadTokenBlob(f"{n} token ids with {len(codes)} bytes of codes and {len(scales)} of scales, "
                            f"expected {n * dimension} and {2 * n} for {dimension}-d tokens")
    return None


def _vectors(codes: bytes, scales: bytes, dimension: int) -> npt.NDArray[np.float32]:
    """Int8 codes times their float16 scale per token, one row a token (already checked to fit)."""
    vectors = np.frombuffer(codes, dtype=np.int8).reshape(-1, dimension).astype(np.float32)
    vectors *= np.frombuffer(scales, dtype=np.float16).astype(np.float32)[:, None]
    return vectors
