"""PostgreSQL writes commit memories as pending and put them into the HNSW graph afterwards (migration 6).

On a real server: a memory is found by vector search from the moment its write commits, before and after it
enters the graph; updates and deletes of rows in either part; the pending part stays bounded; killing the
process that moves rows into the graph loses nothing; bulk loads go straight into the graph.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from memroute.stores import MemoryRecord
from memroute.types import MemoryItem, SearchFilter
from tests.pg_server import PgServer, drop_token_vectors

DIM = 16
FLT = SearchFilter(owner="o")


def _records(n: int, prefix: str = "m", seed: int = 0) -> list[MemoryRecord]:
    rng = np.random.default_rng(seed)
    return [MemoryRecord(MemoryItem(id=f"{prefix}{i}", owner="o", text=f"note {i}"), ["note", str(i)],
                         rng.normal(size=DIM).astype(np.float32)) for i in range(n)]


def _parts(url: str) -> tuple[int, int]:
    """(rows in the graph, pending rows)."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FILTER (WHERE indexed), count(*) FILTER (WHERE NOT indexed) "
                           "FROM memroute_memories").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _same_as_exact(store: object, queries: list[np.ndarray], limit: int = 5) -> None:
    """The graph-and-pending search gives the exact search's ids and scores (a graph of a few hundred rows
    searched 40 deep finds the exact neighbours)."""
    for q in queries:
        approx = store.search_vector(q, FLT, limit, exact=False)  # type: ignore[attr-defined]
        exact = store.search_vector(q, FLT, limit, exact=True)  # type: ignore[attr-defined]
        assert [h.id for h in approx] == [h.id for h in exact]
        assert np.allclose([h.score for h in approx], [h.score for h in exact], atol=1e-6)


def test_a_written_memory_is_found_at_once_and_after_it_enters_the_graph(pg_server: PgServer) -> None:
    from memroute.stores.postgres import PostgresStore

    url = pg_server.new_database()
    store = PostgresStore(url, index_in_background=False)
    store.bind_model("m", DIM)
    records = _records(300)
    store.upsert(records)
    assert _parts(url) == (0, 300) and store.pending() == 300  # committed, not yet in the graph
    for rec in records[:20]:
        assert store.search_vector(rec.vector, FLT, 1, exact=False)[0].id == rec.memory.id
    queries = [r.vector for r in _records(10, seed=1)]
    _same_as_exact(store, queries)

    assert store.index_pending(limit=100) == 100 and _parts(url) == (100, 200)  # both parts at once
    _same_as_exact(store, queries)
    assert store.index_pending() == 200 and _parts(url) == (300, 0) and store.pending() == 0
    _same_as_exact(store, queries)
    with psycopg.connect(url) as conn:  # the graph serves the indexed part (its predicate is the query's)
        conn.execute("SET enable_sort = off")  # an ordered scan of the indexed part is then the graph's or none
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT id FROM memroute_memories m WHERE m.indexed AND m.owner = 'o' "
            "ORDER BY embedding <=> %s::vector LIMIT 5", (str(queries[0].tolist()),)).fetchall())
        assert "memroute_memories_embedding" in plan

    # an updated memory leaves the graph with its old vector and is found by its new one at once
    moved = [MemoryRecord(MemoryItem(id=f"m{i}", owner="o", text=f"moved {i}"), ["moved"], -records[i].vector)
             for i in range(5)]
    store.upsert(moved)
    assert _parts(url) == (295, 5)
    for rec in moved:
        hit = store.search_vector(rec.vector, FLT, 1, exact=False)[0]
        assert hit.id == rec.memory.id and hit.score == pytest.approx(1.0, abs=1e-5)
    assert store.get(["m0"], "o")[0].text == "moved 0"
    _same_as_exact(store, queries)
    # deletes in either part
    assert store.delete(["m0", "m100"], "o") == 2  # m0 pending, m100 in the graph
    assert _parts(url) == (294, 4)
    found = {h.id for q in queries for h in store.search_vector(q, FLT, 50, exact=False)}
    assert not found & {"m0", "m100"}
    _same_as_exact(store, queries)
    store.close()


def test_the_background_indexer_moves_written_memories_into_the_graph(pg_server: PgServer) -> None:
    from memroute.stores.postgres import PostgresStore

    url = pg_server.new_database()
    store = PostgresStore(url)
    store.bind_model("m", DIM)
    records = _records(700)
    for start in range(0, 700, 100):
        store.upsert(records[start:start + 100])
        assert store.search_vector(records[start].vector, FLT, 1, exact=False)[0].id == records[start].memory.id
    assert store._indexer is not None and store._indexer.idle(60)
    assert _parts(url) == (700, 0) and store._indexer.moved == 700
    _same_as_exact(store, [r.vector for r in _records(10, seed=1)])
    store.close()

    # rows another process left pending are moved by the next store that opens
    writer = PostgresStore(url, index_in_background=False)
    writer.upsert(_records(50, prefix="late"))
    writer.close()
    assert _parts(url) == (700, 50)
    reader = PostgresStore(url)
    assert reader._indexer is not None and reader._indexer.idle(60)
    assert _parts(url) == (750, 0)
    reader.close()


def test_pending_memories_stay_bounded_when_writes_outrun_the_graph(pg_server: PgServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from memroute.stores import pg_ops
    from memroute.stores.postgres import PostgresStore

    monkeypatch.setattr(pg_ops, "INDEX_ROWS", 50)  # rows a writer moves per transaction
    url = pg_server.new_database()
    writer = PostgresStore(url, index_in_background=False, pending_rows=120)
    writer.bind_model("m", DIM)
    records = _records(600)
    for start in range(0, 300, 60):
        writer.upsert(records[start:start + 60])
        assert sum(_parts(url)) == start + 60 and _parts(url)[1] <= 120
    # a second writer counts the pending rows when it opens; each write leaves at most the bound
    other = PostgresStore(url, index_in_background=False, pending_rows=120)
    for i, start in enumerate(range(300, 600, 30)):
        (writer if i % 2 else other).upsert(records[start:start + 30])
        assert sum(_parts(url)) == start + 30 and _parts(url)[1] <= 120
    assert _parts(url)[1] <= 120
    _same_as_exact(writer, [r.vector for r in _records(10, seed=1)])
    writer.close()
    other.close()


def test_bulk_loads_go_into_the_graph_and_its_rebuild_takes_pending_rows(pg_server: PgServer) -> None:
    from memroute.stores.postgres import PostgresStore

    url = pg_server.new_database()
    store = PostgresStore(url, index_in_background=False)
    store.bind_model("m", DIM)
    store.bulk_load(_records(200, prefix="b"))
    assert _parts(url) == (200, 0)
    store.upsert(_records(30, prefix="p"))
    assert _parts(url) == (200, 30)
    store.bulk_load(_records(100, prefix="c"), rebuild_indexes=True)
    assert _parts(url) == (330, 0)
    _same_as_exact(store, [r.vector for r in _records(10, seed=1)])
    store.close()


_MOVER = """
import sys
from memroute.stores.postgres import PostgresStore
store = PostgresStore(sys.argv[1], index_in_background=False)
print("moving", flush=True)
store.index_pending()
"""


def test_killing_the_process_that_moves_rows_into_the_graph_loses_nothing(pg_server: PgServer,
                                                                          tmp_path: Path) -> None:
    from memroute.stores.postgres import PostgresStore

    url = pg_server.new_database()
    store = PostgresStore(url, index_in_background=False)
    store.bind_model("m", DIM)
    records = _records(4000)
    store.upsert(records)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd() / "src"), str(Path.cwd())])}
    mover = subprocess.Popen([sys.executable, "-c", _MOVER, url], stdout=subprocess.PIPE, env=env)
    assert mover.stdout is not None and mover.stdout.readline().strip() == b"moving"
    with psycopg.connect(url, autocommit=True) as conn:  # kill -9 while a move is running
        deadline = time.monotonic() + 60
        while not conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'UPDATE memroute_memories%%' "
                               "AND state = 'active'").fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline and mover.poll() is None
            time.sleep(0.01)
    os.kill(mover.pid, signal.SIGKILL)
    mover.wait()
    indexed, pending = _parts(url)
    assert indexed + pending == 4000 and pending > 0
    assert store.count("o") == 4000
    for rec in records[::40]:
        assert store.search_vector(rec.vector, FLT, 1, exact=False)[0].id == rec.memory.id
    store.index_pending()
    assert _parts(url) == (4000, 0)
    for rec in records[::40]:
        assert store.search_vector(rec.vector, FLT, 1, exact=False)[0].id == rec.memory.id
    store.close()


def test_migration_6_keeps_existing_memories_in_a_graph_of_its_own(pg_server: PgServer) -> None:
    from memroute.stores.migrations.postgres import MIGRATIONS
    from memroute.stores.postgres import PostgresStore

    url = pg_server.new_database()
    store = PostgresStore(url, index_in_background=False)
    store.bind_model("m", DIM)
    records = _records(200)
    store.bulk_load(records)
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:  # the store as memroute left it at schema version 5
        drop_token_vectors(conn)  # version 10's
        conn.execute("DROP TABLE memroute_blocks, memroute_blocks_changed")  # version 7's
        conn.execute("DROP FUNCTION memroute_blocks_added, memroute_blocks_removed CASCADE")
        conn.execute("DROP INDEX memroute_memories_pending, memroute_memories_embedding")
        conn.execute("ALTER TABLE memroute_memories DROP COLUMN indexed")
        conn.execute("CREATE INDEX memroute_memories_embedding ON memroute_memories USING hnsw (embedding "
                     "vector_cosine_ops) WITH (m = 32, ef_construction = 128)")
        conn.execute("UPDATE memroute_meta SET value = '5' WHERE key = 'schema_version'")
    store = PostgresStore(url, index_in_background=False)  # migrates
    with psycopg.connect(url) as conn:
        graph = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memroute_memories_embedding'")
        assert "WHERE indexed" in graph.fetchone()[0]  # type: ignore[index]
    assert _parts(url) == (200, 0)
    assert store.stats().schema_version == MIGRATIONS[-1][0]
    _same_as_exact(store, [r.vector for r in _records(10, seed=1)])
    store.upsert(_records(10, prefix="new"))
    assert _parts(url) == (200, 10)
    store.close()


def test_the_asyncio_store_writes_pending_rows_and_moves_them_too(pg_server: PgServer) -> None:
    from tests.pg_server import SyncOverAsync

    url = pg_server.new_database()
    store = SyncOverAsync(url)
    store.bind_model("m", DIM)
    records = _records(400)
    store.upsert(records)
    for rec in records[:10]:  # found at once, whichever part it is in by now
        assert store.search_vector(rec.vector, FLT, 1, exact=False)[0].id == rec.memory.id
    indexer = store.store._indexer
    assert indexer is not None and indexer.idle(60) and _parts(url) == (400, 0) and store.pending() == 0
    indexer.close()  # the rest by hand
    store.upsert(_records(30, prefix="late"))
    assert store.pending() == 30 and store.index_pending() == 30 and store.pending() == 0
    _same_as_exact(store, [r.vector for r in _records(10, seed=1)])
    store.close()


def test_a_delete_waits_for_the_moves_in_flight_only_not_for_its_rows_to_be_moved(pg_server: PgServer) -> None:
    """A move in flight holds its rows; a delete of pending rows waits for it, and no move starts while the
    delete waits: before, the indexer locked the next rows (``SKIP LOCKED``) while the delete waited for the
    previous ones, so the delete waited for nearly every row it deletes to be moved (~30 s for 2,562 at 1M)."""
    import threading

    from memroute.stores.pg_sql import INDEX_PENDING_SQL, MOVE_LOCK, MOVE_TRY_SQL
    from memroute.stores.postgres import PostgresStore

    url = pg_server.new_database()
    writer = PostgresStore(url, index_in_background=False)
    writer.bind_model("m", DIM)
    records = _records(300)
    writer.upsert(records)
    with psycopg.connect(url) as mover:  # a move in flight, as the indexer makes it
        assert mover.execute(MOVE_TRY_SQL, (MOVE_LOCK,)).fetchone() == (True,)
        assert mover.execute(INDEX_PENDING_SQL, (100,)).rowcount == 100
        deleted: list[int] = []
        deleting = threading.Thread(target=lambda: deleted.append(writer.delete([r.memory.id for r in records], "o")))
        deleting.start()
        time.sleep(0.5)
        assert deleting.is_alive()  # it waits for the move in flight
        indexer = PostgresStore(url)  # its indexer wakes for the 200 other pending rows, and must not take them
        assert indexer._indexer is not None
        deadline = time.monotonic() + 30
        while indexer._indexer.deferred < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert indexer._indexer.deferred >= 3 and indexer._indexer.moved == 0 and deleting.is_alive()
        mover.commit()
    deleting.join(30)
    assert not deleting.is_alive() and deleted == [300]
    assert indexer._indexer.idle(30) and indexer._indexer.moved == 0
    assert _parts(url) == (0, 0) and writer.count() == 0
    indexer.close()
    writer.close()


def test_closing_the_store_cancels_a_move_in_flight_and_joins_the_indexer(pg_server: PgServer) -> None:
    """A move that waits in the server (here for a table lock) is cancelled and rolled back by close(), which
    returns once the indexer's thread has ended: no thread outlives its store."""
    from memroute.stores.pg_indexer import PendingIndexer
    from memroute.stores.postgres import PostgresStore

    url = pg_server.new_database()
    writer = PostgresStore(url, index_in_background=False)
    writer.bind_model("m", DIM)
    writer.upsert(_records(100))
    writer.close()
    with psycopg.connect(url) as blocker, psycopg.connect(url, autocommit=True) as watcher:
        blocker.execute("LOCK TABLE memroute_memories IN EXCLUSIVE MODE")  # reads go on, the move waits
        indexer = PendingIndexer(url, url, None)
        indexer.wake()
        deadline = time.monotonic() + 30
        waiting: list[Any] = []
        while not waiting and time.monotonic() < deadline:
            waiting = watcher.execute("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query "
                                      "LIKE 'UPDATE memroute_memories%%'").fetchall()
            time.sleep(0.05)
        if not waiting:
            indexer.close()
        assert waiting, "the move did not start"
        started = time.monotonic()
        indexer.close()
        assert indexer._thread is not None and not indexer._thread.is_alive()
        assert time.monotonic() - started < 10
        blocker.rollback()
    assert indexer.moved == 0 and _parts(url) == (0, 100)  # the cancelled move was rolled back
