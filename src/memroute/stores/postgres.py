"""The PostgreSQL store: the same contract as SQLite, for stores that outgrow one machine.

Any PostgreSQL 14+ with the pgvector extension (managed or self-hosted). Many memroute replicas can share
one database: all state is in the database, migrations take an advisory lock. ``?schema=NAME`` in the URL
keeps a store in a schema of its own (created on first open), so one database can hold several stores.

- Lexical search: memroute's own tokens (PostgreSQL has no Japanese or Korean configuration) are stored as
  text and as ``tsvector`` columns built from them and the parts of their hyphenated words
  (:func:`memroute.text.index_terms`, migration 4), in a narrow table of their own
  (``memroute_lexical``, migration 3) (``array_to_tsvector``: no parser, no stemming),
  one for the memory's own words and one for its context, each with a GIN index (document frequencies).
  Searches read ``memroute_postings`` (migration 5, kept by triggers): per owner, field and term, each
  memory's BM25 term-frequency part ("impact"), best first, and stop as soon as no memory not met yet can
  enter the answer; the memories met are scored with the same Okapi BM25 as the SQLite store
  (:mod:`memroute.stores.bm25`), with N, n and the average length read from the table (cached for five
  minutes). The answer is the exact BM25 top ``limit`` over every matching memory, ties broken by insertion
  order as in SQLite, so scores fuse the same way on both backends (:mod:`memroute.stores.pg_bm25`). Since
  migration 7 the lists are also packed in ``memroute_blocks``: a search without a session or time filter
  fetches them as raw bytes and sums the bounds in numpy, where the server spent ~1 µs a posting.
- Vector search: a pgvector ``vector(d)`` column (stored inline, not TOASTed: an exact scan is ~8x faster)
  with an HNSW index (cosine). An owner with at most ``EXACT_ROWS`` memories is searched exactly (a scan of
  its rows is as fast as the graph there, and exact like SQLite); larger ones walk the HNSW graph with
  ``hnsw.ef_search`` at least 4x the limit (more if the session sets it higher) and pgvector's iterative
  scans, so that filters do not starve the result.
- Every write is one transaction: a memory and all its index entries change together or not at all, but
  for the HNSW graph (schema version 6): a write commits its memories as pending, found by vector search at
  once through an exact scan of the owner's pending rows beside the graph's answer, and a thread of the store
  moves them into the graph afterwards (:mod:`memroute.stores.pg_indexer`); at most ``pending_rows`` wait.
  :meth:`PostgresStore.bulk_load` writes many at once with binary COPY, optionally rebuilding the search
  indexes after the load (far faster than growing an HNSW graph row by row).

- A read replica (hot standby) or a read-only role can be opened once the primary is migrated: opening
  writes nothing when the schema is current, and a write then fails with a message that says where to send it.

Every operation is written once in :mod:`memroute.stores.pg_ops`; this store runs it on a (thread-safe)
``psycopg_pool.ConnectionPool``, :mod:`memroute.stores.postgres_async` on an ``AsyncConnectionPool``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.embed.tokens import TokenVectors
from memroute.errors import DependencyError
from memroute.stores.base import MemoryRecord, StateEntry, StoreStats
from memroute.stores.pg_indexer import PendingIndexer
from memroute.stores.pg_ops import Batch, Done, Many, Op, PgOperations, Step, T, resume
from memroute.stores.pg_sql import (
    ANALYZE_SQL,
    DROP_INDEXES_SQL,
    EXACT_ROWS,
    INDEX_ROWS,
    LOAD_COLUMNS,
    LOAD_TYPES,
    MERGE_SQL,
    PENDING_ROWS,
    SEARCH_INDEXES,
    STAGING_DDL,
    UTC_SESSION_SQL,
    SearchCache,
    memory_of,
    record_rows,
    safe_url,
    search_path_sql,
    split_schema,
    token_rows,
    translate_errors,
    vector_query,
    vector_settings,
    where_clause,
)
from memroute.types import MemoryItem, Message, ScoredId, SearchFilter

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise DependencyError("the PostgreSQL store needs: pip install 'memroute[postgres]'") from exc

__all__ = ["EXACT_ROWS", "LOAD_BATCH", "SEARCH_INDEXES", "PostgresStore", "SearchCache",
           "memory_of", "record_rows", "run_op", "safe_url", "split_schema",
           "translate_errors", "vector_query", "vector_settings", "where_clause"]

LOAD_BATCH = 2000
"""Rows per COPY in :meth:`PostgresStore.bulk_load`: the staging table stays inside ``temp_buffers``."""


def execute(conn: psycopg.Connection[Any], step: Step) -> Any:
    if isinstance(step, Many):
        with conn.cursor() as cur:
            cur.executemany(step.query, step.rows)
        return None
    if isinstance(step, Batch):
        with conn.pipeline() as pipeline:
            cursors = [conn.cursor(binary=sql.binary).execute(sql.query, sql.params) for sql in step.steps]
            pipeline.sync()
            return [cur.fetchall() if cur.description is not None else cur.rowcount for cur in cursors]
    cur = conn.execute(step.query, step.params, binary=step.binary)
    return cur.fetchall() if cur.description is not None else cur.rowcount


def run_op(conn: psycopg.Connection[Any], op: Op[T], step: Step | Done[T] | None = None) -> T:
    """Run an operation (from ``step``, its first statement, if already taken) on ``conn`` in one transaction."""
    with conn.transaction():
        step = resume(op) if step is None else step
        while not isinstance(step, Done):
            try:
                value = execute(conn, step)
            except psycopg.Error as exc:
                step = resume(op, error=exc)  # the operation may explain it better
                continue
            step = resume(op, value)
        return step.value


class PostgresStore(PgOperations):
    """A :class:`memroute.stores.base.Store` on PostgreSQL with pgvector."""

    concurrent_searches = True
    """Each search is a statement in the server on a pooled connection of its own: ``Memory.search`` runs a
    hybrid search's BM25 and vector searches at once (in two threads) rather than one after the other."""

    def __init__(self, url: str, min_connections: int = 1, max_connections: int = 8,
                 connect_timeout_s: float = 10.0, index_in_background: bool = True,
                 pending_rows: int = PENDING_ROWS) -> None:
        """``index_in_background``: a thread moves written memories into the HNSW graph after each write (see
        :mod:`memroute.stores.pg_indexer`); without it only :meth:`index_pending` and a writer past
        ``pending_rows`` pending rows do. ``pending_rows`` bounds the rows waiting outside the graph (vector
        search scans an owner's pending rows exactly: fewer keep searches faster during a large import, more
        let a larger burst be written at the store's own rate; docs/benchmarks.md)."""
        super().__init__(url, pending_rows)
        self._indexer = PendingIndexer(url, self.conninfo, self.schema) if index_in_background else None
        with translate_errors("connect", url):
            # migrate on one connection first: the pool's connections need the vector type to exist
            with psycopg.connect(self.conninfo, connect_timeout=int(connect_timeout_s)) as conn:
                if not run_op(conn, self.op_is_current()):
                    run_op(conn, self.op_migrate())
            self._pool = ConnectionPool(self.conninfo, min_size=min_connections, max_size=max_connections,
                                        open=False, check=ConnectionPool.check_connection, timeout=connect_timeout_s,
                                        configure=self._configure, kwargs={"connect_timeout": int(connect_timeout_s)})
            self._pool.open(wait=True, timeout=connect_timeout_s)
        try:
            self._run("read settings", self.op_read_model())
            if self._run("count pending memories", self.op_count_pending()) and self._indexer is not None:
                self._indexer.wake()  # left by a process that stopped before it moved them
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------------------------- plumbing
    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        register_vector(conn)
        with conn.transaction():
            conn.execute(UTC_SESSION_SQL)
            if self.schema is not None:
                conn.execute(search_path_sql(self.schema, local=False))

    def _run(self, what: str, op: Op[T]) -> T:
        """One operation in one transaction on a pooled connection (none is taken if it runs no statement)."""
        step = resume(op)
        if isinstance(step, Done):
            return step.value
        with translate_errors(what, self.url), self._pool.connection() as conn:
            return run_op(conn, op, step)

    # ----------------------------------------------------------------------------------- the model
    def bind_model(self, model_id: str, dimension: int) -> None:
        self._run("record the embedding model", self.op_bind_model(model_id, dimension))
        self.check_model(model_id, dimension)

    # ------------------------------------------------------------------------------------ memories
    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        self.write_batch(records)

    def write_batch(self, records: Sequence[MemoryRecord], messages: Sequence[Message] = (),
                    state: StateEntry | None = None) -> None:
        self._run("store memories", self.op_write_batch(records, messages, state))
        if not records:
            return
        if self._indexer is not None:
            self._indexer.wake()
        if self.pending_may_exceed(len(records)):
            while self._run("index pending memories", self.op_index_excess()):
                pass  # the writer waits for the graph: pending rows stay bounded
        if self.wrote(records):
            self._run("refresh statistics", self.op_analyze())
        self._fold_blocks(len(records))

    def index_pending(self, limit: int | None = None) -> int:
        """Move pending memories (written, searchable by an exact scan, not yet in the HNSW graph) into the
        graph now, up to ``limit`` (all by default), ``INDEX_ROWS`` a transaction; returns how many were moved.
        The store's background indexer does this after every write; this is for a caller that wants it done."""
        moved = 0
        while limit is None or moved < limit:
            step = INDEX_ROWS if limit is None else min(INDEX_ROWS, limit - moved)
            done = self._run("index pending memories", self.op_index_pending(step))
            moved += done
            if done < step:
                break
        self._pending = 0
        return moved

    def pending(self) -> int:
        """How many memories are pending (not yet in the HNSW graph)."""
        return self._run("count pending memories", self.op_pending(2**62))

    def bulk_load(self, records: Iterable[MemoryRecord], rebuild_indexes: bool = False,
                  progress: Callable[[int], Any] | None = None,
                  state: tuple[str, str, dict[str, Any]] | None = None, analyze: bool = True) -> int:
        """Write many memories at once: binary COPY into a staging table, merged by (owner, id) batch by batch.

        One transaction: all of it or nothing. With ``rebuild_indexes`` the HNSW and GIN indexes are dropped
        first and built again after the load, which is far faster than growing them row by row when the
        load is large next to what the table holds; until the load commits, other sessions wait for the
        table. The build uses the server's ``maintenance_work_mem`` and ``max_parallel_maintenance_workers``
        (docs/postgres.md). ``progress`` is called with the number of rows of each batch written. ``state``
        (namespace, key, value) is saved in the same transaction (``memroute copy`` records how far it got);
        ``analyze=False`` leaves the planner statistics to the caller (a load in many pieces).
        Returns the number of records written.
        """
        dim = self._dimension()
        total = 0
        with translate_errors("bulk load memories", self.url), self._pool.connection() as conn, conn.transaction():
            if rebuild_indexes:
                conn.execute(DROP_INDEXES_SQL)
            conn.execute(STAGING_DDL.format(dim=dim))
            it = iter(records)
            while batch := list(islice(it, LOAD_BATCH)):
                unique = list({(r.memory.owner, r.memory.id): r for r in batch}.values())  # the last one wins
                with conn.cursor() as cur, cur.copy(
                        f"COPY memroute_load ({LOAD_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(LOAD_TYPES)
                    for row in record_rows(unique, dim):
                        copy.write_row(row)
                conn.execute(MERGE_SQL)
                run_op(conn, self.op_write_tokens(token_rows(unique)))
                conn.execute("TRUNCATE memroute_load")
                total += len(batch)
                if progress is not None:
                    progress(len(batch))
            if rebuild_indexes:
                run_op(conn, self.op_create_search_indexes())
            elif run_op(conn, self.op_merge_blocks()):
                run_op(conn, self.op_build_blocks())
            if state is not None:
                run_op(conn, self.op_put_state(state[0], state[1], state[2], ""))
            if analyze and not rebuild_indexes:  # building the indexes analyzed the tables already
                conn.execute(ANALYZE_SQL)
        self._cache.clear()
        self._written_since_analyze = 0
        return total

    def drop_search_indexes(self) -> None:
        """Drop the HNSW and GIN indexes before a large load in many transactions (``memroute copy`` into an
        empty store); :meth:`create_search_indexes` builds them again. Searches stay correct meanwhile, but
        scan the table."""
        self._run("drop the search indexes", self.op_drop_search_indexes())

    def create_search_indexes(self) -> None:
        """Build whichever search indexes are missing, and refresh the planner's statistics."""
        self._run("build the search indexes", self.op_create_search_indexes())
        self._cache.clear()

    def get(self, ids: Sequence[str], owner: str) -> list[MemoryItem]:
        return self._run("get memories", self.op_get(ids, owner))

    def get_vectors(self, ids: Sequence[str], owner: str) -> dict[str, npt.NDArray[np.float32]]:
        return self._run("get vectors", self.op_get_vectors(ids, owner))

    def get_token_vectors(self, ids: Sequence[str], owner: str, dimension: int) -> dict[str, TokenVectors]:
        return self._run("get token vectors", self.op_get_token_vectors(ids, owner, dimension))

    def token_df(self, token_ids: Sequence[int], owner: str) -> tuple[int, dict[int, int]]:
        return self._run("read token frequencies", self.op_token_df(token_ids, owner))

    def _fold_blocks(self, changed: int) -> None:
        """Count ``changed`` rows written or deleted; once this process has changed ``MERGE_ROWS`` of them, fold the
        changed rows into the BM25 blocks (:meth:`PgOperations.op_merge_blocks`); past ``DEAD_ROWS`` deleted rows
        listed, the background indexer's thread rebuilds them (18-52 s at 1M; here, without that thread)."""
        if self.blocks_lag(changed) and self._run("fold changed memories into the BM25 blocks",
                                                  self.op_merge_blocks()):
            if self._indexer is not None:
                self._indexer.rebuild_blocks()  # the write returns; writes and searches go on meanwhile
            else:
                self._run("rebuild the BM25 blocks", self.op_build_blocks())

    def delete(self, ids: Sequence[str], owner: str) -> int:
        deleted = self._run("delete memories", self.op_delete(ids, owner))
        self._fold_blocks(deleted)
        return deleted

    def delete_where(self, owner: str, session_id: str | None = None) -> int:
        deleted = self._run("forget", self.op_delete_where(owner, session_id))
        self._fold_blocks(deleted)
        return deleted

    def list_memories(self, flt: SearchFilter, limit: int = 100, offset: int = 0) -> list[MemoryItem]:
        return self._run("list memories", self.op_list(flt, limit, offset))

    def iter_records(self, batch_size: int = 1000) -> Iterator[MemoryRecord]:
        last = 0
        while True:
            last, page = self._run("read memories", self.op_records_page(last, batch_size))
            if not page:
                return
            yield from page

    def count(self, owner: str | None = None) -> int:
        return self._run("count", self.op_count(owner))

    # -------------------------------------------------------------------------------------- search
    def search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                    weights: tuple[float, float] = (1.0, 0.0)) -> list[ScoredId]:
        return self._run("BM25 search", self.op_search_bm25(tokens, flt, limit, weights))

    def search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter, limit: int,
                      exact: bool | None = None) -> list[ScoredId]:
        """Cosine KNN: exact for owners of at most ``EXACT_ROWS`` memories, else HNSW; ``exact`` forces one."""
        return self._run("vector search", self.op_search_vector(vector, flt, limit, exact))

    def search_time(self, flt: SearchFilter, limit: int) -> list[ScoredId]:
        return self._run("time search", self.op_search_time(flt, limit))

    # ---------------------------------------------------------------------------- conversation log
    def add_messages(self, messages: Sequence[Message]) -> None:
        self._run("append messages", self.op_add_messages(messages))

    def recent_messages(self, session_id: str, owner: str, limit: int = 20) -> list[Message]:
        return self._run("read messages", self.op_recent_messages(session_id, owner, limit))

    def iter_messages(self, batch_size: int = 1000) -> Iterator[Message]:
        last = 0
        while True:
            last, page = self._run("read messages", self.op_messages_page(last, batch_size))
            if not page:
                return
            yield from page

    # --------------------------------------------------------------------------------- named state
    def put_state(self, namespace: str, key: str, value: dict[str, Any], owner: str = "") -> None:
        self._run("save state", self.op_put_state(namespace, key, value, owner))

    def get_state(self, namespace: str, key: str, owner: str = "") -> dict[str, Any] | None:
        return self._run("read state", self.op_get_state(namespace, key, owner))

    def list_state(self, namespace: str, owner: str = "") -> list[tuple[str, dict[str, Any]]]:
        return self._run("read state", self.op_list_state(namespace, owner))

    def iter_state(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        yield from self._run("read state", self.op_all_state())

    # ----------------------------------------------------------------------------------- lifecycle
    def stats(self) -> StoreStats:
        return self._run("stats", self.op_stats())

    def close(self) -> None:
        if self._indexer is not None:
            self._indexer.close()
        self._pool.close()
