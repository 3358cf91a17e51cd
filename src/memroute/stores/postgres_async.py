"""The PostgreSQL store for asyncio: :class:`memroute.stores.base.AsyncStore` on ``psycopg_pool.AsyncConnectionPool``.

The same schema, migrations, SQL and scoring as :mod:`memroute.stores.postgres`: every operation is the
generator of :mod:`memroute.stores.pg_ops`, whose statements are awaited here on an asyncio connection, one
operation per transaction. Nothing blocks the event loop but the operations' own arithmetic between
statements (building rows, BM25 scoring of the memories a search meets): well under a millisecond to a
few milliseconds. ``AsyncPostgresStore.open(url)`` migrates and fills the pool; ``close()`` empties it.
A connection the server dropped fails the request it was serving (``StoreError``); the pool checks
connections when they are taken, so the next request gets a new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.embed.tokens import TokenVectors
from memroute.errors import DependencyError, StoreError
from memroute.stores.base import MemoryRecord, StateEntry, StoreStats
from memroute.stores.pg_indexer import PendingIndexer
from memroute.stores.pg_ops import Batch, Done, Many, Op, PgOperations, Step, T, resume
from memroute.stores.pg_sql import (
    INDEX_ROWS,
    PENDING_ROWS,
    UTC_SESSION_SQL,
    safe_url,
    search_path_sql,
    translate_errors,
)
from memroute.types import MemoryItem, Message, ScoredId, SearchFilter

try:
    import psycopg
    from pgvector.psycopg import register_vector_async
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise DependencyError("the PostgreSQL store needs: pip install 'memroute[postgres]'") from exc


async def execute(conn: psycopg.AsyncConnection[Any], step: Step) -> Any:
    if isinstance(step, Many):
        async with conn.cursor() as cur:
            await cur.executemany(step.query, step.rows)
        return None
    if isinstance(step, Batch):
        async with conn.pipeline() as pipeline:
            cursors = [await conn.cursor(binary=sql.binary).execute(sql.query, sql.params) for sql in step.steps]
            await pipeline.sync()
            return [await cur.fetchall() if cur.description is not None else cur.rowcount for cur in cursors]
    cur = await conn.execute(step.query, step.params, binary=step.binary)
    return await cur.fetchall() if cur.description is not None else cur.rowcount


async def run_op(conn: psycopg.AsyncConnection[Any], op: Op[T], step: Step | Done[T] | None = None) -> T:
    """Run an operation (from ``step``, its first statement, if already taken) on ``conn`` in one transaction."""
    async with conn.transaction():
        step = resume(op) if step is None else step
        while not isinstance(step, Done):
            try:
                value = await execute(conn, step)
            except psycopg.Error as exc:
                step = resume(op, error=exc)  # the operation may explain it better
                continue
            step = resume(op, value)
        return step.value


class AsyncPostgresStore(PgOperations):
    """An :class:`memroute.stores.base.AsyncStore` on PostgreSQL with pgvector; create it with :meth:`open`."""

    def __init__(self, url: str, index_in_background: bool = True, pending_rows: int = PENDING_ROWS) -> None:
        super().__init__(url, pending_rows)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._indexer = PendingIndexer(url, self.conninfo, self.schema) if index_in_background else None

    @classmethod
    async def open(cls, url: str, min_connections: int = 1, max_connections: int = 8,
                   connect_timeout_s: float = 10.0, index_in_background: bool = True,
                   pending_rows: int = PENDING_ROWS) -> AsyncPostgresStore:
        """Migrate and fill the pool. ``index_in_background`` and ``pending_rows``: as
        :class:`memroute.stores.postgres.PostgresStore`'s."""
        store = cls(url, index_in_background, pending_rows)
        await store._open(min_connections, max_connections, connect_timeout_s)
        return store

    async def _open(self, min_connections: int, max_connections: int, timeout_s: float) -> None:
        with translate_errors("connect", self.url):
            # migrate on one connection first: the pool's connections need the vector type to exist
            async with await psycopg.AsyncConnection.connect(self.conninfo, connect_timeout=int(timeout_s)) as conn:
                if not await run_op(conn, self.op_is_current()):
                    await run_op(conn, self.op_migrate())
            pool = AsyncConnectionPool(self.conninfo, min_size=min_connections, max_size=max_connections, open=False,
                                       check=AsyncConnectionPool.check_connection, timeout=timeout_s,
                                       configure=self._configure, kwargs={"connect_timeout": int(timeout_s)})
            await pool.open(wait=True, timeout=timeout_s)
        self._pool = pool
        try:
            await self._run("read settings", self.op_read_model())
            if await self._run("count pending memories", self.op_count_pending()) and self._indexer is not None:
                self._indexer.wake()  # left by a process that stopped before it moved them
        except BaseException:
            await self.close()
            raise

    async def _configure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await register_vector_async(conn)
        async with conn.transaction():
            await conn.execute(UTC_SESSION_SQL)
            if self.schema is not None:
                await conn.execute(search_path_sql(self.schema, local=False))

    async def _run(self, what: str, op: Op[T]) -> T:
        """One operation in one transaction on a pooled connection (none is taken if it runs no statement)."""
        step = resume(op)
        if isinstance(step, Done):
            return step.value
        if self._pool is None:
            raise StoreError(f"{what}: the store {safe_url(self.url)} is closed (or was not opened with "
                             "AsyncPostgresStore.open)")
        with translate_errors(what, self.url):
            async with self._pool.connection() as conn:
                return await run_op(conn, op, step)

    # ----------------------------------------------------------------------------------- the model
    async def bind_model(self, model_id: str, dimension: int) -> None:
        await self._run("record the embedding model", self.op_bind_model(model_id, dimension))
        self.check_model(model_id, dimension)

    # ------------------------------------------------------------------------------------ memories
    async def upsert(self, records: Sequence[MemoryRecord]) -> None:
        await self.write_batch(records)

    async def write_batch(self, records: Sequence[MemoryRecord], messages: Sequence[Message] = (),
                          state: StateEntry | None = None) -> None:
        await self._run("store memories", self.op_write_batch(records, messages, state))
        if not records:
            return
        if self._indexer is not None:
            self._indexer.wake()
        if self.pending_may_exceed(len(records)):
            while await self._run("index pending memories", self.op_index_excess()):
                pass  # the writer waits for the graph: pending rows stay bounded
        if self.wrote(records):
            await self._run("refresh statistics", self.op_analyze())
        await self._fold_blocks(len(records))

    async def index_pending(self, limit: int | None = None) -> int:
        """As :meth:`memroute.stores.postgres.PostgresStore.index_pending`."""
        moved = 0
        while limit is None or moved < limit:
            step = INDEX_ROWS if limit is None else min(INDEX_ROWS, limit - moved)
            done = await self._run("index pending memories", self.op_index_pending(step))
            moved += done
            if done < step:
                break
        self._pending = 0
        return moved

    async def pending(self) -> int:
        """How many memories are pending (not yet in the HNSW graph)."""
        return await self._run("count pending memories", self.op_pending(2**62))

    async def get(self, ids: Sequence[str], owner: str) -> list[MemoryItem]:
        return await self._run("get memories", self.op_get(ids, owner))

    async def get_vectors(self, ids: Sequence[str], owner: str) -> dict[str, npt.NDArray[np.float32]]:
        return await self._run("get vectors", self.op_get_vectors(ids, owner))

    async def get_token_vectors(self, ids: Sequence[str], owner: str, dimension: int) -> dict[str, TokenVectors]:
        return await self._run("get token vectors", self.op_get_token_vectors(ids, owner, dimension))

    async def token_df(self, token_ids: Sequence[int], owner: str) -> tuple[int, dict[int, int]]:
        return await self._run("read token frequencies", self.op_token_df(token_ids, owner))

    async def _fold_blocks(self, changed: int) -> None:
        """As :meth:`memroute.stores.postgres.PostgresStore._fold_blocks`."""
        if self.blocks_lag(changed) and await self._run("fold changed memories into the BM25 blocks",
                                                        self.op_merge_blocks()):
            if self._indexer is not None:
                self._indexer.rebuild_blocks()
            else:
                await self._run("rebuild the BM25 blocks", self.op_build_blocks())

    async def delete(self, ids: Sequence[str], owner: str) -> int:
        deleted = await self._run("delete memories", self.op_delete(ids, owner))
        await self._fold_blocks(deleted)
        return deleted

    async def delete_where(self, owner: str, session_id: str | None = None) -> int:
        deleted = await self._run("forget", self.op_delete_where(owner, session_id))
        await self._fold_blocks(deleted)
        return deleted

    async def list_memories(self, flt: SearchFilter, limit: int = 100, offset: int = 0) -> list[MemoryItem]:
        return await self._run("list memories", self.op_list(flt, limit, offset))

    async def iter_records(self, batch_size: int = 1000) -> AsyncIterator[MemoryRecord]:
        last = 0
        while True:
            last, page = await self._run("read memories", self.op_records_page(last, batch_size))
            if not page:
                return
            for rec in page:
                yield rec

    async def count(self, owner: str | None = None) -> int:
        return await self._run("count", self.op_count(owner))

    # -------------------------------------------------------------------------------------- search
    async def search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                          weights: tuple[float, float] = (1.0, 0.0)) -> list[ScoredId]:
        return await self._run("BM25 search", self.op_search_bm25(tokens, flt, limit, weights))

    async def search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter, limit: int,
                            exact: bool | None = None) -> list[ScoredId]:
        """Cosine KNN: exact for owners of at most ``EXACT_ROWS`` memories, else HNSW; ``exact`` forces one."""
        return await self._run("vector search", self.op_search_vector(vector, flt, limit, exact))

    async def search_time(self, flt: SearchFilter, limit: int) -> list[ScoredId]:
        return await self._run("time search", self.op_search_time(flt, limit))

    # ---------------------------------------------------------------------------- conversation log
    async def add_messages(self, messages: Sequence[Message]) -> None:
        await self._run("append messages", self.op_add_messages(messages))

    async def recent_messages(self, session_id: str, owner: str, limit: int = 20) -> list[Message]:
        return await self._run("read messages", self.op_recent_messages(session_id, owner, limit))

    async def iter_messages(self, batch_size: int = 1000) -> AsyncIterator[Message]:
        last = 0
        while True:
            last, page = await self._run("read messages", self.op_messages_page(last, batch_size))
            if not page:
                return
            for msg in page:
                yield msg

    # --------------------------------------------------------------------------------- named state
    async def put_state(self, namespace: str, key: str, value: dict[str, Any], owner: str = "") -> None:
        await self._run("save state", self.op_put_state(namespace, key, value, owner))

    async def get_state(self, namespace: str, key: str, owner: str = "") -> dict[str, Any] | None:
        return await self._run("read state", self.op_get_state(namespace, key, owner))

    async def list_state(self, namespace: str, owner: str = "") -> list[tuple[str, dict[str, Any]]]:
        return await self._run("read state", self.op_list_state(namespace, owner))

    async def iter_state(self) -> AsyncIterator[tuple[str, str, str, dict[str, Any]]]:
        for entry in await self._run("read state", self.op_all_state()):
            yield entry

    # ----------------------------------------------------------------------------------- lifecycle
    async def stats(self) -> StoreStats:
        return await self._run("stats", self.op_stats())

    async def close(self) -> None:
        if self._indexer is not None:
            await asyncio.to_thread(self._indexer.close)
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
