"""Rows a store has read, kept between calls while nothing has been written.

A recall reads its ~60 candidates' rows and vectors by id, and at 10k memories the same memories come back
request after request: reading and decoding them again (SQL, JSON metadata, times, a ``MemoryItem``) was
~12 % of a recall's CPU. :class:`RowCache` keeps what was read, by owner and id, and forgets all of it as
soon as the store's change log moves (a write by this process or by any other sharing the file), so what
it answers is always what the tables hold.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, TypeVar

V = TypeVar("V")

ROWS = 20_000
"""Rows kept at most (least recently used go first): ~2 kB each with a 512-d vector."""


class RowCache(Generic[V]):
    """Values by (owner, id), valid for one position of the change log; not thread-safe (the store's lock
    guards it)."""

    def __init__(self, size: int = ROWS) -> None:
        self.size = size
        self._rows: OrderedDict[tuple[str, str], V] = OrderedDict()
        self._seq: int | None = None

    def at(self, seq: int) -> None:
        """The change log is at ``seq``: forget everything if it moved since the rows were read."""
        if seq != self._seq:
            self._rows.clear()
            self._seq = seq

    def get(self, owner: str, key: str) -> V | None:
        value = self._rows.get((owner, key))
        if value is not None:
            self._rows.move_to_end((owner, key))
        return value

    def split(self, owner: str, keys: Iterable[str]) -> tuple[dict[str, V], list[str]]:
        """The values kept for ``keys``, and the keys that are not kept (to read), in their order."""
        found: dict[str, V] = {}
        missing = []
        for key in keys:
            value = self.get(owner, key)
            if value is None:
                missing.append(key)
            else:
                found[key] = value
        return found, missing

    def put(self, owner: str, key: str, value: V) -> None:
        self._rows[(owner, key)] = value
        if len(self._rows) > self.size:
            self._rows.popitem(last=False)
