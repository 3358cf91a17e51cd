"""The PostgreSQL store: the same contract as SQLite, for stores that outgrow one machine.

Any PostgreSQL 14+ with the pgvector extension (managed or self-hosted). Many memroute replicas can share
one database: all state is in the database, migrations take an advisory lock.

- Lexical search: memroute's own tokens (PostgreSQL has no Japanese or Korean configuration) are stored as
  text and as ``tsvector`` columns built from them verbatim (``array_to_tsvector``: no parser, no stemming),
  one for the memory's own words and one for its context, each with a GIN index. The GIN index finds the
  matching rows; they are scored with the same Okapi BM25 as the SQLite store (:mod:`memroute.stores.bm25`),
  with N, n and the average length read from the table (cached for five minutes). ``ts_rank`` / ``ts_rank_cd``
  are not BM25 (no length normalisation against the collection, no IDF) and are used only to keep the best
  ``BM25_CANDIDATES`` rows when a query matches more than that; below that bound the ranking is exact BM25,
  so scores fuse the same way on both backends.
- Vector search: a pgvector ``vector(d)`` column with an HNSW index (cosine) once the model is bound;
  filtered searches use pgvector's iterative index scans so that filters do not starve the result.
- Every write is one transaction: a memory and all its index entries change together or not at all.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.errors import DependencyError, ModelMismatchError, SchemaVersionError, StoreError
from memroute.stores import bm25
from memroute.stores.base import MemoryRecord, StoreStats, checked_vector
from memroute.stores.migrations.postgres import MIGRATIONS
from memroute.types import MemoryItem, MemoryKind, Message, ScoredId, SearchFilter, Sensitivity, utcnow

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import errors as pg_errors
    from psycopg.types.json import Jsonb
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise DependencyError("the PostgreSQL store needs: pip install 'memroute[postgres]'") from exc

BM25_CANDIDATES = 2000
_STATS_TTL_S = 300.0
_LOCK_ID = 0x6D656D726F757465  # "memroute"
_COLUMNS = ("owner, id, session_id, kind, text, reply, occurred_at, created_at, expires_at, archived, "
            "sensitivity, source_type, metadata, language")


@contextlib.contextmanager
def translate_errors(what: str, url: str) -> Iterator[None]:
    """Turn psycopg errors into memroute errors that say what to do."""
    try:
        yield
    except pg_errors.QueryCanceled as exc:
        raise StoreError(f"{what}: the statement was cancelled by the server's statement_timeout; retry with "
                         "a narrower filter or raise statement_timeout") from exc
    except pg_errors.InvalidPassword as exc:
        raise StoreError(f"{what}: wrong user name or password for {_safe(url)}") from exc
    except pg_errors.InsufficientPrivilege as exc:
        raise StoreError(f"{what}: the database role lacks a privilege ({exc.diag.message_primary}); see "
                         "docs/postgres.md for the grants memroute needs") from exc
    except psycopg.OperationalError as exc:
        raise StoreError(f"{what}: cannot reach PostgreSQL at {_safe(url)} ({str(exc).strip()}); the next "
                         "request reconnects") from exc
    except psycopg.Error as exc:
        raise StoreError(f"{what} failed on {_safe(url)}: {str(exc).strip()}") from exc


def _safe(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"


def _token_text(tokens: Sequence[str]) -> str:
    return " ".join(t for t in ("".join(tok.split()) for tok in tokens) if t)


def _tsquery(terms: Sequence[str]) -> str:
    """A tsquery matching any of the terms, each quoted so user text is never query syntax."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


class PostgresStore:
    """A :class:`memroute.stores.base.Store` on PostgreSQL with pgvector."""

    def __init__(self, url: str, min_connections: int = 1, max_connections: int = 8,
                 connect_timeout_s: float = 10.0) -> None:
        self.url = url
        self._model: tuple[str, int] | None = None
        self._stats: tuple[float, int, float, float] | None = None  # (at, docs, sum_own, sum_ctx)
        self._df: dict[str, tuple[float, int, int]] = {}
        self._written_since_analyze = 0
        with translate_errors("connect", url):
            # migrate on one connection first: the pool's connections need the vector type to exist
            with psycopg.connect(url, connect_timeout=int(connect_timeout_s)) as conn:
                self._migrate(conn)
            self._pool = ConnectionPool(url, min_size=min_connections, max_size=max_connections, open=False,
                                        check=ConnectionPool.check_connection, timeout=connect_timeout_s,
                                        configure=register_vector, kwargs={"connect_timeout": int(connect_timeout_s)})
            self._pool.open(wait=True, timeout=connect_timeout_s)
        try:
            meta = dict(self._fetch("read settings", "SELECT key, value FROM memroute_meta"))
        except BaseException:
            self._pool.close()
            raise
        if "model_id" in meta:
            self._model = (meta["model_id"], int(meta["dimension"]))

    # ------------------------------------------------------------------------------------- plumbing
    @contextlib.contextmanager
    def _tx(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        with translate_errors(what, self.url), self._pool.connection() as conn, conn.transaction():
            yield conn

    def _fetch(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._tx(what) as conn:
            return conn.execute(sql, params).fetchall()

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        latest = MIGRATIONS[-1][0]
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            try:
                conn.execute("SAVEPOINT ext")
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except (pg_errors.FeatureNotSupported, pg_errors.UndefinedFile, pg_errors.InsufficientPrivilege,
                    pg_errors.UndefinedObject) as exc:
                raise StoreError(
                    f"the database at {_safe(self.url)} has no pgvector extension ({str(exc).strip()}): install "
                    "pgvector on the server and run CREATE EXTENSION vector; as a superuser (on managed services: "
                    "enable the 'vector' extension in the console)") from exc
            conn.execute("CREATE TABLE IF NOT EXISTS memroute_meta (key text PRIMARY KEY, value text NOT NULL)")
            row = conn.execute("SELECT value FROM memroute_meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > latest:
                raise SchemaVersionError(f"{_safe(self.url)} has schema version {version}, newer than this memroute "
                                         f"knows ({latest}); upgrade memroute")
            for number, _name, sql in MIGRATIONS:
                if number > version:
                    conn.execute(sql)
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
                    conn.execute(f"ALTER TABLE memroute_memories ALTER COLUMN embedding TYPE vector({dim})")
                    self._stats = None
                    conn.execute("CREATE INDEX IF NOT EXISTS memroute_memories_embedding ON memroute_memories "
                                 "USING hnsw (embedding vector_cosine_ops)")
                    conn.execute("INSERT INTO memroute_meta (key, value) VALUES ('model_id', %s), ('dimension', %s)",
                                 (model_id, str(dim)))
                    self._model = (model_id, dim)
        if self._model != (model_id, dimension):
            assert self._model is not None
            raise ModelMismatchError(
                f"{_safe(self.url)} was written with embedding model {self._model[0]} ({self._model[1]}-d), not "
                f"{model_id} ({dimension}-d); open it with the embedder that wrote it, or copy the memories into "
                "a new store")

    def _dimension(self) -> int:
        if self._model is None:
            raise StoreError(f"{_safe(self.url)} has no embedding model yet; call bind_model first")
        return self._model[1]

    # ------------------------------------------------------------------------------------ memories
    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        if not records:
            return
        dim = self._dimension()
        rows = []
        for rec in records:
            vec = checked_vector(rec.vector, dim, f"the vector of memory {rec.memory.id}")
            m = rec.memory
            own, ctx = _token_text(rec.tokens), _token_text(rec.context_tokens)
            rows.append((m.owner, m.id, m.session_id, str(m.kind), m.text, m.reply, m.occurred_at,
                         m.created_at or utcnow(), m.expires_at, m.archived, int(m.sensitivity), m.source_type,
                         Jsonb(dict(m.metadata)), m.language, own, ctx, len(own.split()), len(ctx.split()),
                         own, ctx, vec))
        with self._tx("store memories") as conn, conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO memroute_memories ({_COLUMNS}, tokens, context_tokens, len_own, len_ctx, tsv_own, "
                "tsv_ctx, embedding) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"
                "array_to_tsvector(string_to_array(%s, ' ', '')), array_to_tsvector(string_to_array(%s, ' ', '')),"
                "%s) ON CONFLICT (owner, id) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in (
                    "session_id", "kind", "text", "reply", "occurred_at", "created_at", "expires_at", "archived",
                    "sensitivity", "source_type", "metadata", "language", "tokens", "context_tokens", "len_own",
                    "len_ctx", "tsv_own", "tsv_ctx", "embedding")),
                rows)
        self._analyze_after(len(rows))

    def _analyze_after(self, written: int) -> None:
        """Refresh the planner's statistics after bulk writes, before autovacuum gets to it.

        With stale statistics PostgreSQL takes an owner with thousands of rows for a handful and sorts all of
        them instead of walking the HNSW graph (27 ms instead of ~1 ms at 5k rows, measured).
        """
        self._written_since_analyze += written
        if self._written_since_analyze >= max(1000, self._stats[1] // 10 if self._stats else 0):
            self._written_since_analyze = 0
            self._stats = None
            with self._tx("refresh statistics") as conn:
                conn.execute("ANALYZE memroute_memories")

    def get(self, ids: Sequence[str], owner: str) -> list[MemoryItem]:
        if not ids:
            return []
        rows = self._fetch("get memories", f"SELECT {_COLUMNS} FROM memroute_memories WHERE owner = %s AND "
                           "id = ANY(%s)", (owner, list(ids)))
        found = {r[1]: _memory(r) for r in rows}
        return [found[i] for i in ids if i in found]

    def get_vectors(self, ids: Sequence[str], owner: str) -> dict[str, npt.NDArray[np.float32]]:
        rows = self._fetch("get vectors", "SELECT id, embedding FROM memroute_memories WHERE owner = %s AND "
                           "id = ANY(%s)", (owner, list(ids)))
        return {mid: _array(vec) for mid, vec in rows}

    def delete(self, ids: Sequence[str], owner: str) -> int:
        if not ids:
            return 0
        with self._tx("delete memories") as conn:
            cur = conn.execute("DELETE FROM memroute_memories WHERE owner = %s AND id = ANY(%s)", (owner, list(ids)))
            return cur.rowcount

    def delete_where(self, owner: str, session_id: str | None = None) -> int:
        with self._tx("forget") as conn:
            if session_id is None:
                conn.execute("DELETE FROM memroute_messages WHERE owner = %s", (owner,))
                conn.execute("DELETE FROM memroute_state WHERE owner = %s", (owner,))
                return conn.execute("DELETE FROM memroute_memories WHERE owner = %s", (owner,)).rowcount
            conn.execute("DELETE FROM memroute_messages WHERE owner = %s AND session_id = %s", (owner, session_id))
            return conn.execute("DELETE FROM memroute_memories WHERE owner = %s AND session_id = %s",
                                (owner, session_id)).rowcount

    def list_memories(self, flt: SearchFilter, limit: int = 100, offset: int = 0) -> list[MemoryItem]:
        where, params = _where(flt)
        rows = self._fetch("list memories", f"SELECT {_COLUMNS} FROM memroute_memories m WHERE {where} ORDER BY "
                           "coalesce(occurred_at, created_at) DESC, row_id DESC LIMIT %s OFFSET %s",
                           [*params, int(limit), int(offset)])
        return [_memory(r) for r in rows]

    def iter_records(self, batch_size: int = 1000) -> Iterator[MemoryRecord]:
        last = 0
        while True:
            rows = self._fetch("read memories", f"SELECT row_id, {_COLUMNS}, tokens, context_tokens, embedding "
                               "FROM memroute_memories WHERE row_id > %s ORDER BY row_id LIMIT %s", (last, batch_size))
            if not rows:
                return
            for row in rows:
                last = row[0]
                yield MemoryRecord(_memory(row[1:15]), row[15].split(), _array(row[17]),
                                   row[16].split())

    def count(self, owner: str | None = None) -> int:
        if owner is None:
            return int(self._fetch("count", "SELECT count(*) FROM memroute_memories")[0][0])
        return int(self._fetch("count", "SELECT count(*) FROM memroute_memories WHERE owner = %s", (owner,))[0][0])

    # -------------------------------------------------------------------------------------- search
    def search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                    weights: tuple[float, float] = (1.0, 0.0)) -> list[ScoredId]:
        terms = sorted({t for t in ("".join(tok.split()) for tok in tokens) if t})
        w_own, w_ctx = float(weights[0]), max(float(weights[1]), 0.0)
        if not terms or limit <= 0:
            return []
        query = _tsquery(terms)
        where, params = _where(flt)
        match = "(tsv_own @@ %s::tsquery" + (" OR tsv_ctx @@ %s::tsquery)" if w_ctx > 0 else ")")
        match_params = [query, query] if w_ctx > 0 else [query]
        rows = self._fetch(
            "BM25 search",
            f"SELECT id, tokens, context_tokens, len_own, len_ctx FROM memroute_memories m WHERE {where} AND {match} "
            f"ORDER BY ts_rank(tsv_own, %s::tsquery) DESC, row_id LIMIT %s",
            [*params, *match_params, query, BM25_CANDIDATES])
        if not rows:
            return []
        docs, sum_own, sum_ctx = self._collection_stats()
        avgdl = (w_own * sum_own + w_ctx * sum_ctx) / max(docs, 1)
        if avgdl <= 0:
            return []
        dfs = self._document_frequencies(terms, w_ctx > 0)
        scored = []
        for mid, own_text, ctx_text, len_own, len_ctx in rows:
            own, ctx = own_text.split(), ctx_text.split() if w_ctx > 0 else []
            dl = w_own * len_own + w_ctx * len_ctx
            score = 0.0
            for term in terms:
                tf = w_own * own.count(term) + (w_ctx * ctx.count(term) if ctx else 0.0)
                if tf > 0:
                    score += bm25.term_score(bm25.idf(docs, dfs[term]), tf, dl, avgdl)
            if score > 0:
                scored.append(ScoredId(mid, score))
        scored.sort(key=lambda s: -s.score)
        return scored[:limit]

    def _collection_stats(self) -> tuple[int, float, float]:
        now = time.monotonic()
        if self._stats is None or now - self._stats[0] > _STATS_TTL_S:
            docs, sum_own, sum_ctx = self._fetch("BM25 statistics", "SELECT count(*), coalesce(sum(len_own), 0), "
                                                 "coalesce(sum(len_ctx), 0) FROM memroute_memories")[0]
            self._stats = (now, int(docs), float(sum_own), float(sum_ctx))
        return self._stats[1], self._stats[2], self._stats[3]

    def _document_frequencies(self, terms: Sequence[str], with_context: bool) -> dict[str, int]:
        now = time.monotonic()
        idx = 2 if with_context else 1
        missing = [t for t in terms if t not in self._df or now - self._df[t][0] > _STATS_TTL_S]
        if missing:
            for term, own_df, any_df in self._df_rows(missing):
                self._df[term] = (now, int(own_df), int(any_df))
        return {t: max(int(self._df[t][idx]), 1) for t in terms}

    def _df_rows(self, terms: Sequence[str]) -> list[tuple[str, int, int]]:
        """Document frequencies of terms (own field, and any field), pipelined in one round trip.

        One statement per term, each with its tsquery as a parameter, so that every count walks the GIN
        index; a single statement over ``unnest(terms)`` made the planner scan the table once per term.
        """
        out = []
        with self._tx("BM25 statistics") as conn, conn.pipeline():
            cursors = []
            for term in terms:
                q = _tsquery([term])
                cur = conn.cursor()
                cur.execute("SELECT count(*) FILTER (WHERE tsv_own @@ %s::tsquery), count(*) FROM memroute_memories "
                            "WHERE tsv_own @@ %s::tsquery OR tsv_ctx @@ %s::tsquery", (q, q, q))
                cursors.append((term, cur))
            for term, cur in cursors:
                own, anyf = cur.fetchone() or (0, 0)
                out.append((term, int(own), int(anyf)))
        return out

    def search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter, limit: int) -> list[ScoredId]:
        dim = self._dimension()
        q = checked_vector(vector, dim, "the query vector")
        if limit <= 0:
            return []
        where, params = _where(flt)
        with self._tx("vector search") as conn:
            # pgvector 0.8: keep scanning the HNSW graph until enough rows pass the filters
            conn.execute(f"SET LOCAL hnsw.iterative_scan = strict_order; "
                         f"SET LOCAL hnsw.ef_search = {max(40, min(1000, 4 * int(limit)))}")
            rows = conn.execute(
                f"SELECT id, 1 - (embedding <=> %s) FROM memroute_memories m WHERE {where} "
                "ORDER BY embedding <=> %s LIMIT %s", [q, *params, q, int(limit)]).fetchall()
        return [ScoredId(mid, float(score)) for mid, score in rows]

    def search_time(self, flt: SearchFilter, limit: int) -> list[ScoredId]:
        if flt.start is None and flt.end is None:
            return []
        where, params = _where(flt)
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
        return [Message(session_id, role, text, created.astimezone(UTC), owner, mid)
                for mid, role, text, created in reversed(rows)]

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
        size = self._fetch("stats", "SELECT pg_database_size(current_database())")[0][0]
        return StoreStats(int(memories), int(owners), int(sessions), int(messages),
                          self._model[0] if self._model else None, self._model[1] if self._model else None,
                          int(version), int(size))

    def close(self) -> None:
        self._pool.close()


def _array(value: Any) -> npt.NDArray[np.float32]:
    """pgvector's loader returns a ``Vector`` (or an array, depending on its version)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def _where(flt: SearchFilter) -> tuple[str, list[Any]]:
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


def _memory(row: Sequence[Any]) -> MemoryItem:
    (owner, mid, session_id, kind, text, reply, occurred, created, expires, archived, sens, source_type,
     metadata, language) = row
    return MemoryItem(id=mid, owner=owner, text=text, kind=MemoryKind(kind), session_id=session_id, reply=reply,
                      occurred_at=_utc(occurred), created_at=_utc(created), expires_at=_utc(expires),
                      archived=bool(archived), sensitivity=Sensitivity(int(sens)), source_type=source_type,
                      metadata=dict(metadata), language=language)

