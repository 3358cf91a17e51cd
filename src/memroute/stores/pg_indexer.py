"""Putting pending memories into the HNSW graph, and rebuilding the BM25 blocks, in the background, for both
PostgreSQL stores.

A write commits its memories as pending (``indexed`` false, migration 6): they are durable and vector
search finds them at once (an exact scan of the owner's pending rows beside the graph's answer), and the
write does not wait for pgvector's graph insert (4.7-6.3 ms a row here, docs/benchmarks.md). This thread
then moves them into the graph, :data:`memroute.stores.pg_sql.INDEX_ROWS` a transaction, on a connection of
its own (not the store's pool, which serves the requests), until none is left, and waits for the next write.

Crash-safe by construction: a move is one UPDATE of the rows' ``indexed`` flag in one transaction, so a row
is in exactly one of the two parts at every commit. Closing the store cancels a move in flight (it is rolled
back; another process, or the next write, moves those rows). Several processes may run one each: rows
another one is moving are skipped (``FOR UPDATE SKIP LOCKED``). A delete waits for the moves in flight only,
not for the rows it deletes to be moved first: no move starts while it runs or waits
(:data:`memroute.stores.pg_sql.DELETE_LOCK_SQL`).

The same thread rebuilds the BM25 blocks from the postings when a writer's fold finds too many deleted rows
listed (:data:`memroute.stores.pg_bm25.BUILD_BLOCKS_SQL`: 18-52 s at 1M memories, during which writes and
searches go on), so that the write that crossed the limit returns at once. Cancelled by closing the store
(rolled back: the blocks and the changed list stay as they were, exact, and the next fold asks again).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from memroute.errors import DependencyError
from memroute.stores.pg_bm25 import BLOCKS_LOCK_ID, BUILD_BLOCKS_SQL, MERGE_BLOCKS_SQL
from memroute.stores.pg_sql import (
    INDEX_PENDING_SQL,
    INDEX_ROWS,
    MOVE_LOCK,
    MOVE_TRY_SQL,
    UTC_SESSION_SQL,
    safe_url,
    search_path_sql,
)

try:
    import psycopg
    from psycopg import errors as pg_errors
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise DependencyError("the PostgreSQL store needs: pip install 'memroute[postgres]'") from exc

log = logging.getLogger(__name__)

RETRY_S = 5.0
"""Wait after a failed move (server restarting, connection lost) before the next try."""
CANCEL_EVERY_S = 0.5
"""How often closing the store cancels the indexer's statement again while it waits for the thread to end."""
CONNECT_TIMEOUT_S = 10
DELETE_WAIT_S = 0.05
"""Wait before trying again while a delete runs or waits (:data:`memroute.stores.pg_sql.MOVE_TRY_SQL`)."""


class PendingIndexer:
    """A daemon thread that moves a store's pending memories into the HNSW graph after writes, and rebuilds
    the BM25 blocks when asked."""

    def __init__(self, url: str, conninfo: str, schema: str | None, batch: int = INDEX_ROWS) -> None:
        self._url, self._conninfo, self._schema, self._batch = url, conninfo, schema, int(batch)
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._closing = False
        self._busy = False
        self._rebuild = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self.moved = 0
        """Rows this indexer moved into the graph (for tests and benchmarks)."""
        self.rebuilds = 0
        """Rebuilds of the BM25 blocks this indexer committed (for tests and benchmarks)."""
        self.deferred = 0
        """Moves put off because a delete ran or waited (for tests)."""

    def rebuild_blocks(self) -> None:
        """Rebuild the BM25 blocks from the postings (after moving what is pending)."""
        with self._lock:
            self._rebuild = True
        self.wake()

    def wake(self) -> None:
        """There may be pending rows: move them (starts the thread on first use)."""
        with self._lock:
            if self._closing:
                return
            if self._thread is None or not self._thread.is_alive():  # first use, or a forked child
                self._thread = threading.Thread(target=self._loop, name="memroute-pg-indexer", daemon=True)
                self._thread.start()
            self._busy = True
            self._wake.set()

    def idle(self, timeout_s: float) -> bool:
        """Wait until the thread has nothing to move (or ``timeout_s`` passed); True if it is idle."""
        deadline = time.monotonic() + timeout_s
        while self._busy and self._thread is not None and self._thread.is_alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop: a move or rebuild in flight is cancelled (rolled back), the thread joined.

        The cancel is sent again every ``CANCEL_EVERY_S`` until the thread ends: a cancel that reaches the server
        between two statements cancels nothing, and the thread's next statement (up to ``INDEX_ROWS`` graph
        inserts, or a whole blocks rebuild) would otherwise run on after the store was closed."""
        with self._lock:
            self._closing = True
            thread = self._thread
        self._stop.set()
        self._wake.set()
        if thread is None:
            return
        deadline = time.monotonic() + timeout_s
        while thread.is_alive() and time.monotonic() < deadline:
            with self._lock:
                conn = self._conn
            if conn is not None:
                with contextlib.suppress(psycopg.Error):  # a connection already gone has nothing in flight
                    conn.cancel_safe(timeout=CANCEL_EVERY_S)
            thread.join(CANCEL_EVERY_S)
        if thread.is_alive():
            log.warning("the background indexer of %s did not stop within %.0f s of closing the store",
                        safe_url(self._url), timeout_s)

    # ------------------------------------------------------------------------------------ the thread
    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            try:
                conn = self._connect()
                self._drain(conn)
                self._rebuild_blocks(conn)
            except (pg_errors.ReadOnlySqlTransaction, pg_errors.InsufficientPrivilege) as exc:
                log.info("pending memories of %s stay out of the HNSW graph here (%s); a writer moves them",
                         safe_url(self._url), str(exc).strip())
                return
            except psycopg.Error as exc:
                if self._closing:
                    return
                log.warning("moving pending memories of %s into the HNSW graph or rebuilding its BM25 blocks "
                            "failed (%s); retrying in %.0f s", safe_url(self._url), str(exc).strip(), RETRY_S)
                self._stop.wait(RETRY_S)
                self._wake.set()
            finally:
                self._disconnect()
            with self._lock:
                if not self._wake.is_set():
                    self._busy = False

    def _drain(self, conn: psycopg.Connection[Any]) -> None:
        """Move batches until fewer than a batch were left (or the store closes); while a delete runs or
        waits, lock no rows (it would wait for every row moved meanwhile) and try again shortly."""
        while not self._closing:
            with conn.transaction():
                row = conn.execute(MOVE_TRY_SQL, (MOVE_LOCK,)).fetchone()
                moved = conn.execute(INDEX_PENDING_SQL, (self._batch,)).rowcount if row and row[0] else -1
            if moved < 0:
                self.deferred += 1
                self._stop.wait(DELETE_WAIT_S)
                continue
            self.moved += moved
            if moved < self._batch:
                return

    def _rebuild_blocks(self, conn: psycopg.Connection[Any]) -> None:
        """Rebuild the BM25 blocks if asked, unless another build or merge runs (it will take the deleted rows)."""
        with self._lock:
            asked, self._rebuild = self._rebuild, False
        if not asked or self._closing:
            return
        try:
            with conn.transaction():
                row = conn.execute(MERGE_BLOCKS_SQL[0], (BLOCKS_LOCK_ID,)).fetchone()
                if not (row and row[0]):
                    return  # another process is at it
                for statement in BUILD_BLOCKS_SQL[1:]:  # the first takes the lock just taken
                    conn.execute(statement)
        except psycopg.Error:
            with self._lock:
                self._rebuild = True  # asked again on the retry (or by the next fold, if closing)
            raise
        self.rebuilds += 1

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        conn.execute(UTC_SESSION_SQL)
        if self._schema is not None:
            conn.execute(search_path_sql(self._schema, local=False))
        with self._lock:
            self._conn = conn
        if self._closing:
            conn.cancel_safe()
        return conn

    def _disconnect(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
