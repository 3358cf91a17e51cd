"""BM25 postings of the in-memory index: a compact base read from the index files, plus the rows put since.

The base is one CSR table (term -> a run of slots with the term's frequency in each field), read as a few
arrays from the files written by :mod:`memroute.stores.index_files`, so opening a large store does not
rebuild a posting list per term from the table's rows. Rows put after the snapshot go to small growable lists per term.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Csr = tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32], npt.NDArray[np.float32]]
"""Terms, offsets (len(terms) + 1), slots, own-field and context-field frequencies."""


class _Growing:
    """One term's postings added since the base: slots and frequencies in growable arrays."""

    __slots__ = ("ctx", "n", "own", "slots")

    def __init__(self) -> None:
        self.n = 0
        self.slots = np.empty(4, dtype=np.int32)
        self.own = np.empty(4, dtype=np.float32)
        self.ctx = np.empty(4, dtype=np.float32)

    def add(self, slot: int, own: int, ctx: int) -> None:
        if self.n == len(self.slots):
            self.slots = np.resize(self.slots, self.n * 2)
            self.own = np.resize(self.own, self.n * 2)
            self.ctx = np.resize(self.ctx, self.n * 2)
        self.slots[self.n], self.own[self.n], self.ctx[self.n] = slot, own, ctx
        self.n += 1

    def frozen(self) -> _Growing:
        """A copy of the postings added so far."""
        copy = _Growing()
        copy.n = self.n
        copy.slots, copy.own = self.slots[: self.n].copy(), self.own[: self.n].copy()
        copy.ctx = self.ctx[: self.n].copy()
        return copy


def empty_csr() -> Csr:
    return ([], np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.float32),
            np.empty(0, dtype=np.float32))


class Postings:
    def __init__(self, base: Csr | None = None) -> None:
        self._terms, self._off, self._slots, self._own, self._ctx = base or empty_csr()
        self._term_ids = {t: i for i, t in enumerate(self._terms)}
        self._delta: dict[str, _Growing] = {}

    def frozen(self) -> Postings:
        """A copy that later adds do not change, made in a copy of the lists added since the base (the base
        arrays are shared: nothing writes them): :meth:`csr` may then run on another thread."""
        copy = Postings()
        copy._terms, copy._off, copy._slots, copy._own, copy._ctx = (self._terms, self._off, self._slots, self._own,
                                                                      self._ctx)
        copy._term_ids = self._term_ids
        copy._delta = {term: p.frozen() for term, p in self._delta.items()}
        return copy

    def add(self, term: str, slot: int, own: int, ctx: int) -> None:
        p = self._delta.get(term)
        if p is None:
            p = self._delta[term] = _Growing()
        p.add(slot, own, ctx)

    def get(self, term: str) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32], npt.NDArray[np.float32]] | None:
        """Every posting of ``term``: slots, own-field and context-field frequencies."""
        i, p = self._term_ids.get(term), self._delta.get(term)
        if i is None and p is None:
            return None
        parts = []
        if i is not None:
            a, b = int(self._off[i]), int(self._off[i + 1])
            parts.append((self._slots[a:b], self._own[a:b], self._ctx[a:b]))
        if p is not None:
            parts.append((p.slots[: p.n], p.own[: p.n], p.ctx[: p.n]))
        if len(parts) == 1:
            return parts[0]
        return (np.concatenate([x[0] for x in parts]), np.concatenate([x[1] for x in parts]),
                np.concatenate([x[2] for x in parts]))

    def csr(self, new_slot: npt.NDArray[np.int64] | None = None) -> Csr:
        """Base and added postings as one CSR table; ``new_slot`` renumbers slots (-1 drops a posting)."""
        terms = list(self._terms)
        ids = dict(self._term_ids)
        term_parts = [np.repeat(np.arange(len(terms), dtype=np.int64), np.diff(self._off))]
        slot_parts: list[npt.NDArray[np.int32]] = [np.asarray(self._slots, dtype=np.int32)]
        own_parts: list[npt.NDArray[np.float32]] = [np.asarray(self._own, dtype=np.float32)]
        ctx_parts: list[npt.NDArray[np.float32]] = [np.asarray(self._ctx, dtype=np.float32)]
        for term, p in self._delta.items():
            tid = ids.get(term)
            if tid is None:
                tid = ids[term] = len(terms)
                terms.append(term)
            term_parts.append(np.full(p.n, tid, dtype=np.int64))
            slot_parts.append(p.slots[: p.n])
            own_parts.append(p.own[: p.n])
            ctx_parts.append(p.ctx[: p.n])
        tids, slots = np.concatenate(term_parts), np.concatenate(slot_parts).astype(np.int64)
        own, ctx = np.concatenate(own_parts), np.concatenate(ctx_parts)
        if new_slot is not None:
            slots = new_slot[slots]
            keep = slots >= 0
            tids, slots, own, ctx = tids[keep], slots[keep], own[keep], ctx[keep]
        order = np.argsort(tids, kind="stable")
        tids = tids[order]
        counts = np.bincount(tids, minlength=len(terms))
        off = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(counts, out=off[1:])
        used = counts > 0  # terms left without postings go
        if not used.all():
            terms = [t for t, u in zip(terms, used.tolist(), strict=True) if u]
            off = np.concatenate([[0], np.cumsum(counts[used])]).astype(np.int64)
        return (terms, off, slots[order].astype(np.int32), own[order].astype(np.float32),
                ctx[order].astype(np.float32))
