"""An exact in-memory vector index with the store's filters, for backends without a fast vector search.

Brute-force cosine over a contiguous float32 matrix is the fastest exact KNN on a small CPU (numpy: 0.4 ms
at 10k and ~8 ms at 100k 384-d vectors, where sqlite-vec was 4-9x slower; STACK.md). Filters are numpy
masks over per-row metadata kept beside the matrix; rows of one owner are scored on their own when the
owner holds a small share of the index, so a small owner's search does not pay for a large one's data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memroute.types import MemoryItem, MemoryKind, ScoredId, SearchFilter

_KINDS = {k: i for i, k in enumerate(MemoryKind)}


def _ts(value: object) -> float:
    return value.timestamp() if value is not None else math.nan  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class RowMeta:
    id: str
    owner: str
    session_id: str | None
    kind: MemoryKind
    sensitivity: int
    occurred_at: float
    expires_at: float
    archived: bool

    @classmethod
    def of(cls, m: MemoryItem) -> RowMeta:
        exp = _ts(m.expires_at)
        return cls(m.id, m.owner, m.session_id, m.kind, int(m.sensitivity), _ts(m.occurred_at),
                   math.inf if math.isnan(exp) else exp, m.archived)


class VectorIndex:
    """Rows keyed by the backend's integer row id; ``put`` replaces, ``remove`` deletes."""

    def __init__(self, dimension: int, capacity: int = 1024) -> None:
        self.dimension = dimension
        self._matrix = np.zeros((capacity, dimension), dtype=np.float32)
        self._n = 0
        self._alive = np.zeros(capacity, dtype=bool)
        self._owner = np.zeros(capacity, dtype=np.int32)
        self._session = np.zeros(capacity, dtype=np.int32)
        self._kind = np.zeros(capacity, dtype=np.int8)
        self._sens = np.zeros(capacity, dtype=np.int8)
        self._occurred = np.zeros(capacity, dtype=np.float64)
        self._expires = np.zeros(capacity, dtype=np.float64)
        self._archived = np.zeros(capacity, dtype=bool)
        self._ids: list[str] = [""] * capacity
        self._slot_of_row: dict[int, int] = {}
        self._codes: dict[str, int] = {"": 0}
        self._owner_slots: dict[int, list[int]] = {}
        self._dead = 0

    def __len__(self) -> int:
        return self._n - self._dead

    def _code(self, value: str | None) -> int:
        key = value or ""
        code = self._codes.get(key)
        if code is None:
            code = len(self._codes)
            self._codes[key] = code
        return code

    def _grow(self, needed: int) -> None:
        cap = len(self._alive)
        if needed <= cap:
            return
        new_cap = max(needed, cap * 2)
        for name in ("_matrix", "_alive", "_owner", "_session", "_kind", "_sens", "_occurred", "_expires",
                     "_archived"):
            old = getattr(self, name)
            new = np.zeros((new_cap, *old.shape[1:]), dtype=old.dtype)
            new[:cap] = old
            setattr(self, name, new)
        self._ids.extend([""] * (new_cap - cap))

    def put(self, row: int, meta: RowMeta, vector: npt.NDArray[np.float32]) -> None:
        self.remove(row)
        self._grow(self._n + 1)
        slot = self._n
        self._n += 1
        self._matrix[slot] = vector
        self._alive[slot] = True
        owner = self._code("o:" + meta.owner)
        self._owner[slot] = owner
        self._session[slot] = self._code("s:" + meta.session_id) if meta.session_id else 0
        self._kind[slot] = _KINDS[meta.kind]
        self._sens[slot] = meta.sensitivity
        self._occurred[slot] = meta.occurred_at
        self._expires[slot] = meta.expires_at
        self._archived[slot] = meta.archived
        self._ids[slot] = meta.id
        self._slot_of_row[row] = slot
        self._owner_slots.setdefault(owner, []).append(slot)

    def remove(self, row: int) -> None:
        slot = self._slot_of_row.pop(row, None)
        if slot is not None:
            self._alive[slot] = False
            self._dead += 1
            if self._dead > 1024 and self._dead > self._n // 4:
                self._compact()

    def _compact(self) -> None:
        live = np.flatnonzero(self._alive[: self._n])
        rows = {slot: row for row, slot in self._slot_of_row.items()}
        for name in ("_matrix", "_alive", "_owner", "_session", "_kind", "_sens", "_occurred", "_expires",
                     "_archived"):
            arr = getattr(self, name)
            arr[: len(live)] = arr[live]
            arr[len(live) : self._n] = 0
        self._ids = [self._ids[s] for s in live] + [""] * (len(self._ids) - len(live))
        self._slot_of_row = {rows[int(old)]: new for new, old in enumerate(live)}
        self._n = len(live)
        self._dead = 0
        self._owner_slots = {}
        for slot in range(self._n):
            self._owner_slots.setdefault(int(self._owner[slot]), []).append(slot)

    def search(self, query: npt.NDArray[np.float32], flt: SearchFilter, limit: int) -> list[ScoredId]:
        owner = self._codes.get("o:" + flt.owner)
        if owner is None or limit <= 0:
            return []
        owner_slots = self._owner_slots.get(owner, [])
        if len(owner_slots) * 3 < self._n:
            slots = np.fromiter(owner_slots, dtype=np.int64, count=len(owner_slots))
        else:
            slots = np.flatnonzero(self._owner[: self._n] == owner)
        slots = slots[self._mask(slots, flt)]
        if slots.size == 0:
            return []
        if slots.size * 2 > self._n:
            scores = (self._matrix[: self._n] @ query)[slots]
        else:
            scores = self._matrix[slots] @ query
        k = min(limit, slots.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < slots.size else np.arange(slots.size)
        order = top[np.lexsort((slots[top], -scores[top]))]
        return [ScoredId(self._ids[int(slots[i])], float(scores[i])) for i in order]

    def _mask(self, slots: npt.NDArray[np.int64], flt: SearchFilter) -> npt.NDArray[np.bool_]:
        mask = self._alive[slots].copy()
        if flt.session_id is not None:
            code = self._codes.get("s:" + flt.session_id, -1)
            mask &= self._session[slots] == code
        if flt.kinds:
            mask &= np.isin(self._kind[slots], [_KINDS[k] for k in flt.kinds])
        mask &= self._sens[slots] <= int(flt.max_sensitivity)
        if not flt.include_archived:
            mask &= ~self._archived[slots]
        if not flt.include_expired and flt.now is not None:
            mask &= self._expires[slots] > flt.now.timestamp()
        if flt.start is not None:
            mask &= self._occurred[slots] >= flt.start.timestamp()  # NaN compares False: no date, no match
        if flt.end is not None:
            mask &= self._occurred[slots] <= flt.end.timestamp()
        return mask

    def rows(self) -> Sequence[int]:
        return list(self._slot_of_row)
