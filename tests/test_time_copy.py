"""The time-ordered 8-bit copy of the saved vectors: searches inside a time range equal the exact scan, and a copy
that is missing, truncated or of files written before it existed is repaired. Real files and a real SQLite store."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memroute.stores import index_files, memory_index, time_copy
from memroute.stores.base import MemoryRecord
from memroute.stores.sqlite import SQLiteStore
from memroute.stores.time_copy import TimeCopy
from memroute.stores.vector_file import VectorFile
from memroute.types import MemoryItem, ScoredId, SearchFilter
from tests.index_files_support import DIM, MODEL, open_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROWS = 3000
CENTRES = np.random.default_rng(0).standard_normal((5, DIM)).astype(np.float32)


@pytest.fixture(autouse=True)
def thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_files, "GRAPH_MIN_ROWS", 300)
    monkeypatch.setattr(index_files, "GRAPH_EXTEND_ROWS", 100)


def timed_records(start: int, n: int, seed: int) -> list[MemoryRecord]:
    """Two owners, three sessions, one row in 20 without a time, one in 9 expiring; times spread over ~125 days,
    out of row order."""
    out = []
    for i in range(start, start + n):
        rng = np.random.default_rng([seed, i])
        # tight clusters: neighbours differ by less than the 8-bit error, so a wrong bound gives wrong answers
        v = CENTRES[i % len(CENTRES)] + 0.03 * rng.standard_normal(DIM).astype(np.float32)
        v /= np.linalg.norm(v)
        when = None if i % 20 == 7 else T0 + timedelta(hours=int(rng.integers(0, 3000)))
        expires = T0 + timedelta(hours=int(rng.integers(0, 3000))) if i % 9 == 4 else None
        item = MemoryItem(id=f"m{i}", owner="o" if i % 4 else "p", text=f"w{i % 97} m{i}", session_id=f"s{i % 3}",
                          occurred_at=when, expires_at=expires)
        out.append(MemoryRecord(item, [f"w{i % 97}", f"m{i}"], v))
    return out


def saved(db: Path) -> SQLiteStore:
    """A store of ROWS rows whose index files (with the copy) are on disk, opened again from them."""
    store = open_store(str(db))
    store.upsert(timed_records(0, ROWS, 1))
    store.search_vector(timed_records(0, 1, 1)[0].vector, SearchFilter(owner="o"), 5)
    assert store.finish_index_files()
    store.close()
    return open_store(str(db))


def reference(db: Path) -> SQLiteStore:
    """The same database searched from an index built from its table alone (no files, no copy)."""
    store = SQLiteStore(str(db), index_files_min_rows=10**9)
    store._files_root = None
    store.bind_model(MODEL, DIM)
    return store


def same(got: list[ScoredId], want: list[ScoredId]) -> None:
    assert [h.id for h in got] == [h.id for h in want]
    assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-5)


class Uses:
    """Counts the searches that went through the copy (the real search runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = TimeCopy.search

        def counted(copy: TimeCopy, *args: object, **kwargs: object) -> object:
            self.n += 1
            return real(copy, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(TimeCopy, "search", counted)


def occurred(db: Path) -> dict[str, datetime | None]:
    """Every memory's time as the table holds it."""
    store = reference(db)
    try:
        return {r.memory.id: r.memory.occurred_at for r in store.iter_records()}
    finally:
        store.close()


def check_ranges(store: SQLiteStore, db: Path, queries: int = 30) -> None:
    """Vector and BM25 searches inside time ranges against the table-only index; BM25 also against its search
    without the range, filtered by the table's times."""
    times = occurred(db)
    ref = reference(db)
    rng = np.random.default_rng(5)
    try:
        for i in range(queries):
            q = CENTRES[i % len(CENTRES)] + 0.03 * rng.standard_normal(DIM).astype(np.float32)
            q /= np.linalg.norm(q)
            first = T0 + timedelta(hours=int(rng.integers(0, 2000)))
            start, end = first, first + timedelta(hours=int(rng.integers(400, 1200)))
            if i % 6 == 5:  # most rows: the whole-column path (exact=True: not the graph's first pass)
                start, end = None, T0 + timedelta(hours=2900)
            elif i % 6 == 4:  # a day: scored one by one
                end = first + timedelta(hours=24)
            flt = SearchFilter(owner="o" if i % 5 else "p", start=start, end=end,
                               session_id="s1" if i % 7 == 3 else None,
                               now=T0 + timedelta(hours=int(rng.integers(0, 3000))) if i % 2 else None)
            words = [f"w{j}" for j in rng.integers(0, 97, 3)]
            if i % 6 == 3:  # the range's ends are the times of two memories, whose words are searched
                ends = sorted(rng.choice([k for k, t in times.items() if t is not None], 2, replace=False),
                              key=lambda k: times[k])  # type: ignore[arg-type,return-value]
                start, end = times[ends[0]], times[ends[1]]
                words = [f"w{int(k[1:]) % 97}" for k in ends]
                flt = dataclasses.replace(flt, start=start, end=end)
            for limit in (1, 10, 40):
                # exact=True where the range may hold most rows (else the graph is the first pass)
                same(store.search_vector(q, flt, limit, exact=i % 6 in (3, 5)), ref.search_vector(q, flt, limit))
                got = store.search_bm25(words, flt, limit)
                same(got, ref.search_bm25(words, flt, limit))
                every = ref.search_bm25(words, dataclasses.replace(flt, start=None, end=None), 10 * ROWS)
                same(got, [h for h in every if (t := times[h.id]) is not None and (start is None or t >= start)
                           and (end is None or t <= end)][:limit])
    finally:
        ref.close()


@pytest.mark.parametrize(("first_k", "dense_share"), [(4, 10**9), (time_copy.FIRST_K, 4), (256, 10**9)])
def test_time_ranges_answer_as_the_exact_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_k: int,
                                              dense_share: int) -> None:
    monkeypatch.setattr(time_copy, "FIRST_K", first_k)  # 4: the bound fails at first and the rescored rows grow
    monkeypatch.setattr(time_copy, "OVERHEAD_ROWS", first_k)  # small: most ranges go through the copy
    # 10**9: every BM25 search cuts its best rows from every row's score (a small range's rows come from the copy)
    monkeypatch.setattr(memory_index, "_DENSE_SHARE", dense_share)
    uses = Uses(monkeypatch)
    db = tmp_path / "m.db"
    store = saved(db)
    store.search_vector(timed_records(0, 1, 1)[0].vector, SearchFilter(owner="o"), 1)
    copy = store._index.time_copy if store._index is not None else None
    assert copy is not None and copy.rows == ROWS
    assert len(copy.order) == sum(1 for i in range(ROWS) if i % 20 != 7)
    check_ranges(store, db)
    assert uses.n >= 30  # of 90 searches
    # rows changed after the files: new, deleted, put again with another time (a slot's time never changes)
    store.upsert(timed_records(ROWS, 300, 2))
    store.delete([f"m{i}" for i in range(0, 600, 3)], "o")
    moved = timed_records(1000, 200, 1)
    store.upsert([dataclasses.replace(r, memory=dataclasses.replace(r.memory, occurred_at=T0 + timedelta(hours=1500)))
                  for r in moved])
    uses.n = 0
    check_ranges(store, db)
    assert uses.n >= 30  # of 90 searches
    store.close()


def test_the_bound_holds_for_every_row(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((2000, DIM)).astype(np.float32) * rng.uniform(0.01, 1.0, DIM).astype(np.float32)
    order = rng.permutation(2000)[:1500].astype(np.int64)
    path = tmp_path / "bytime.u8"
    lo, step = time_copy.write(path, order, lambda s: vectors[s], 2000, DIM, threading.Event())
    copy = TimeCopy(2000, VectorFile(path, DIM, len(order), np.uint8), order, np.arange(len(order)), lo, step)
    for _ in range(20):
        q = rng.standard_normal(DIM).astype(np.float32)
        approx = copy.approximate(q, 0, len(order))
        exact = vectors[order] @ q
        gap = float(np.abs(approx - exact).max())
        assert 0 < gap <= copy.bound(q)
        assert copy.bound(q) < 0.7 * float(np.abs(q) @ step)  # not vacuous: about half a step per component


def rebuild_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "rebuilding the search index" in r.getMessage()]


@pytest.mark.parametrize("damage", ["delete", "truncate", "other order"])
def test_a_damaged_copy_is_rebuilt_from_the_table(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                  damage: str) -> None:
    db = tmp_path / "m.db"
    saved(db).close()
    root = index_files.index_dir(str(db))
    manifest = json.loads((root / "manifest.json").read_text())
    if damage == "delete":
        (root / manifest["bytime"]).unlink()
    elif damage == "truncate":
        with open(root / manifest["bytime"], "r+b") as fh:
            fh.truncate(DIM * 10)
    else:  # a manifest that counts other rows than the saved order holds
        (root / "manifest.json").write_text(json.dumps({**manifest, "bytime_rows": manifest["bytime_rows"] - 1}))
    caplog.set_level(logging.INFO, "memroute.store")
    store = open_store(str(db))
    check_ranges(store, db, queries=10)
    why = {"delete": "missing", "truncate": "truncated", "other order": "time-ordered copy"}[damage]
    lines = rebuild_lines(caplog)
    assert len(lines) == 1 and why in lines[0], lines
    assert store.finish_index_files()
    store.close()
    caplog.clear()
    store = open_store(str(db))  # repaired: the next open trusts the files, copy included
    check_ranges(store, db, queries=10)
    assert rebuild_lines(caplog) == [] and store._index is not None and store._index.time_copy is not None
    store.close()


def test_files_written_before_the_copy_are_used_and_upgraded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "m.db"
    saved(db).close()
    root = index_files.index_dir(str(db))
    manifest = json.loads((root / "manifest.json").read_text())
    (root / manifest["bytime"]).unlink()  # as the files of the previous release: no copy, no keys for it
    files = {k: v for k, v in manifest["files"].items() if k != manifest["bytime"]}
    old = {k: v for k, v in manifest.items() if k not in ("bytime", "bytime_rows")}
    (root / "manifest.json").write_text(json.dumps({**old, "files": files}))
    caplog.set_level(logging.INFO, "memroute.store")
    store = open_store(str(db))
    check_ranges(store, db, queries=10)  # answers from the files without the copy, and starts writing it
    assert rebuild_lines(caplog) == []
    assert store.finish_index_files()
    check_ranges(store, db, queries=10)
    assert store._index is not None and store._index.time_copy is not None
    upgraded = json.loads((root / "manifest.json").read_text())
    assert upgraded["bytime"] in upgraded["files"] and upgraded["generation"] > manifest["generation"]
    store.close()
