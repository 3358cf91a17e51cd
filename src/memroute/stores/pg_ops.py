"""Every PostgreSQL store operation, written once for the sync and the async store.

An operation is a generator that yields the statements to run (:class:`Sql`, :class:`Many`, :class:`Batch`)
and receives their results; it returns the operation's answer. :class:`memroute.stores.postgres.PostgresStore`
runs it on a connection of a ``ConnectionPool``, :class:`memroute.stores.postgres_async.AsyncPostgresStore`
awaits each statement on an ``AsyncConnectionPool``; both run one operation in one transaction, so a
memory and its index entries change together. A psycopg error is thrown into the operation at the ``yield``
(so it may turn it into a clearer one); what the operation computes between statements (record rows, BM25
scores) is the same code on both stores.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from memroute.embed.tokens import TokenVectors
from memroute.errors import DependencyError, SchemaVersionError, StoreError
from memroute.stores import token_blobs
from memroute.stores.base import MemoryRecord, StateEntry, StoreStats, checked_vector
from memroute.stores.migrations.postgres import MIGRATIONS
from memroute.stores.pg_bm25 import (
    AVGDL_SQL,
    BLOCKS_LOCK_ID,
    BLOCKS_SQL,
    BUILD_BLOCKS_SQL,
    CHANGED_ROWS,
    CHANGED_SQL,
    DEAD_ROWS,
    DEAD_SQL,
    DEFAULT_AVGDL,
    MERGE_BLOCKS_SQL,
    MERGE_ROWS,
    POSTINGS_SQL,
    REFERENCE_SQL,
    REFRESH_SQL,
    SNAPSHOT_SQL,
    BlockBounds,
    ImpactSearch,
    bounds_sql,
    changed_rows_sql,
    lexical_rows_sql,
    needs_refresh,
    search_lists,
)
from memroute.stores.pg_sql import (
    ADD_MESSAGES_SQL,
    ALL_STATE_SQL,
    ANALYZE_SQL,
    COLUMNS,
    DELETE_LOCK_SQL,
    DELETE_SQL,
    DF_POSTINGS_SQL,
    DF_SQL,
    DROP_INDEXES_SQL,
    EXACT_ROWS,
    GET_SQL,
    GET_STATE_SQL,
    INDEX_ALL_SQL,
    INDEX_PENDING_SQL,
    INDEX_ROWS,
    LIST_STATE_SQL,
    LOCK_ID,
    MESSAGES_PAGE_SQL,
    META_SQL,
    MOVE_LOCK,
    MOVE_LOCK_SQL,
    OWNER_ROWS_SQL,
    PENDING_ROWS,
    PENDING_SQL,
    PUT_STATE_SQL,
    RECENT_MESSAGES_SQL,
    RECORDS_PAGE_SQL,
    SEARCH_INDEXES,
    SIZE_SQL,
    SKIP_SCAN_VERSION,
    STATS_SQL,
    TOKEN_DF_SQL,
    TOKENS_INSERT_SQL,
    TOKENS_SQL,
    UPSERT_ROWS,
    UPSERT_SQL,
    VECTORS_SQL,
    VERSION_SQL,
    SearchCache,
    array,
    batch_params,
    bm25_scores,
    bm25_terms,
    memory_of,
    message_of,
    model_mismatch,
    record_of,
    record_rows,
    safe_url,
    schema_ddl,
    search_path_sql,
    split_schema,
    token_rows,
    tsquery,
    vector_query,
    vector_settings,
    where_clause,
)
from memroute.times import checked_time
from memroute.types import MemoryItem, Message, ScoredId, SearchFilter

try:
    from psycopg import errors as pg_errors
    from psycopg.types.json import Jsonb
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise DependencyError("the PostgreSQL store needs: pip install 'memroute[postgres]'") from exc

T = TypeVar("T")
log = logging.getLogger("memroute.store")


@dataclass(frozen=True, slots=True)
class Sql:
    """One statement; its result is ``fetchall()`` when it returns rows, else the row count."""

    query: Any  # str or psycopg.sql.Composed
    params: Sequence[Any] | None = None
    binary: bool = False
    """Results in PostgreSQL's binary format (``bytea`` as raw bytes, not hex)."""


@dataclass(frozen=True, slots=True)
class Many:
    """``executemany``; its result is None. A statement per row: writes of many rows pass arrays instead."""

    query: str
    rows: Sequence[Sequence[Any]]


@dataclass(frozen=True, slots=True)
class Batch:
    """Several statements sent together and answered in one round trip (psycopg's pipeline mode); the result
    is each statement's result as :class:`Sql` gives it. For statements that do not depend on each other's
    results: a search's first reads (each round trip is a wake-up of the server and of the client, which on
    a loaded machine is a wait for a core)."""

    steps: Sequence[Sql]


Step = Sql | Many | Batch
Op = Generator[Step, Any, T]


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """An operation's answer."""

    value: T


def resume(op: Op[T], value: Any = None, error: BaseException | None = None) -> Step | Done[T]:
    """The operation's next statement, or its answer: send it the last result, or throw the last error in."""
    try:
        return op.throw(error) if error is not None else op.send(value)
    except StopIteration as stop:
        return Done(stop.value)


class PgOperations:
    """The state (embedding model, search cache) and the operations both PostgreSQL stores share."""

    def __init__(self, url: str, pending_rows: int = PENDING_ROWS) -> None:
        self.url = url
        self.pending_rows = int(pending_rows)
        """The most pending rows a write leaves (:data:`memroute.stores.pg_sql.PENDING_ROWS`)."""
        self.conninfo, self.schema = split_schema(url)
        self._model: tuple[str, int] | None = None
        self._cache = SearchCache()
        self._written_since_analyze = 0
        self._pending = 0  # rows this process wrote as pending since it last counted them
        self._unmerged = 0  # rows this process wrote or deleted since it last folded them into the BM25 blocks
        self._df_from_postings = False  # document frequencies counted from the postings (PostgreSQL 18+)

    # ---------------------------------------------------------------------------------- migrations
    def op_is_current(self) -> Op[bool]:
        """Whether the schema is there and current, read without writing (so replicas can be opened)."""
        latest = MIGRATIONS[-1][0]
        if self.schema is not None:
            yield Sql(search_path_sql(self.schema, local=True))
        row = yield Sql("SELECT to_regclass('memroute_meta') IS NOT NULL AND EXISTS (SELECT FROM pg_extension "
                        "WHERE extname = 'vector')")
        if not row[0][0]:
            return False
        found = yield Sql(VERSION_SQL)
        version = int(found[0][0]) if found else 0
        self._check_version(version, latest)
        return version == latest

    def op_migrate(self) -> Op[None]:
        """Apply the missing migrations under the advisory lock (replicas opening at once wait for it)."""
        latest = MIGRATIONS[-1][0]
        yield Sql("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))
        try:
            yield Sql("SAVEPOINT ext")
            yield Sql("CREATE EXTENSION IF NOT EXISTS vector")
        except (pg_errors.FeatureNotSupported, pg_errors.UndefinedFile, pg_errors.InsufficientPrivilege,
                pg_errors.UndefinedObject) as exc:
            raise StoreError(
                f"the database at {safe_url(self.url)} has no pgvector extension ({str(exc).strip()}): install "
                "pgvector on the server and run CREATE EXTENSION vector; as a superuser (on managed services: "
                "enable the 'vector' extension in the console)") from exc
        if self.schema is not None:
            yield Sql(schema_ddl(self.schema))
            yield Sql(search_path_sql(self.schema, local=True))
        yield Sql("CREATE TABLE IF NOT EXISTS memroute_meta (key text PRIMARY KEY, value text NOT NULL)")
        row = yield Sql(VERSION_SQL)
        version = int(row[0][0]) if row else 0
        self._check_version(version, latest)
        for number, _name, migration in MIGRATIONS:
            if number > version:
                if isinstance(migration, str):
                    yield Sql(migration)
                else:
                    yield from migration()
                yield Sql("INSERT INTO memroute_meta (key, value) VALUES ('schema_version', %s) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(number),))

    def _check_version(self, version: int, latest: int) -> None:
        if version > latest:
            raise SchemaVersionError(f"{safe_url(self.url)} has schema version {version}, newer than this "
                                     f"memroute knows ({latest}); upgrade memroute")

    # ----------------------------------------------------------------------------------- the model
    def op_read_model(self) -> Op[None]:
        version = int((yield Sql("SELECT current_setting('server_version_num')::int"))[0][0])
        self._df_from_postings = version >= SKIP_SCAN_VERSION
        meta = dict((yield Sql(META_SQL)))
        if "model_id" in meta:
            self._model = (meta["model_id"], int(meta["dimension"]))

    def op_bind_model(self, model_id: str, dimension: int) -> Op[None]:
        """Record the model on first use (the vector column gets its dimension and its HNSW index)."""
        if self._model is not None:
            return
        yield Sql("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))
        meta = dict((yield Sql(META_SQL)))
        if "model_id" in meta:
            self._model = (meta["model_id"], int(meta["dimension"]))
            return
        dim = int(dimension)
        # a new type resets the column's storage to the type's default (TOASTed): keep it inline
        yield Sql(f"ALTER TABLE memroute_memories ALTER COLUMN embedding TYPE vector({dim}), "
                  "ALTER COLUMN embedding SET STORAGE MAIN")
        self._cache.clear()
        name, table, method = SEARCH_INDEXES[0]
        yield Sql(f"CREATE INDEX IF NOT EXISTS {name} ON {table} {method}")
        yield Sql("INSERT INTO memroute_meta (key, value) VALUES ('model_id', %s), ('dimension', %s)",
                  (model_id, str(dim)))
        self._model = (model_id, dim)

    def check_model(self, model_id: str, dimension: int) -> None:
        assert self._model is not None
        if self._model != (model_id, dimension):
            raise model_mismatch(self.url, self._model, model_id, dimension)

    def _dimension(self) -> int:
        if self._model is None:
            raise StoreError(f"{safe_url(self.url)} has no embedding model yet; call bind_model first")
        return self._model[1]

    # ------------------------------------------------------------------------------------ memories
    def op_upsert(self, records: Sequence[MemoryRecord]) -> Op[int]:
        if not records:
            return 0
        # one statement for a batch (of up to UPSERT_ROWS): a statement per row costs an execution each
        rows = record_rows(records, self._dimension())
        tokens = token_rows(records)  # checked before anything is written
        for start in range(0, len(rows), UPSERT_ROWS):
            yield Sql(UPSERT_SQL, batch_params(rows[start:start + UPSERT_ROWS]))
        yield from self.op_write_tokens(tokens)
        return len(records)

    def op_write_tokens(self, tokens: list[list[Any]]) -> Op[None]:
        """Insert the token vectors of memories just written (:func:`token_rows`' parameters; a memory written again
        lost its old ones in the write, by migration 10's trigger)."""
        if tokens:
            yield Sql(TOKENS_INSERT_SQL, tokens)

    def op_write_batch(self, records: Sequence[MemoryRecord], messages: Sequence[Message],
                       state: StateEntry | None) -> Op[int]:
        """Memories, messages and a piece of state in one operation (so one transaction)."""
        written = yield from self.op_upsert(records)
        yield from self.op_add_messages(messages)
        if state is not None:
            yield from self.op_put_state(state.namespace, state.key, state.value, state.owner)
        return written

    def wrote(self, records: Sequence[MemoryRecord]) -> bool:
        """Count a committed write; True when the planner's statistics should be refreshed now.

        With stale statistics PostgreSQL takes an owner with thousands of rows for a handful and sorts all of
        them instead of walking the HNSW graph (27 ms instead of ~1 ms at 5k rows, measured): ANALYZE after
        every tenth of the table (at least 1,000 rows) is written, before autovacuum gets to it.
        """
        self._cache.wrote(records)
        self._written_since_analyze += len(records)
        docs = self._cache.stats[1] if self._cache.stats else 0
        if self._written_since_analyze < max(1000, docs // 10):
            return False
        self._written_since_analyze = 0
        self._cache.stats = None
        return True

    def pending_may_exceed(self, written: int) -> bool:
        """Count a committed write's rows as pending; True when there may be more than ``pending_rows`` (the
        count is this process's: other writers' rows and the indexer's moves are seen by :meth:`op_index_excess`)."""
        self._pending += written
        return self._pending > self.pending_rows

    def op_index_excess(self) -> Op[int]:
        """Move up to ``INDEX_ROWS`` of the pending rows beyond ``pending_rows`` into the HNSW graph; how many."""
        pending = int((yield Sql(PENDING_SQL, (self.pending_rows + INDEX_ROWS,)))[0][0])
        excess = min(pending - self.pending_rows, INDEX_ROWS)
        self._pending = pending
        if excess <= 0:
            return 0
        yield Sql(MOVE_LOCK_SQL, (MOVE_LOCK,))
        moved = int((yield Sql(INDEX_PENDING_SQL, (excess,))))
        self._pending -= moved
        return moved

    def blocks_lag(self, changed: int) -> bool:
        """Count rows written or deleted; True when this process should fold the changed rows into the BM25
        blocks now (:meth:`op_merge_blocks`)."""
        self._unmerged += changed
        if self._unmerged < MERGE_ROWS:
            return False
        self._unmerged = 0
        return True

    def op_merge_blocks(self) -> Op[bool]:
        """Fold the rows changed since the BM25 blocks were built into new blocks; True instead when
        ``DEAD_ROWS`` deleted rows are listed: the blocks are then to be rebuilt from the postings, in a
        transaction of its own (:meth:`op_build_blocks`; :mod:`memroute.stores.pg_bm25`)."""
        try_lock, lock, merge = MERGE_BLOCKS_SQL
        if not (yield Sql(try_lock, (BLOCKS_LOCK_ID,)))[0][0]:
            return False  # another process is at it
        if int((yield Sql(DEAD_SQL))[0][0]) > DEAD_ROWS:
            return True  # the rebuild takes every changed row: no merge (and no merge's lock held meanwhile)
        yield Sql(lock)
        yield Sql(merge)
        return False

    def op_build_blocks(self) -> Op[None]:
        """Rebuild every BM25 block from the postings (writers wait only for its last statement)."""
        lock, *rest = BUILD_BLOCKS_SQL
        yield Sql(lock, (BLOCKS_LOCK_ID,))
        for statement in rest:
            yield Sql(statement)

    def op_count_pending(self) -> Op[int]:
        """Count the pending rows (up to just past ``pending_rows``) as this process's starting point."""
        self._pending = int((yield Sql(PENDING_SQL, (self.pending_rows + 1,)))[0][0])
        return self._pending

    def op_index_pending(self, limit: int) -> Op[int]:
        """Move up to ``limit`` pending rows into the HNSW graph; how many were moved."""
        yield Sql(MOVE_LOCK_SQL, (MOVE_LOCK,))
        return int((yield Sql(INDEX_PENDING_SQL, (int(limit),))))

    def op_pending(self, limit: int) -> Op[int]:
        """The number of pending rows, counted up to ``limit``."""
        return int((yield Sql(PENDING_SQL, (int(limit),)))[0][0])

    def op_analyze(self) -> Op[None]:
        yield Sql(ANALYZE_SQL)

    def op_drop_search_indexes(self) -> Op[None]:
        yield Sql(DROP_INDEXES_SQL)

    def op_create_search_indexes(self) -> Op[None]:
        if not (yield from self.op_refresh_postings()):
            yield from self.op_build_blocks()
        graph = SEARCH_INDEXES[0][0]
        if (yield Sql("SELECT to_regclass(%s) IS NULL", (graph,)))[0][0]:
            yield Sql(INDEX_ALL_SQL)  # no graph to insert into: the build below takes them all at once
        for name, table, method in SEARCH_INDEXES:
            yield Sql(f"CREATE INDEX IF NOT EXISTS {name} ON {table} {method}")
        yield Sql(ANALYZE_SQL)

    def op_refresh_postings(self, force: bool = False) -> Op[bool]:
        """Recompute the BM25 impacts if the average length moved by more than ``DRIFT`` from theirs (searches
        are exact either way; they read less after it); True if it did."""
        (now, reference), = yield Sql(AVGDL_SQL, (DEFAULT_AVGDL,))
        if not force and not needs_refresh(float(now), reference):
            return False
        truncate, set_reference, fill = REFRESH_SQL
        yield Sql(truncate)
        yield Sql(set_reference, (repr(float(now)),))
        yield Sql(fill)
        yield from self.op_build_blocks()
        return True

    def op_get(self, ids: Sequence[str], owner: str) -> Op[list[MemoryItem]]:
        if not ids:
            return []
        rows = yield Sql(GET_SQL, (owner, list(ids)))
        found = {r[1]: memory_of(r) for r in rows}
        return [found[i] for i in ids if i in found]

    def op_get_vectors(self, ids: Sequence[str], owner: str) -> Op[dict[str, npt.NDArray[np.float32]]]:
        if not ids:
            return {}
        rows = yield Sql(VECTORS_SQL, (owner, list(ids)))
        return {mid: array(vec) for mid, vec in rows}

    def op_get_token_vectors(self, ids: Sequence[str], owner: str, dimension: int) -> Op[dict[str, TokenVectors]]:
        if not ids:
            return {}
        rows = [(mid, tids, bytes(codes), bytes(scales)) for mid, tids, codes, scales in
                (yield Sql(TOKENS_SQL, (owner, list(ids))))]

        def refused(mid: str, exc: token_blobs.BadTokenBlob) -> None:
            log.warning("%s: memory %r of owner %r: token vectors not used: %s", safe_url(self.url), mid, owner, exc)

        return token_blobs.decoded_rows(rows, dimension, refused)

    def op_token_df(self, token_ids: Sequence[int], owner: str) -> Op[tuple[int, dict[int, int]]]:
        wanted = sorted({int(t) for t in token_ids} | {-1})
        found = {int(t): int(df) for t, df in (yield Sql(TOKEN_DF_SQL, (owner, wanted)))}
        return found.pop(-1, 0), found

    def op_delete(self, ids: Sequence[str], owner: str) -> Op[int]:
        if not ids:
            return 0
        yield Sql(DELETE_LOCK_SQL, (MOVE_LOCK,))  # the graph's moves in flight end first, no new one starts
        return int((yield Sql(DELETE_SQL, (owner, list(ids)))))  # lexical rows go with them (ON DELETE CASCADE)

    def op_delete_where(self, owner: str, session_id: str | None) -> Op[int]:
        self._cache.owner_rows.pop(owner, None)
        yield Sql(DELETE_LOCK_SQL, (MOVE_LOCK,))
        if session_id is None:
            yield Sql("DELETE FROM memroute_messages WHERE owner = %s", (owner,))
            yield Sql("DELETE FROM memroute_state WHERE owner = %s", (owner,))
            return int((yield Sql("DELETE FROM memroute_memories WHERE owner = %s", (owner,))))
        yield Sql("DELETE FROM memroute_messages WHERE owner = %s AND session_id = %s", (owner, session_id))
        return int((yield Sql("DELETE FROM memroute_memories WHERE owner = %s AND session_id = %s",
                              (owner, session_id))))

    def op_list(self, flt: SearchFilter, limit: int, offset: int) -> Op[list[MemoryItem]]:
        where, params = where_clause(flt)
        rows = yield Sql(f"SELECT {COLUMNS} FROM memroute_memories m WHERE {where} ORDER BY coalesce(occurred_at, "
                         "created_at) DESC, row_id DESC LIMIT %s OFFSET %s", [*params, int(limit), int(offset)])
        return [memory_of(r) for r in rows]

    def op_records_page(self, after: int, size: int) -> Op[tuple[int, list[MemoryRecord]]]:
        """The next ``size`` records after row ``after``, and the last row read (for the next page)."""
        rows = yield Sql(RECORDS_PAGE_SQL, (after, size))
        return (rows[-1][0] if rows else after), [record_of(r[1:]) for r in rows]

    def op_count(self, owner: str | None) -> Op[int]:
        if owner is None:
            return int((yield Sql("SELECT count(*) FROM memroute_memories"))[0][0])
        return int((yield Sql("SELECT count(*) FROM memroute_memories WHERE owner = %s", (owner,)))[0][0])

    # -------------------------------------------------------------------------------------- search
    def op_search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                       weights: tuple[float, float]) -> Op[list[ScoredId]]:
        """Exact BM25 top ``limit`` from the impact-ordered postings, stopping early (:mod:`.pg_bm25`)."""
        query = bm25_terms(tokens, weights)
        if query is None or limit <= 0:
            return []
        terms, w_own, w_ctx = query
        collection = self._cache.collection()
        missing = self._cache.missing_df(terms)
        where, params = where_clause(flt)
        narrow = flt.session_id is not None or flt.start is not None or flt.end is not None
        # one round trip for everything that does not depend on another read: the snapshot, the statistics and
        # document frequencies not cached (a statement per term, each walking the postings' index on PostgreSQL
        # 18+, else the GIN index: one statement over unnest(terms) made the planner scan the table once per
        # term), the impacts' reference, and without a narrow filter the changed rows and the lists' blocks
        first = [Sql(statement) for statement in SNAPSHOT_SQL]
        if collection is None:
            first.append(Sql(STATS_SQL))
        first += [Sql(DF_POSTINGS_SQL, (t, t)) if self._df_from_postings else Sql(DF_SQL, (tsquery([t]),) * 3)
                  for t in missing]
        first.append(Sql(REFERENCE_SQL))
        if not narrow:  # a narrow filter sums only its own rows' bounds in the server (below)
            lists = search_lists(terms, w_own, w_ctx)
            first += [Sql(CHANGED_SQL, (flt.owner, CHANGED_ROWS + 1)),
                      Sql(changed_rows_sql(where), [flt.owner, CHANGED_ROWS + 1, *params, *(tsquery(terms),) * 2]),
                      Sql(BLOCKS_SQL, ([t for t, _, _ in lists], [f for _, f, _ in lists], flt.owner), binary=True)]
        results = iter((yield Batch(first))[len(SNAPSHOT_SQL):])
        if collection is None:
            collection = self._cache.set_collection(next(results)[0])
        for term in missing:
            own, any_field = (next(results) or [(0, 0)])[0]
            self._cache.set_df(term, own, any_field)
        dfs = self._cache.dfs(terms, w_ctx > 0)
        reference = next(results)
        search = ImpactSearch(terms, w_own, w_ctx, collection, dfs, limit,
                              float(reference[0][0]) if reference else DEFAULT_AVGDL)
        if not narrow:
            changed = [r[0] for r in next(results)]
            changed_rows, blocks = next(results), next(results)
            if len(changed) <= CHANGED_ROWS:
                return (yield from self._search_blocks(search, changed, changed_rows, blocks, where, params))
        while not narrow and (reads := search.next_reads()):
            met = search.took(reads, (yield Sql(POSTINGS_SQL, search.read_params(reads, flt.owner))))
            if met:
                rows = yield Sql(lexical_rows_sql(where), [met, *params])
                search.scored(bm25_scores(rows, terms, w_own, w_ctx, collection, dfs))
        offset, size = 0, 4 * limit + 60
        while not search.final():  # past the read budget, or a narrow filter: bounds summed in the server
            bounds = yield Sql(bounds_sql(where if narrow else None),
                               [*search.bound_params(flt.owner), *(params if narrow else []), size, offset])
            new = search.rescored(bounds)
            if new:
                rows = yield Sql(lexical_rows_sql(where), [new, *params])
                search.scored(bm25_scores(rows, terms, w_own, w_ctx, collection, dfs))
            if len(bounds) < size or (len(search.best) >= limit and search.threshold() > bounds[-1][1]):
                break
            offset, size = offset + size, 2 * size
        return [ScoredId(mid, score) for score, mid in search.answer()]

    def _search_blocks(self, search: ImpactSearch, changed: list[int], changed_rows: Sequence[Any],
                       blocks: Sequence[Any], where: str, params: list[Any]) -> Op[list[ScoredId]]:
        """The exact top ``limit`` from the lists' blocks: the changed rows (``changed_rows``: those holding a
        query term and passing the filters) scored exactly, then the rows of the highest bounds summed in numpy,
        a page at a time, until the ``limit``-th score beats the next bound."""
        terms, w_own, w_ctx, collection, dfs = search.terms, search.w_own, search.w_ctx, search.collection, search.dfs
        search.seen.update(changed)
        search.scored(bm25_scores(changed_rows, terms, w_own, w_ctx, collection, dfs))
        bounds = BlockBounds(blocks, search.factors(), changed)
        size = 2 * search.limit + 10
        while True:
            page = bounds.best(size)
            new = search.rescored(page)
            if new:
                rows = yield Sql(lexical_rows_sql(where), [new, *params])
                search.scored(bm25_scores(rows, terms, w_own, w_ctx, collection, dfs))
            if len(page) < size or (len(search.best) >= search.limit and search.threshold() > page[-1][1]):
                break
            size *= 4
        return [ScoredId(mid, score) for score, mid in search.answer()]

    def op_search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter, limit: int,
                         exact: bool | None) -> Op[list[ScoredId]]:
        q = checked_vector(vector, self._dimension(), "the query vector")
        if limit <= 0:
            return []
        if exact is None:
            exact = self._cache.owner_is_small(flt.owner)
        if exact is None:
            rows = yield Sql(OWNER_ROWS_SQL, (flt.owner, EXACT_ROWS + 1))
            exact = self._cache.set_owner_rows(flt.owner, rows[0][0])
        query, params = vector_query(flt, q, limit, exact)
        _, rows = yield Batch([Sql(vector_settings(exact, limit)), Sql(query, params)])  # one round trip
        return [ScoredId(mid, float(score)) for mid, score in rows]

    def op_search_time(self, flt: SearchFilter, limit: int) -> Op[list[ScoredId]]:
        if flt.start is None and flt.end is None:
            return []
        where, params = where_clause(flt)
        rows = yield Sql(f"SELECT id FROM memroute_memories m WHERE {where} AND occurred_at IS NOT NULL ORDER BY "
                         "occurred_at DESC, row_id DESC LIMIT %s", [*params, int(limit)])
        return [ScoredId(r[0], 1.0) for r in rows]

    # ---------------------------------------------------------------------------- conversation log
    def op_add_messages(self, messages: Sequence[Message]) -> Op[None]:
        if messages:
            yield Sql(ADD_MESSAGES_SQL, [list(column) for column in zip(*(
                (m.owner, m.session_id, m.role, m.text, checked_time(m.created_at, "the time of a message"))
                for m in messages), strict=True)])

    def op_recent_messages(self, session_id: str, owner: str, limit: int) -> Op[list[Message]]:
        rows = yield Sql(RECENT_MESSAGES_SQL, (owner, session_id, int(limit)))
        return [message_of(session_id, row, owner) for row in reversed(rows)]

    def op_messages_page(self, after: int, size: int) -> Op[tuple[int, list[Message]]]:
        rows = yield Sql(MESSAGES_PAGE_SQL, (after, size))
        return (rows[-1][0] if rows else after), [message_of(session, (mid, role, text, created), owner)
                                                   for mid, owner, session, role, text, created in rows]

    # --------------------------------------------------------------------------------- named state
    def op_put_state(self, namespace: str, key: str, value: dict[str, Any], owner: str) -> Op[None]:
        payload = json.loads(json.dumps(value, default=str))
        yield Sql(PUT_STATE_SQL, (namespace, owner, key, Jsonb(payload)))

    def op_get_state(self, namespace: str, key: str, owner: str) -> Op[dict[str, Any] | None]:
        rows = yield Sql(GET_STATE_SQL, (namespace, owner, key))
        return dict(rows[0][0]) if rows else None

    def op_list_state(self, namespace: str, owner: str) -> Op[list[tuple[str, dict[str, Any]]]]:
        rows = yield Sql(LIST_STATE_SQL, (namespace, owner))
        return [(k, dict(v)) for k, v in rows]

    def op_all_state(self) -> Op[list[tuple[str, str, str, dict[str, Any]]]]:
        rows = yield Sql(ALL_STATE_SQL)
        return [(namespace, owner, key, dict(value)) for namespace, owner, key, value in rows]

    # ----------------------------------------------------------------------------------- lifecycle
    def op_stats(self) -> Op[StoreStats]:
        (memories, owners, sessions), = yield Sql(
            "SELECT count(*), count(DISTINCT owner), count(DISTINCT session_id) FROM memroute_memories")
        messages = (yield Sql("SELECT count(*) FROM memroute_messages"))[0][0]
        version = (yield Sql(VERSION_SQL))[0][0]
        size = (yield Sql(SIZE_SQL))[0][0]
        return StoreStats(int(memories), int(owners), int(sessions), int(messages),
                          self._model[0] if self._model else None, self._model[1] if self._model else None,
                          int(version), int(size))
