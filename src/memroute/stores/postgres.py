"""The PostgreSQL store: the same contract as SQLite, for stores that outgrow one machine.

Any PostgreSQL 14+ with the pgvector extension (managed or self-hosted). Many memroute replicas can share
one database: all state is in the database, migrations take an advisory lock. ``?schema=NAME`` in the URL
keeps a store in a schema of its own (created on first open), so one database can hold several stores.

- Lexical search: memroute's own tokens (PostgreSQL has no Japanese or Korean configuration) are stored as
  text and as ``tsvector`` columns built from them verbatim (``array_to_tsvector``: no parser, no stemming),
  one for the memory's own words and one for its context, each with a GIN index. The GIN index finds the
  matching rows; they are scored with the same Okapi BM25 as the SQLite store (:mod:`memroute.stores.bm25`),
  with N, n and the average length read from the table (cached for five minutes). ``ts_rank`` / ``ts_rank_cd``
  are not BM25 (no length normalisation against the collection, no IDF) and are used only to keep the best
  ``BM25_CANDIDATES`` rows when a query matches more than that; below that bound the ranking is exact BM25,
  ties broken by insertion order as in SQLite, so scores fuse the same way on both backends.
- Vector search: a pgvector ``vector(d)`` column (stored inline, not TOASTed: an exact scan is ~8x faster)
  with an HNSW index (cosine). An owner with at most ``EXACT_ROWS`` memories is searched exactly (a scan of
  its rows is as fast as the graph there, and exact like SQLite); larger ones walk the HNSW graph with
  ``hnsw.ef_search`` at least 4x the limit (more if the session sets it higher) and pgvector's iterative
  scans, so that filters do not starve the result.
- Every write is one transaction: a memory and all its index entries change together or not at all.
  :meth:`PostgresStore.bulk_load` writes many at once with binary COPY, optionally rebuilding the search
  indexes after the load (far faster than growing an HNSW graph row by row).

- A read replica (hot standby) or a read-only role can be opened once the primary is migrated: opening
  writes nothing when the schema is current, and a write then fails with a message that says where to send it.

:class:`memroute.memory.AsyncMemory` runs these calls in worker threads over this (thread-safe) pool.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import islice
from typing import Any
from urllib.parse import unquote

import numpy as np
import numpy.typing as npt

from memroute.errors import ConfigError, DependencyError, ModelMismatchError, SchemaVersionError, StoreError
from memroute.stores import bm25
from memroute.stores.base import MemoryRecord, StoreStats, checked_vector
from memroute.stores.migrations.postgres import MIGRATIONS
from memroute.types import MemoryItem, MemoryKind, Message, ScoredId, SearchFilter, Sensitivity, utcnow

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import errors as pg_errors
    from psycopg import sql
    from psycopg.types.json import Jsonb
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise DependencyError("the PostgreSQL store needs: pip install 'memroute[postgres]'") from exc

BM25_CANDIDATES = 2000
EXACT_ROWS = 5000
"""Owners with at most this many memories get an exact vector scan instead of the HNSW graph: both take a
few milliseconds there (measured in docs/benchmarks.md), and exact answers equal SQLite's."""
STATS_TTL_S = 300.0
OWNER_TTL_S = 60.0
LOAD_BATCH = 2000
"""Rows per COPY in :meth:`PostgresStore.bulk_load`: the staging table stays inside ``temp_buffers``."""
_LOCK_ID = 0x6D656D726F757465  # "memroute"
COLUMNS = ("owner, id, session_id, kind, text, reply, occurred_at, created_at, expires_at, archived, "
           "sensitivity, source_type, metadata, language")
_UPDATED = ("session_id", "kind", "text", "reply", "occurred_at", "created_at", "expires_at", "archived",
            "sensitivity", "source_type", "metadata", "language", "tokens", "context_tokens", "len_own", "len_ctx",
            "tsv_own", "tsv_ctx", "embedding")
UPSERT_SQL = (
    f"INSERT INTO memroute_memories ({COLUMNS}, tokens, context_tokens, len_own, len_ctx, tsv_own, tsv_ctx, "
    "embedding) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"
    "array_to_tsvector(string_to_array(%s, ' ', '')), array_to_tsvector(string_to_array(%s, ' ', '')),"
    "%s) ON CONFLICT (owner, id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _UPDATED))
_LOAD_TYPES = ["text", "text", "text", "text", "text", "text", "timestamptz", "timestamptz", "timestamptz", "bool",
               "int2", "text", "jsonb", "text", "text", "text", "int4", "int4", "vector"]
_MERGE_SQL = (
    f"INSERT INTO memroute_memories ({COLUMNS}, tokens, context_tokens, len_own, len_ctx, tsv_own, tsv_ctx, "
    f"embedding) SELECT {COLUMNS}, tokens, context_tokens, len_own, len_ctx, "
    "array_to_tsvector(string_to_array(tokens, ' ', '')), array_to_tsvector(string_to_array(context_tokens, ' ', "
    "'')), embedding FROM memroute_load ON CONFLICT (owner, id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _UPDATED))
_STAGING_DDL = (
    "CREATE TEMP TABLE memroute_load (owner text, id text, session_id text, kind text, text text, reply text, "
    "occurred_at timestamptz, created_at timestamptz, expires_at timestamptz, archived boolean, sensitivity "
    "smallint, source_type text, metadata jsonb, language text, tokens text, context_tokens text, len_own integer, "
    "len_ctx integer, embedding vector({dim})) ON COMMIT DROP")
SEARCH_INDEXES = (
    ("memroute_memories_embedding", "USING hnsw (embedding vector_cosine_ops)"),
    ("memroute_memories_tsv_own", "USING gin (tsv_own)"),
    ("memroute_memories_tsv_ctx", "USING gin (tsv_ctx)"),
)
"""The indexes :meth:`PostgresStore.bulk_load` may drop and rebuild (the same as the migrations create)."""
STATS_SQL = "SELECT count(*), coalesce(sum(len_own), 0), coalesce(sum(len_ctx), 0) FROM memroute_memories"
DF_SQL = ("SELECT count(*) FILTER (WHERE tsv_own @@ %s::tsquery), count(*) FROM memroute_memories "
          "WHERE tsv_own @@ %s::tsquery OR tsv_ctx @@ %s::tsquery")
OWNER_ROWS_SQL = "SELECT count(*) FROM (SELECT 1 FROM memroute_memories WHERE owner = %s LIMIT %s) s"
SIZE_SQL = ("SELECT sum(pg_total_relation_size(to_regclass(t))) FROM unnest(ARRAY['memroute_memories', "
            "'memroute_messages', 'memroute_state', 'memroute_meta']) t")


@contextlib.contextmanager
def translate_errors(what: str, url: str) -> Iterator[None]:
    """Turn psycopg errors into memroute errors that say what to do."""
    try:
        yield
    except pg_errors.QueryCanceled as exc:
        raise StoreError(f"{what}: the statement was cancelled by the server's statement_timeout; retry with "
                         "a narrower filter or raise statement_timeout") from exc
    except pg_errors.InvalidPassword as exc:
        raise StoreError(f"{what}: wrong user name or password for {safe_url(url)}") from exc
    except pg_errors.ReadOnlySqlTransaction as exc:
        raise StoreError(f"{what}: {safe_url(url)} is read-only (a replica, or default_transaction_read_only); "
                         "send writes to the primary") from exc
    except pg_errors.InsufficientPrivilege as exc:
        raise StoreError(f"{what}: the database role lacks a privilege ({exc.diag.message_primary}); see "
                         "docs/postgres.md for the grants memroute needs") from exc
    except psycopg.OperationalError as exc:
        raise StoreError(f"{what}: cannot reach PostgreSQL at {safe_url(url)} ({str(exc).strip()}); the next "
                         "request reconnects") from exc
    except psycopg.Error as exc:
        raise StoreError(f"{what} failed on {safe_url(url)}: {str(exc).strip()}") from exc


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"


def split_schema(url: str) -> tuple[str, str | None]:
    """(the libpq URL, the ``schema`` it names or None): libpq itself does not know ``schema=``."""
    base, _, query = url.partition("?")
    kept, schema = [], None
    for part in query.split("&") if query else []:
        if part.startswith("schema="):
            schema = unquote(part[len("schema="):])
        else:
            kept.append(part)
    if schema is not None and not 0 < len(schema.encode()) <= 63:
        raise ConfigError(f"store URL {safe_url(url)}: schema= needs a name of 1 to 63 bytes")
    return base + ("?" + "&".join(kept) if kept else ""), schema


def search_path_sql(schema: str, local: bool) -> sql.Composed:
    """Put ``schema`` first in the search path, keeping the rest (where pgvector's types live)."""
    return sql.SQL("SELECT set_config('search_path', {} || ', ' || current_setting('search_path'), {})").format(
        sql.Literal(sql.Identifier(schema).as_string()), sql.Literal(local))


def schema_ddl(schema: str) -> sql.Composed:
    return sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))


def token_text(tokens: Sequence[str]) -> str:
    return " ".join(t for t in ("".join(tok.split()) for tok in tokens) if t)


def tsquery(terms: Sequence[str]) -> str:
    """A tsquery matching any of the terms, each quoted so user text is never query syntax."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


def record_rows(records: Sequence[MemoryRecord], dim: int) -> list[tuple[Any, ...]]:
    """The rows of :data:`UPSERT_SQL` (tokens twice: as text, and for the tsvector)."""
    rows = []
    for rec in records:
        vec = checked_vector(rec.vector, dim, f"the vector of memory {rec.memory.id}")
        m = rec.memory
        own, ctx = token_text(rec.tokens), token_text(rec.context_tokens)
        rows.append((m.owner, m.id, m.session_id, str(m.kind), m.text, m.reply, m.occurred_at,
                     m.created_at or utcnow(), m.expires_at, m.archived, int(m.sensitivity), m.source_type,
                     Jsonb(dict(m.metadata)), m.language, own, ctx, len(own.split()), len(ctx.split()),
                     own, ctx, vec))
    return rows


class SearchCache:
    """What searches read often and may be a little stale: BM25 collection statistics, document frequencies
    (five minutes) and whether an owner is small enough for an exact vector scan (a minute; this process's
    own writes are counted at once)."""

    def __init__(self) -> None:
        self.stats: tuple[float, int, float, float] | None = None  # (at, docs, sum_own, sum_ctx)
        self.df: dict[str, tuple[float, int, int]] = {}
        self.owner_rows: dict[str, tuple[float, int]] = {}

    def clear(self) -> None:
        self.stats = None
        self.df.clear()
        self.owner_rows.clear()

    def collection(self) -> tuple[int, float, float] | None:
        if self.stats is None or time.monotonic() - self.stats[0] > STATS_TTL_S:
            return None
        return self.stats[1], self.stats[2], self.stats[3]

    def set_collection(self, row: Sequence[Any]) -> tuple[int, float, float]:
        docs, sum_own, sum_ctx = row
        self.stats = (time.monotonic(), int(docs), float(sum_own), float(sum_ctx))
        return self.stats[1], self.stats[2], self.stats[3]

    def missing_df(self, terms: Sequence[str]) -> list[str]:
        now = time.monotonic()
        return [t for t in terms if t not in self.df or now - self.df[t][0] > STATS_TTL_S]

    def set_df(self, term: str, own: int, any_field: int) -> None:
        self.df[term] = (time.monotonic(), int(own), int(any_field))

    def dfs(self, terms: Sequence[str], with_context: bool) -> dict[str, int]:
        idx = 2 if with_context else 1
        return {t: max(int(self.df[t][idx]), 1) for t in terms}

    def owner_is_small(self, owner: str) -> bool | None:
        """True / False, or None when the owner's size must be read (again)."""
        hit = self.owner_rows.get(owner)
        if hit is None or time.monotonic() - hit[0] > OWNER_TTL_S:
            return None
        return hit[1] <= EXACT_ROWS

    def set_owner_rows(self, owner: str, rows: int) -> bool:
        if len(self.owner_rows) >= 10_000:
            self.owner_rows.clear()
        self.owner_rows[owner] = (time.monotonic(), int(rows))
        return rows <= EXACT_ROWS

    def wrote(self, records: Sequence[MemoryRecord]) -> None:
        for rec in records:
            hit = self.owner_rows.get(rec.memory.owner)
            if hit is not None:
                self.owner_rows[rec.memory.owner] = (hit[0], hit[1] + 1)


def bm25_query(tokens: Sequence[str], flt: SearchFilter,
               weights: tuple[float, float]) -> tuple[list[str], float, float, str, list[Any]] | None:
    """(terms, own weight, context weight, SQL, params) of the candidate query, or None if nothing to search."""
    terms = sorted({t for t in ("".join(tok.split()) for tok in tokens) if t})
    w_own, w_ctx = float(weights[0]), max(float(weights[1]), 0.0)
    if not terms:
        return None
    query = tsquery(terms)
    where, params = where_clause(flt)
    match = "(tsv_own @@ %s::tsquery" + (" OR tsv_ctx @@ %s::tsquery)" if w_ctx > 0 else ")")
    match_params = [query, query] if w_ctx > 0 else [query]
    return terms, w_own, w_ctx, (
        f"SELECT id, tokens, context_tokens, len_own, len_ctx, row_id FROM memroute_memories m WHERE {where} AND "
        f"{match} ORDER BY ts_rank(tsv_own, %s::tsquery) DESC, row_id LIMIT %s"), \
        [*params, *match_params, query, BM25_CANDIDATES]


def bm25_rank(rows: Sequence[Any], terms: Sequence[str], w_own: float, w_ctx: float,
              collection: tuple[int, float, float], dfs: dict[str, int], limit: int) -> list[ScoredId]:
    """Okapi BM25 (two weighted fields) of the candidate rows; ties in insertion order, as in SQLite."""
    docs, sum_own, sum_ctx = collection
    avgdl = (w_own * sum_own + w_ctx * sum_ctx) / max(docs, 1)
    if avgdl <= 0:
        return []
    scored = []
    for mid, own_text, ctx_text, len_own, len_ctx, row_id in rows:
        own, ctx = own_text.split(), ctx_text.split() if w_ctx > 0 else []
        dl = w_own * len_own + w_ctx * len_ctx
        score = 0.0
        for term in terms:
            tf = w_own * own.count(term) + (w_ctx * ctx.count(term) if ctx else 0.0)
            if tf > 0:
                score += bm25.term_score(bm25.idf(docs, dfs[term]), tf, dl, avgdl)
        if score > 0:
            scored.append((-score, row_id, mid))
    scored.sort()
    return [ScoredId(mid, -neg) for neg, _, mid in scored[:limit]]


def vector_settings(exact: bool, limit: int) -> str:
    """Per-transaction settings of a vector search (no parameters: ``limit`` is an int)."""
    if exact:
        return "SET LOCAL enable_indexscan = off"  # the HNSW graph is an index scan; bitmap scans stay
    # pgvector 0.8: keep scanning the graph until enough rows pass the filters; search at least 4x limit deep
    ef = max(40, min(1000, 4 * int(limit)))
    return ("SELECT set_config('hnsw.iterative_scan', 'strict_order', true), set_config('hnsw.ef_search', "
            f"greatest(coalesce(current_setting('hnsw.ef_search', true), '40')::int, {ef})::text, true)")


def vector_query(flt: SearchFilter) -> tuple[str, list[Any]]:
    """SQL and filter params; the caller passes (query vector, *params, query vector, limit)."""
    where, params = where_clause(flt)
    return (f"SELECT id, 1 - (embedding <=> %s) FROM memroute_memories m WHERE {where} "
            "ORDER BY embedding <=> %s, row_id LIMIT %s"), params


def array(value: Any) -> npt.NDArray[np.float32]:
    """pgvector's loader returns a ``Vector`` (or an array, depending on its version)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def where_clause(flt: SearchFilter) -> tuple[str, list[Any]]:
    clauses = ["m.owner = %s"]
    params: list[Any] = [flt.owner]
    if flt.session_id is not None:
        clauses.append("m.session_id = %s")
        params.append(flt.session_id)
    if flt.kinds:
        clauses.append("m.kind = ANY(%s)")
        params.append([str(k) for k in flt.kinds])
    clauses.append("m.sensitivity <= %s")
    params.append(int(flt.max_sensitivity))
    if not flt.include_archived:
        clauses.append("NOT m.archived")
    if not flt.include_expired:
        clauses.append("(m.expires_at IS NULL OR m.expires_at > %s)")
        params.append(flt.now or utcnow())
    if flt.start is not None:
        clauses.append("m.occurred_at >= %s")
        params.append(flt.start)
    if flt.end is not None:
        clauses.append("m.occurred_at <= %s")
        params.append(flt.end)
    return " AND ".join(clauses), params


def _utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def memory_of(row: Sequence[Any]) -> MemoryItem:
    (owner, mid, session_id, kind, text, reply, occurred, created, expires, archived, sens, source_type,
     metadata, language) = row
    return MemoryItem(id=mid, owner=owner, text=text, kind=MemoryKind(kind), session_id=session_id, reply=reply,
                      occurred_at=_utc(occurred), created_at=_utc(created), expires_at=_utc(expires),
                      archived=bool(archived), sensitivity=Sensitivity(int(sens)), source_type=source_type,
                      metadata=dict(metadata), language=language)


def message_of(session_id: str, row: Sequence[Any], owner: str) -> Message:
    mid, role, text, created = row
    return Message(session_id, role, text, created.astimezone(UTC), owner, mid)


def model_mismatch(url: str, stored: tuple[str, int], model_id: str, dimension: int) -> ModelMismatchError:
    return ModelMismatchError(
        f"{safe_url(url)} was written with embedding model {stored[0]} ({stored[1]}-d), not {model_id} "
        f"({dimension}-d); open it with the embedder that wrote it, or copy the memories into a new store")


class PostgresStore:
    """A :class:`memroute.stores.base.Store` on PostgreSQL with pgvector."""

    def __init__(self, url: str, min_connections: int = 1, max_connections: int = 8,
                 connect_timeout_s: float = 10.0) -> None:
        self.url = url
        conninfo, self.schema = split_schema(url)
        self._model: tuple[str, int] | None = None
        self._cache = SearchCache()
        self._written_since_analyze = 0
        with translate_errors("connect", url):
            # migrate on one connection first: the pool's connections need the vector type to exist
            with psycopg.connect(conninfo, connect_timeout=int(connect_timeout_s)) as conn:
                self._migrate(conn)
            self._pool = ConnectionPool(conninfo, min_size=min_connections, max_size=max_connections, open=False,
                                        check=ConnectionPool.check_connection, timeout=connect_timeout_s,
                                        configure=self._configure, kwargs={"connect_timeout": int(connect_timeout_s)})
            self._pool.open(wait=True, timeout=connect_timeout_s)
        try:
            meta = dict(self._fetch("read settings", "SELECT key, value FROM memroute_meta"))
        except BaseException:
            self._pool.close()
            raise
        if "model_id" in meta:
            self._model = (meta["model_id"], int(meta["dimension"]))

    # ------------------------------------------------------------------------------------- plumbing
    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        register_vector(conn)
        if self.schema is not None:
            with conn.transaction():
                conn.execute(search_path_sql(self.schema, local=False))

    @contextlib.contextmanager
    def _tx(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        with translate_errors(what, self.url), self._pool.connection() as conn, conn.transaction():
            yield conn

    def _fetch(self, what: str, query: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._tx(what) as conn:
            return conn.execute(query, params).fetchall()

    def _current(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the schema is there and current, read without writing (so replicas can be opened)."""
        latest = MIGRATIONS[-1][0]
        with conn.transaction():
            if self.schema is not None:
                conn.execute(search_path_sql(self.schema, local=True))
            row = conn.execute("SELECT to_regclass('memroute_meta') IS NOT NULL AND EXISTS (SELECT FROM pg_extension "
                               "WHERE extname = 'vector')").fetchone()
            if not (row and row[0]):
                return False
            found = conn.execute("SELECT value FROM memroute_meta WHERE key = 'schema_version'").fetchone()
        version = int(found[0]) if found else 0
        if version > latest:
            raise SchemaVersionError(f"{safe_url(self.url)} has schema version {version}, newer than this "
                                     f"memroute knows ({latest}); upgrade memroute")
        return version == latest

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        latest = MIGRATIONS[-1][0]
        if self._current(conn):
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            try:
                conn.execute("SAVEPOINT ext")
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except (pg_errors.FeatureNotSupported, pg_errors.UndefinedFile, pg_errors.InsufficientPrivilege,
                    pg_errors.UndefinedObject) as exc:
                raise StoreError(
                    f"the database at {safe_url(self.url)} has no pgvector extension ({str(exc).strip()}): install "
                    "pgvector on the server and run CREATE EXTENSION vector; as a superuser (on managed services: "
                    "enable the 'vector' extension in the console)") from exc
            if self.schema is not None:
                conn.execute(schema_ddl(self.schema))
                conn.execute(search_path_sql(self.schema, local=True))
            conn.execute("CREATE TABLE IF NOT EXISTS memroute_meta (key text PRIMARY KEY, value text NOT NULL)")
            row = conn.execute("SELECT value FROM memroute_meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > latest:
                raise SchemaVersionError(f"{safe_url(self.url)} has schema version {version}, newer than this "
                                         f"memroute knows ({latest}); upgrade memroute")
            for number, _name, ddl in MIGRATIONS:
                if number > version:
                    conn.execute(ddl)
                    conn.execute("INSERT INTO memroute_meta (key, value) VALUES ('schema_version', %s) "
                                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(number),))

    # ----------------------------------------------------------------------------------- the model
    def bind_model(self, model_id: str, dimension: int) -> None:
        if self._model is None:
            with self._tx("record the embedding model") as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
                meta = dict(conn.execute("SELECT key, value FROM memroute_meta").fetchall())
                if "model_id" in meta:
                    self._model = (meta["model_id"], int(meta["dimension"]))
                else:
                    dim = int(dimension)
                    # a new type resets the column's storage to the type's default (TOASTed): keep it inline
                    conn.execute(f"ALTER TABLE memroute_memories ALTER COLUMN embedding TYPE vector({dim}), "
                                 "ALTER COLUMN embedding SET STORAGE MAIN")
                    self._cache.clear()
                    conn.execute("CREATE INDEX IF NOT EXISTS memroute_memories_embedding ON memroute_memories "
                                 f"{SEARCH_INDEXES[0][1]}")
                    conn.execute("INSERT INTO memroute_meta (key, value) VALUES ('model_id', %s), ('dimension', %s)",
                                 (model_id, str(dim)))
                    self._model = (model_id, dim)
        assert self._model is not None
        if self._model != (model_id, dimension):
            raise model_mismatch(self.url, self._model, model_id, dimension)

    def _dimension(self) -> int:
        if self._model is None:
            raise StoreError(f"{safe_url(self.url)} has no embedding model yet; call bind_model first")
        return self._model[1]

    # ------------------------------------------------------------------------------------ memories
    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        if not records:
            return
        rows = record_rows(records, self._dimension())
        with self._tx("store memories") as conn, conn.cursor() as cur:
            cur.executemany(UPSERT_SQL, rows)
        self._cache.wrote(records)
        self._analyze_after(len(rows))

    def bulk_load(self, records: Iterable[MemoryRecord], rebuild_indexes: bool = False,
                  progress: Callable[[int], Any] | None = None) -> int:
        """Write many memories at once: binary COPY into a staging table, merged by (owner, id) batch by batch.

        One transaction: all of it or nothing. With ``rebuild_indexes`` the HNSW and GIN indexes are dropped
        first and built again after the load, which is far faster than growing them row by row when the
        load is large next to what the table holds; until the load commits, other sessions wait for the
        table. The build uses the server's ``maintenance_work_mem`` and ``max_parallel_maintenance_workers``
        (docs/postgres.md). ``progress`` is called with the number of rows of each batch written.
        Returns the number of records written.
        """
        dim = self._dimension()
        total = 0
        with self._tx("bulk load memories") as conn:
            if rebuild_indexes:
                conn.execute("DROP INDEX IF EXISTS " + ", ".join(name for name, _ in SEARCH_INDEXES))
            conn.execute(_STAGING_DDL.format(dim=dim))
            it = iter(records)
            while batch := list(islice(it, LOAD_BATCH)):
                unique = list({(r.memory.owner, r.memory.id): r for r in batch}.values())  # the last one wins
                with conn.cursor() as cur, cur.copy(
                        f"COPY memroute_load ({COLUMNS}, tokens, context_tokens, len_own, len_ctx, embedding) FROM "
                        "STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(_LOAD_TYPES)
                    for row in record_rows(unique, dim):
                        copy.write_row(row[:18] + row[20:])
                conn.execute(_MERGE_SQL)
                conn.execute("TRUNCATE memroute_load")
                total += len(batch)
                if progress is not None:
                    progress(len(batch))
            if rebuild_indexes:
                for name, method in SEARCH_INDEXES:
                    conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON memroute_memories {method}")
            conn.execute("ANALYZE memroute_memories")
        self._cache.clear()
        self._written_since_analyze = 0
        return total

    def _analyze_after(self, written: int) -> None:
        """Refresh the planner's statistics after bulk writes, before autovacuum gets to it.

        With stale statistics PostgreSQL takes an owner with thousands of rows for a handful and sorts all of
        them instead of walking the HNSW graph (27 ms instead of ~1 ms at 5k rows, measured).
        """
        self._written_since_analyze += written
        docs = self._cache.stats[1] if self._cache.stats else 0
        if self._written_since_analyze >= max(1000, docs // 10):
            self._written_since_analyze = 0
            self._cache.stats = None
            with self._tx("refresh statistics") as conn:
                conn.execute("ANALYZE memroute_memories")

    def get(self, ids: Sequence[str], owner: str) -> list[MemoryItem]:
        if not ids:
            return []
        rows = self._fetch("get memories", f"SELECT {COLUMNS} FROM memroute_memories WHERE owner = %s AND "
                           "id = ANY(%s)", (owner, list(ids)))
        found = {r[1]: memory_of(r) for r in rows}
        return [found[i] for i in ids if i in found]

    def get_vectors(self, ids: Sequence[str], owner: str) -> dict[str, npt.NDArray[np.float32]]:
        rows = self._fetch("get vectors", "SELECT id, embedding FROM memroute_memories WHERE owner = %s AND "
                           "id = ANY(%s)", (owner, list(ids)))
        return {mid: array(vec) for mid, vec in rows}

    def delete(self, ids: Sequence[str], owner: str) -> int:
        if not ids:
            return 0
        with self._tx("delete memories") as conn:
            cur = conn.execute("DELETE FROM memroute_memories WHERE owner = %s AND id = ANY(%s)", (owner, list(ids)))
            return cur.rowcount

    def delete_where(self, owner: str, session_id: str | None = None) -> int:
        self._cache.owner_rows.pop(owner, None)
        with self._tx("forget") as conn:
            if session_id is None:
                conn.execute("DELETE FROM memroute_messages WHERE owner = %s", (owner,))
                conn.execute("DELETE FROM memroute_state WHERE owner = %s", (owner,))
                return conn.execute("DELETE FROM memroute_memories WHERE owner = %s", (owner,)).rowcount
            conn.execute("DELETE FROM memroute_messages WHERE owner = %s AND session_id = %s", (owner, session_id))
            return conn.execute("DELETE FROM memroute_memories WHERE owner = %s AND session_id = %s",
                                (owner, session_id)).rowcount

    def list_memories(self, flt: SearchFilter, limit: int = 100, offset: int = 0) -> list[MemoryItem]:
        where, params = where_clause(flt)
        rows = self._fetch("list memories", f"SELECT {COLUMNS} FROM memroute_memories m WHERE {where} ORDER BY "
                           "coalesce(occurred_at, created_at) DESC, row_id DESC LIMIT %s OFFSET %s",
                           [*params, int(limit), int(offset)])
        return [memory_of(r) for r in rows]

    def iter_records(self, batch_size: int = 1000) -> Iterator[MemoryRecord]:
        last = 0
        while True:
            rows = self._fetch("read memories", f"SELECT row_id, {COLUMNS}, tokens, context_tokens, embedding "
                               "FROM memroute_memories WHERE row_id > %s ORDER BY row_id LIMIT %s", (last, batch_size))
            if not rows:
                return
            for row in rows:
                last = row[0]
                yield MemoryRecord(memory_of(row[1:15]), row[15].split(), array(row[17]), row[16].split())

    def count(self, owner: str | None = None) -> int:
        if owner is None:
            return int(self._fetch("count", "SELECT count(*) FROM memroute_memories")[0][0])
        return int(self._fetch("count", "SELECT count(*) FROM memroute_memories WHERE owner = %s", (owner,))[0][0])

    # -------------------------------------------------------------------------------------- search
    def search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                    weights: tuple[float, float] = (1.0, 0.0)) -> list[ScoredId]:
        query = bm25_query(tokens, flt, weights)
        if query is None or limit <= 0:
            return []
        terms, w_own, w_ctx, candidates_sql, params = query
        rows = self._fetch("BM25 search", candidates_sql, params)
        if not rows:
            return []
        collection = self._cache.collection() or self._cache.set_collection(
            self._fetch("BM25 statistics", STATS_SQL)[0])
        missing = self._cache.missing_df(terms)
        if missing:
            # one statement per term, each walking the GIN index, pipelined in one round trip (a single
            # statement over unnest(terms) made the planner scan the table once per term)
            with self._tx("BM25 statistics") as conn, conn.pipeline():
                cursors = [(t, conn.cursor().execute(DF_SQL, (tsquery([t]),) * 3)) for t in missing]
                for term, cur in cursors:
                    own, any_field = cur.fetchone() or (0, 0)
                    self._cache.set_df(term, own, any_field)
        return bm25_rank(rows, terms, w_own, w_ctx, collection, self._cache.dfs(terms, w_ctx > 0), limit)

    def search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter, limit: int,
                      exact: bool | None = None) -> list[ScoredId]:
        """Cosine KNN: exact for owners of at most ``EXACT_ROWS`` memories, else HNSW; ``exact`` forces one."""
        q = checked_vector(vector, self._dimension(), "the query vector")
        if limit <= 0:
            return []
        if exact is None:
            exact = self._cache.owner_is_small(flt.owner)
        if exact is None:
            exact = self._cache.set_owner_rows(
                flt.owner, self._fetch("vector search", OWNER_ROWS_SQL, (flt.owner, EXACT_ROWS + 1))[0][0])
        query, params = vector_query(flt)
        with self._tx("vector search") as conn:
            conn.execute(vector_settings(exact, limit))
            rows = conn.execute(query, [q, *params, q, int(limit)]).fetchall()
        return [ScoredId(mid, float(score)) for mid, score in rows]

    def search_time(self, flt: SearchFilter, limit: int) -> list[ScoredId]:
        if flt.start is None and flt.end is None:
            return []
        where, params = where_clause(flt)
        rows = self._fetch("time search", f"SELECT id FROM memroute_memories m WHERE {where} AND occurred_at IS NOT "
                           "NULL ORDER BY occurred_at DESC, row_id DESC LIMIT %s", [*params, int(limit)])
        return [ScoredId(r[0], 1.0) for r in rows]

    # ---------------------------------------------------------------------------- conversation log
    def add_messages(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        with self._tx("append messages") as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO memroute_messages (owner, session_id, role, text, created_at) VALUES "
                            "(%s, %s, %s, %s, %s)",
                            [(m.owner, m.session_id, m.role, m.text, m.created_at) for m in messages])

    def recent_messages(self, session_id: str, owner: str, limit: int = 20) -> list[Message]:
        rows = self._fetch("read messages", "SELECT id, role, text, created_at FROM memroute_messages WHERE owner = %s "
                           "AND session_id = %s ORDER BY id DESC LIMIT %s", (owner, session_id, int(limit)))
        return [message_of(session_id, row, owner) for row in reversed(rows)]

    def iter_messages(self, batch_size: int = 1000) -> Iterator[Message]:
        last = 0
        while rows := self._fetch("read messages", "SELECT id, owner, session_id, role, text, created_at FROM "
                                  "memroute_messages WHERE id > %s ORDER BY id LIMIT %s", (last, batch_size)):
            for mid, owner, session_id, role, text, created in rows:
                last = mid
                yield Message(session_id, role, text, created.astimezone(UTC), owner, mid)

    # --------------------------------------------------------------------------------- named state
    def put_state(self, namespace: str, key: str, value: dict[str, Any], owner: str = "") -> None:
        payload = json.loads(json.dumps(value, default=str))
        with self._tx("save state") as conn:
            conn.execute("INSERT INTO memroute_state (namespace, owner, key, value, updated_at) VALUES (%s, %s, %s, "
                         "%s, clock_timestamp()) ON CONFLICT (namespace, owner, key) DO UPDATE SET value = "
                         "excluded.value, updated_at = excluded.updated_at", (namespace, owner, key, Jsonb(payload)))

    def get_state(self, namespace: str, key: str, owner: str = "") -> dict[str, Any] | None:
        rows = self._fetch("read state", "SELECT value FROM memroute_state WHERE namespace = %s AND owner = %s AND "
                           "key = %s", (namespace, owner, key))
        return dict(rows[0][0]) if rows else None

    def list_state(self, namespace: str, owner: str = "") -> list[tuple[str, dict[str, Any]]]:
        rows = self._fetch("read state", "SELECT key, value FROM memroute_state WHERE namespace = %s AND owner = %s "
                           "ORDER BY updated_at, key", (namespace, owner))
        return [(k, dict(v)) for k, v in rows]

    def iter_state(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        for namespace, owner, key, value in self._fetch("read state", "SELECT namespace, owner, key, value FROM "
                                                        "memroute_state ORDER BY namespace, owner, key"):
            yield namespace, owner, key, dict(value)

    # ----------------------------------------------------------------------------------- lifecycle
    def stats(self) -> StoreStats:
        (memories, owners, sessions), = self._fetch(
            "stats", "SELECT count(*), count(DISTINCT owner), count(DISTINCT session_id) FROM memroute_memories")
        messages = self._fetch("stats", "SELECT count(*) FROM memroute_messages")[0][0]
        version = self._fetch("stats", "SELECT value FROM memroute_meta WHERE key = 'schema_version'")[0][0]
        size = self._fetch("stats", SIZE_SQL)[0][0]
        return StoreStats(int(memories), int(owners), int(sessions), int(messages),
                          self._model[0] if self._model else None, self._model[1] if self._model else None,
                          int(version), int(size))

    def close(self) -> None:
        self._pool.close()
