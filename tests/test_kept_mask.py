"""The filter mask a vector search keeps between searches (and BM25 reads): the same rows as a mask computed afresh,
whatever the time of the search (rows expire between two searches), and forgotten when the index changes. A real SQLite
store."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from memroute.stores.base import MemoryRecord
from memroute.stores.memory_index import NEVER, MemoryIndex
from memroute.stores.sqlite import SQLiteStore
from memroute.times import from_micros
from memroute.types import MemoryItem, MemoryKind, ScoredId, SearchFilter, Sensitivity
from tests.index_files_support import DIM, MODEL

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rows(start: int, n: int) -> list[MemoryRecord]:
    """Two owners, three sessions, two kinds; one row in three expires, at times spread over ~40 days."""
    out = []
    for i in range(start, start + n):
        v = np.random.default_rng([3, i]).standard_normal(DIM).astype(np.float32)
        v /= np.linalg.norm(v)
        item = MemoryItem(id=f"m{i}", owner="o" if i % 4 else "p", text=f"w{i % 31} m{i}", session_id=f"s{i % 3}",
                          kind=MemoryKind.FACT if i % 5 == 0 else MemoryKind.NOTE,
                          sensitivity=Sensitivity.PRIVATE if i % 11 == 0 else Sensitivity.PUBLIC,
                          expires_at=T0 + timedelta(hours=7 * i % 1000) if i % 3 == 0 else None)
        out.append(MemoryRecord(item, [f"w{i % 31}", f"m{i}"], v))
    return out


def store_of(db: Path) -> SQLiteStore:
    store = SQLiteStore(str(db))
    store.bind_model(MODEL, DIM)
    return store


def fresh(index: MemoryIndex, flt: SearchFilter) -> np.ndarray:
    """The mask as the filters read it, computed now from the columns."""
    every = np.arange(index.rows)
    mask: np.ndarray = index._mask(every, flt) & (index._owner[: index.rows] == index._codes["o:" + flt.owner])
    return mask


def exact(index: MemoryIndex, query: np.ndarray, flt: SearchFilter, limit: int) -> list[str]:
    slots = np.flatnonzero(fresh(index, flt))
    scores = index._matrix[slots] @ query
    return [index._ids[int(slots[i])] for i in np.lexsort((slots, -scores))[:limit]]


def test_the_kept_mask_is_the_fresh_mask_at_every_time_and_after_every_change(tmp_path: Path) -> None:
    store = store_of(tmp_path / "m.db")
    store.upsert(rows(0, 600))
    rng = np.random.default_rng(1)
    filters = [SearchFilter(owner="o"), SearchFilter(owner="p", session_id="s1"),
               SearchFilter(owner="o", kinds=(MemoryKind.FACT,), max_sensitivity=Sensitivity.PRIVATE)]
    expired_seen = 0
    for step in range(40):
        # times before, at and after rows' expiries, in no order: the kept mask may not outlive the soonest
        now = T0 + timedelta(hours=int(rng.integers(0, 1100)), microseconds=int(rng.integers(0, 2)))
        flt = dataclasses.replace(filters[step % 3], now=now)
        if step % 4 == 3 and store._index is not None:  # exactly the soonest expiry of the rows that pass: expired
            before = store._index
            passing = fresh(before, dataclasses.replace(flt, include_expired=True))
            now = from_micros(int(np.min(np.where(passing, before._expires[: before.rows], NEVER))))
            flt = dataclasses.replace(flt, now=now)
        q = rng.standard_normal(DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        got = store.search_vector(q, flt, 10, exact=True)
        index = store._index
        assert index is not None
        found = index._allowed(flt)
        assert found is not None
        want = fresh(index, flt)
        assert np.array_equal(found[0], want) and found[1] == int(want.sum())
        assert [h.id for h in got] == exact(index, q, flt, 10)
        # BM25 reads the same kept mask (the expiry test applied to its rows when a passing row has expired)
        terms = [f"w{step % 31}", f"w{step * 7 % 31}"]
        allow = {index._ids[int(s)] for s in np.flatnonzero(want)}
        unexpiring = store.search_bm25(terms, dataclasses.replace(flt, include_expired=True), 10**6)
        assert store.search_bm25(terms, flt, 10) == [h for h in unexpiring if h.id in allow][:10]
        expired_seen += int(np.count_nonzero(fresh(index, SearchFilter(owner=flt.owner, include_expired=True,
                                                                       now=now)) & ~want))
        if step % 10 == 4:  # a new row, a deleted one and a re-put one change the index
            store.upsert(rows(600 + step, 1))
            store.delete([f"m{step}"], owner="o" if step % 4 else "p")
    assert expired_seen > 0  # the times did cut expired rows out
    store.close()


def test_the_kept_mask_is_read_only_and_forgotten_after_a_put(tmp_path: Path) -> None:
    store = store_of(tmp_path / "m.db")
    store.upsert(rows(0, 50))
    flt = SearchFilter(owner="o", now=T0)
    q = np.random.default_rng(9).standard_normal(DIM).astype(np.float32)
    q /= np.linalg.norm(q)
    before: list[ScoredId] = store.search_vector(q, flt, 3, exact=True)
    index = store._index
    assert index is not None
    kept = index._allowed(flt)
    assert kept is not None and not kept[0].flags.writeable
    store.upsert([MemoryRecord(MemoryItem(id="new", owner="o", text="new"), ["new"], q)])
    after = store.search_vector(q, flt, 3, exact=True)
    assert after[0].id == "new" and before[0].id != "new"
    store.close()
