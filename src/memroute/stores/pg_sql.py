"""What the sync and the async PostgreSQL stores share: the SQL, the rows they write and read, BM25 scoring,
the search cache and the error translation. Nothing here does I/O; see :mod:`memroute.stores.pg_ops`.

Since migration 3 the lexical data (tokens, lengths, ``tsvector`` columns) lives in ``memroute_lexical``, one
narrow row per memory with the filter columns BM25 needs, so that ranking the rows a query term matches reads
~25 of them per 8 kB page instead of one (a memory's row carries its 2 kB vector inline). Every write
changes both tables in one statement; a deleted memory's lexical row goes with it (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import numpy as np
import numpy.typing as npt

from memroute.errors import ConfigError, DependencyError, ModelMismatchError, StoreError
from memroute.stores import bm25, token_blobs
from memroute.stores.base import MemoryRecord, checked_vector
from memroute.text.tokenizers import index_terms
from memroute.times import checked_time
from memroute.types import MemoryItem, MemoryKind, Message, SearchFilter, Sensitivity, utcnow

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import sql
    from psycopg.types.json import Jsonb
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise DependencyError("the PostgreSQL store needs: pip install 'memroute[postgres]'") from exc

EXACT_ROWS = 5000
"""Owners with at most this many memories get an exact vector scan instead of the HNSW graph: both take a
few milliseconds there (measured in docs/benchmarks.md), and exact answers equal SQLite's."""
STATS_TTL_S = 300.0
OWNER_TTL_S = 60.0
LOCK_ID = 0x6D656D726F757465  # "memroute"
COLUMNS = ("owner, id, session_id, kind, text, reply, occurred_at, created_at, expires_at, archived, "
           "sensitivity, source_type, metadata, language")
LEX_FILTERS = ("owner", "id", "session_id", "kind", "occurred_at", "expires_at", "archived", "sensitivity")
"""The id and the filter columns of ``where_clause`` that ``memroute_lexical`` repeats, so that BM25 never
reads a memory's row."""
LEX_DATA = ("tokens", "context_tokens", "len_own", "len_ctx")
TERMS = ("terms", "context_terms")
"""What a write passes beside ``LEX_DATA`` and does not store: the space-separated terms the ``tsvector``
columns index when they differ from the tokens (hyphenated words add their parts,
:func:`memroute.text.index_terms`), else NULL."""
_UPDATED = ("session_id", "kind", "text", "reply", "occurred_at", "created_at", "expires_at", "archived",
            "sensitivity", "source_type", "metadata", "language", "embedding")


def _tsv(column: str) -> str:
    return f"array_to_tsvector(string_to_array({column}, ' ', ''))"


TSV_SQL = _tsv("%s")
"""A ``tsvector`` of space-separated terms passed as a parameter."""


def _set(columns: Sequence[str]) -> str:
    return ", ".join(f"{c} = excluded.{c}" for c in columns)


def _lexical_insert(source: str, memory: str, data: str) -> str:
    """INSERT the lexical rows of the memories ``memory`` (a CTE returning row_id and the filter columns)."""
    cols = ", ".join(LEX_FILTERS)
    return (f"INSERT INTO memroute_lexical (row_id, {cols}, {', '.join(LEX_DATA)}, tsv_own, tsv_ctx) "
            f"SELECT {memory}.row_id, {', '.join(f'{memory}.{c}' for c in LEX_FILTERS)}, "
            f"{', '.join(f'{data}.{c}' for c in LEX_DATA)}, {_tsv(f'coalesce({data}.terms, {data}.tokens)')}, "
            f"{_tsv(f'coalesce({data}.context_terms, {data}.context_tokens)')} "
            f"FROM {source} ON CONFLICT (row_id) DO UPDATE SET "
            + _set([*LEX_FILTERS[2:], *LEX_DATA, "tsv_own", "tsv_ctx"]))  # (owner, id) stay


_UPSERT_MEMORY = (f"INSERT INTO memroute_memories ({COLUMNS}, embedding, indexed) {{values}} ON CONFLICT (owner, id) "
                  f"DO UPDATE SET {_set([*_UPDATED, 'indexed'])} RETURNING row_id, {', '.join(LEX_FILTERS)}")
MERGE_SQL = (
    f"WITH m AS ({_UPSERT_MEMORY.format(values=f'SELECT {COLUMNS}, embedding, true FROM memroute_load')}) "
    + _lexical_insert("m JOIN memroute_load d ON d.owner = m.owner AND d.id = m.id", "m", "d"))
"""``bulk_load``'s merge of the staging table (which holds one row per (owner, id)): straight into the HNSW
graph (or into the graph built after the load)."""
LOAD_COLUMNS = f"{COLUMNS}, embedding, {', '.join(LEX_DATA)}, {', '.join(TERMS)}"
LOAD_TYPES = ["text", "text", "text", "text", "text", "text", "timestamptz", "timestamptz", "timestamptz", "bool",
              "int2", "text", "jsonb", "text", "vector", "text", "text", "int4", "int4", "text", "text"]
UPSERT_SQL = (
    f"WITH d AS (SELECT * FROM unnest({', '.join(f'%b::{t}[]' for t in LOAD_TYPES)}) WITH ORDINALITY "
    f"AS d({LOAD_COLUMNS}, ord)), "
    f"m AS ({_UPSERT_MEMORY.format(values=f'SELECT {COLUMNS}, embedding, false FROM d ORDER BY ord')}) "
    + _lexical_insert("m JOIN d ON d.owner = m.owner AND d.id = m.id", "m", "d"))
"""A batch of memories and their lexical rows in one statement (one round trip, one plan, whatever the
batch size): the parameters are the columns of :func:`record_rows` rows as arrays (:func:`batch_params`),
one row per (owner, id); new memories get their ``row_id`` in the batch's order. The rows are pending
(``indexed`` false, an updated one too): searchable at once, put into the HNSW graph later
(:data:`INDEX_PENDING_SQL`)."""
UPSERT_ROWS = 2000
"""Rows per :data:`UPSERT_SQL` statement: a larger batch (``remember_many`` takes up to 100,000) is several
statements in its one transaction, so that no parameter message nears PostgreSQL's 1 GB limit."""
STAGING_DDL = (
    "CREATE TEMP TABLE memroute_load (owner text, id text, session_id text, kind text, text text, reply text, "
    "occurred_at timestamptz, created_at timestamptz, expires_at timestamptz, archived boolean, sensitivity "
    "smallint, source_type text, metadata jsonb, language text, embedding vector({dim}), tokens text, "
    "context_tokens text, len_own integer, len_ctx integer, terms text, context_terms text) ON COMMIT DROP")
HNSW = "USING hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128) WHERE indexed"
"""pgvector's defaults (m 16, ef_construction 64) found 0.40 of the exact top 10 at 1M memories of the
benchmark (clusters of near-duplicate vectors); m 32 / ef_construction 128 found 0.82 at the same search
depth and latency, for a build ~2.5x longer (docs/benchmarks.md). Used when an index is built (first
model, ``bulk_load(rebuild_indexes=True)``, ``memroute copy`` into an empty store); an index built before
keeps its parameters until it is rebuilt (docs/postgres.md). Only rows marked ``indexed`` are in it (since
migration 6): a write commits its rows as pending, and the graph insert happens afterwards."""
PENDING_ROWS = 20_000
"""The most pending rows (written, searchable, not yet in the HNSW graph) a write leaves: past it the writer
moves the excess into the graph itself before it returns, at the graph's own rate. Vector search scans the
pending rows of its owner exactly: with 20,000 of them beside 30,000 in the graph it took p50 72 / p95 101 ms,
with 5,000 26 / 44 ms, with none 7 / 16 ms on 2 cores at load 11; 37 / 51, 10 / 16 and 2 / 8 ms at load 4
(docs/benchmarks.md). A store takes another bound as ``pending_rows``."""
INDEX_ROWS = 32
"""Pending rows moved into the HNSW graph per transaction (0.15-0.2 s at 4.7-6.3 ms a row; 1.5 s at load 6 on
the 1M graph): a delete of rows being moved waits for the moves in flight (:data:`DELETE_LOCK_SQL`), so at most
this long (3.3-4.1 s with 64 at load 6, docs/benchmarks.md)."""
MOVE_LOCK = 0x6D6D7276
"""The first key of the advisory lock between moves into the graph (shared) and deletes (exclusive); the
second is the schema's (``hashtext(current_schema())``), so stores in other schemas do not wait for each other."""
MOVE_LOCK_SQL = "SELECT pg_advisory_xact_lock_shared(%s, hashtext(current_schema()))"
"""Taken by a writer before it moves pending rows itself: it waits while a delete runs."""
MOVE_TRY_SQL = "SELECT pg_try_advisory_xact_lock_shared(%s, hashtext(current_schema()))"
"""Taken by the background indexer before each move: false while a delete runs or waits (a waiting exclusive
request holds new shared ones back), and the indexer then waits instead of locking more rows."""
DELETE_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))"
"""Taken first by a delete: it waits for the moves in flight (one transaction of up to ``INDEX_ROWS`` rows
each) and no new move starts before it commits. Without it a delete of many pending rows waited for the
indexer to move nearly all of them (it locked the next rows with ``SKIP LOCKED`` while the delete waited for
the previous ones: ~30 s for 2,562 rows at 1M, docs/benchmarks.md). Deletes wait for each other too (for a
delete's own transaction)."""
INDEX_PENDING_SQL = (
    "UPDATE memroute_memories m SET indexed = true FROM (SELECT row_id FROM memroute_memories WHERE NOT indexed "
    "LIMIT %s FOR UPDATE SKIP LOCKED) p WHERE m.row_id = p.row_id")
"""Move up to n pending rows into the HNSW graph (the update inserts each into it), skipping rows another
transaction holds: a row is in exactly one part at every commit, whoever moves it and whenever it stops."""
PENDING_SQL = "SELECT count(*) FROM (SELECT 1 FROM memroute_memories WHERE NOT indexed LIMIT %s) p"
INDEX_ALL_SQL = "UPDATE memroute_memories SET indexed = true WHERE NOT indexed"
"""Mark every pending row indexed while there is no HNSW graph, before it is built (cheap: no graph insert)."""
SEARCH_INDEXES = (
    ("memroute_memories_embedding", "memroute_memories", HNSW),
    ("memroute_lexical_tsv_own", "memroute_lexical", "USING gin (tsv_own)"),
    ("memroute_lexical_tsv_ctx", "memroute_lexical", "USING gin (tsv_ctx)"),
    ("memroute_postings_term", "memroute_postings", "(owner, field, term, impact DESC, row_id)"),
)
"""(name, table, method) of the indexes ``bulk_load`` may drop and rebuild (the same as the migrations create)."""
DROP_INDEXES_SQL = "DROP INDEX IF EXISTS " + ", ".join(name for name, _, _ in SEARCH_INDEXES)
ANALYZE_SQL = "ANALYZE memroute_memories, memroute_lexical"
STATS_SQL = "SELECT count(*), coalesce(sum(len_own), 0), coalesce(sum(len_ctx), 0) FROM memroute_lexical"
DF_SQL = ("SELECT count(*) FILTER (WHERE tsv_own @@ %s::tsquery), count(*) FROM memroute_lexical "
          "WHERE tsv_own @@ %s::tsquery OR tsv_ctx @@ %s::tsquery")
DF_POSTINGS_SQL = (
    "SELECT o.n, o.n + (SELECT count(*) FROM memroute_postings c WHERE c.field = 1 AND c.term = %s AND NOT EXISTS "
    "(SELECT FROM memroute_postings p WHERE p.owner = c.owner AND p.field = 0 AND p.term = c.term AND "
    "p.row_id = c.row_id)) FROM (SELECT count(*) AS n FROM memroute_postings WHERE field = 0 AND term = %s) o")
"""The same two document frequencies as :data:`DF_SQL` (memories holding the term in their own tokens; in
either field: those plus the ones holding it in their context only), counted from the postings' index
entries: one posting per (memory, field, term) since migration 5. From PostgreSQL 18 its skip scan reads
the index of (owner, field, term, ...) for a term over every owner: 4.5 / 15.3 ms against the GIN count's
82 / 120 ms for terms of 26,492 / 81,455 memories at 1M (docs/benchmarks.md); before 18 the GIN count."""
SKIP_SCAN_VERSION = 180_000
OWNER_ROWS_SQL = "SELECT count(*) FROM (SELECT 1 FROM memroute_memories WHERE owner = %s LIMIT %s) s"
SIZE_SQL = ("SELECT sum(pg_total_relation_size(to_regclass(t))) FROM unnest(ARRAY['memroute_memories', "
            "'memroute_lexical', 'memroute_messages', 'memroute_state', 'memroute_meta']) t")
META_SQL = "SELECT key, value FROM memroute_meta"
VERSION_SQL = "SELECT value FROM memroute_meta WHERE key = 'schema_version'"
GET_SQL = f"SELECT {COLUMNS} FROM memroute_memories WHERE owner = %s AND id = ANY(%s)"
VECTORS_SQL = "SELECT id, embedding FROM memroute_memories WHERE owner = %s AND id = ANY(%s)"
DELETE_SQL = "DELETE FROM memroute_memories WHERE owner = %s AND id = ANY(%s)"
RECORDS_PAGE_SQL = (
    f"SELECT m.row_id, {', '.join('m.' + c.strip() for c in COLUMNS.split(','))}, l.tokens, l.context_tokens, "
    "m.embedding, t.ids, t.codes, t.scales FROM memroute_memories m JOIN memroute_lexical l ON l.row_id = m.row_id "
    "LEFT JOIN memroute_tokens t ON t.row_id = m.row_id WHERE m.row_id > %s ORDER BY m.row_id LIMIT %s")
TOKENS_INSERT_SQL = (  # a memory written again lost its old ones in the upsert (migration 10's trigger)
    "INSERT INTO memroute_tokens (row_id, owner, ids, codes, scales) SELECT m.row_id, d.owner, "
    "string_to_array(d.ids, ' ')::int4[], d.codes, d.scales FROM unnest(%s::text[], %s::text[], %s::text[], "
    "%s::bytea[], %s::bytea[]) AS d(owner, id, ids, codes, scales) "
    "JOIN memroute_memories m ON m.owner = d.owner AND m.id = d.id")
TOKENS_SQL = ("SELECT m.id, t.ids, t.codes, t.scales FROM memroute_memories m JOIN memroute_tokens t ON "
              "t.row_id = m.row_id WHERE m.owner = %s AND m.id = ANY(%s)")
TOKEN_DF_SQL = "SELECT token, df FROM memroute_token_df WHERE owner = %s AND token = ANY(%s)"
MESSAGES_PAGE_SQL = ("SELECT id, owner, session_id, role, text, created_at FROM memroute_messages WHERE id > %s "
                     "ORDER BY id LIMIT %s")
ADD_MESSAGES_SQL = ("INSERT INTO memroute_messages (owner, session_id, role, text, created_at) SELECT owner, "
                    "session_id, role, text, created_at FROM unnest(%s::text[], %s::text[], %s::text[], "
                    "%s::text[], %s::timestamptz[]) WITH ORDINALITY AS d(owner, session_id, role, text, created_at, "
                    "ord) ORDER BY ord")
"""Messages in one statement, their ids in the given order: one array per column."""
RECENT_MESSAGES_SQL = ("SELECT id, role, text, created_at FROM memroute_messages WHERE owner = %s AND session_id = %s "
                       "ORDER BY id DESC LIMIT %s")
PUT_STATE_SQL = ("INSERT INTO memroute_state (namespace, owner, key, value, updated_at) VALUES (%s, %s, %s, %s, "
                 "clock_timestamp()) ON CONFLICT (namespace, owner, key) DO UPDATE SET value = excluded.value, "
                 "updated_at = excluded.updated_at")
GET_STATE_SQL = "SELECT value FROM memroute_state WHERE namespace = %s AND owner = %s AND key = %s"
LIST_STATE_SQL = "SELECT key, value FROM memroute_state WHERE namespace = %s AND owner = %s ORDER BY updated_at, key"
ALL_STATE_SQL = "SELECT namespace, owner, key, value FROM memroute_state ORDER BY namespace, owner, key"


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


UTC_SESSION_SQL = "SET TIME ZONE 'UTC'"
"""Every pooled session reads times in UTC: in a zone east of UTC, a time late on 9999-12-31 (which an older
memroute accepted) would be past the year 9999 and could not be loaded into a ``datetime``."""


def search_path_sql(schema: str, local: bool) -> sql.Composed:
    """Put ``schema`` first in the search path, keeping the rest (where pgvector's types live)."""
    return sql.SQL("SELECT set_config('search_path', {} || ', ' || current_setting('search_path'), {})").format(
        sql.Literal(sql.Identifier(schema).as_string()), sql.Literal(local))


def schema_ddl(schema: str) -> sql.Composed:
    return sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))


def token_text(tokens: Sequence[str]) -> str:
    return " ".join(t for t in ("".join(tok.split()) for tok in tokens) if t)


def terms_text(tokens_text: str) -> str | None:
    """The :data:`TERMS` value of a memory's space-separated tokens: its index terms, or None if the same."""
    if "-" not in tokens_text:
        return None
    tokens = tokens_text.split()
    terms = index_terms(tokens)
    return " ".join(terms) if len(terms) != len(tokens) else None


def indexed(tokens_text: str) -> list[str]:
    """The terms BM25 counts in a memory's stored tokens (those of its ``tsvector``)."""
    tokens = tokens_text.split()
    return index_terms(tokens) if "-" in tokens_text else tokens


def tsquery(terms: Sequence[str]) -> str:
    """A tsquery matching any of the terms, each quoted so user text is never query syntax."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


def batch_params(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The parameters of :data:`UPSERT_SQL`: :func:`record_rows` rows as one array per column, one row per
    (owner, id), the last one of each, at the place of its first one (as upserting them one by one would)."""
    unique = {(row[0], row[1]): row for row in rows}
    return [list(column) for column in zip(*unique.values(), strict=True)]


def record_rows(records: Sequence[MemoryRecord], dim: int) -> list[tuple[Any, ...]]:
    """The rows of :func:`batch_params` and of ``bulk_load``'s staging table (its column order)."""
    rows = []
    for rec in records:
        vec = checked_vector(rec.vector, dim, f"the vector of memory {rec.memory.id}")
        m = rec.memory
        own, ctx = token_text(rec.tokens), token_text(rec.context_tokens)
        occurred, created, expires = (checked_time(t, f"{name} of memory {m.id}") for t, name in (
            (m.occurred_at, "occurred_at"), (m.created_at or utcnow(), "created_at"), (m.expires_at, "expires_at")))
        rows.append((m.owner, m.id, m.session_id, str(m.kind), m.text, m.reply, occurred, created, expires,
                     m.archived, int(m.sensitivity), m.source_type,
                     Jsonb(dict(m.metadata)), m.language, vec, own, ctx, len(own.split()), len(ctx.split()),
                     terms_text(own), terms_text(ctx)))
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


def bm25_terms(tokens: Sequence[str], weights: tuple[float, float]) -> tuple[list[str], float, float] | None:
    """(terms, own weight, context weight) of a search, or None if nothing to search."""
    terms = sorted({t for t in ("".join(tok.split()) for tok in tokens) if t})
    w_own, w_ctx = float(weights[0]), max(float(weights[1]), 0.0)
    return (terms, w_own, w_ctx) if terms else None


def bm25_scores(rows: Sequence[Any], terms: Sequence[str], w_own: float, w_ctx: float,
                collection: tuple[int, float, float], dfs: dict[str, int]) -> list[tuple[float, int, str]]:
    """Okapi BM25 (two weighted fields) of lexical rows (id, tokens, context tokens, lengths, row_id):
    (score, row_id, id) of those scoring above 0."""
    docs, sum_own, sum_ctx = collection
    avgdl = (w_own * sum_own + w_ctx * sum_ctx) / max(docs, 1)
    if avgdl <= 0:
        return []
    scored = []
    idfs = [(term, bm25.idf(docs, dfs[term])) for term in terms]  # once a call, not once a row and term
    for mid, own_text, ctx_text, len_own, len_ctx, row_id in rows:
        own, ctx = indexed(own_text), indexed(ctx_text) if w_ctx > 0 else []
        norm = bm25.length_norm(w_own * len_own + w_ctx * len_ctx, avgdl)
        score = 0.0
        for term, term_idf in idfs:
            tf = w_own * own.count(term) + (w_ctx * ctx.count(term) if ctx else 0.0)
            if tf > 0:
                score += bm25.normed_term_score(term_idf, tf, norm)
        if score > 0:
            scored.append((score, int(row_id), mid))
    return scored


def vector_settings(exact: bool, limit: int) -> str:
    """Per-transaction settings of a vector search (no parameters: ``limit`` is an int)."""
    if exact:
        return "SET LOCAL enable_indexscan = off"  # the HNSW graph is an index scan; bitmap scans stay
    # pgvector 0.8: keep scanning the graph until enough rows pass the filters; search at least 4x limit deep
    ef = max(40, min(1000, 4 * int(limit)))
    return ("SELECT set_config('hnsw.iterative_scan', 'strict_order', true), set_config('hnsw.ef_search', "
            f"greatest(coalesce(current_setting('hnsw.ef_search', true), '40')::int, {ef})::text, true)")


def vector_query(flt: SearchFilter, vector: Any, limit: int, exact: bool) -> tuple[str, list[Any]]:
    """SQL and params of the nearest ``limit`` rows (id, cosine similarity) to ``vector``.

    Exact: a scan of the owner's rows. Else the HNSW graph's nearest rows among those in it (``indexed``,
    the graph's own predicate, so the planner can use it) and the exact nearest among the pending rows
    (``memroute_memories_pending``), merged by distance: a row is found from the moment its write commits.
    """
    where, params = where_clause(flt)
    one = [vector, *params, vector, int(limit)]
    if exact:
        return (f"SELECT id, 1 - (embedding <=> %s) FROM memroute_memories m WHERE {where} "
                "ORDER BY embedding <=> %s, row_id LIMIT %s"), one
    nearest = ("SELECT id, row_id, embedding <=> %s AS distance FROM memroute_memories m WHERE {part} AND "
               + where + " ORDER BY embedding <=> %s, row_id LIMIT %s")
    return (f"SELECT id, 1 - distance FROM (({nearest.format(part='m.indexed')}) UNION ALL "
            f"({nearest.format(part='NOT m.indexed')})) nearest ORDER BY distance, row_id LIMIT %s",
            [*one, *one, int(limit)])


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


def record_of(row: Sequence[Any]) -> MemoryRecord:
    """A row of :data:`RECORDS_PAGE_SQL` (without its leading row_id) as a record."""
    return MemoryRecord(memory_of(row[:14]), row[14].split(), array(row[16]), row[15].split(),
                        token_blobs.copied(row[17], row[18], row[19]))


def token_rows(records: Sequence[MemoryRecord]) -> list[list[Any]]:
    """The parameters of :data:`TOKENS_INSERT_SQL`: the records with token vectors (the last one of each (owner,
    id)), one array per column; empty when none has them."""
    last = {(r.memory.owner, r.memory.id): r for r in records}
    rows = [(owner, mid, *token_blobs.encoded(r.token_vectors, f"the token vectors of memory {mid}"))
            for (owner, mid), r in last.items() if r.token_vectors is not None]
    return [list(column) for column in zip(*rows, strict=True)] if rows else []


def message_of(session_id: str, row: Sequence[Any], owner: str) -> Message:
    mid, role, text, created = row
    return Message(session_id, role, text, created.astimezone(UTC), owner, mid)


def model_mismatch(url: str, stored: tuple[str, int], model_id: str, dimension: int) -> ModelMismatchError:
    return ModelMismatchError(
        f"{safe_url(url)} was written with embedding model {stored[0]} ({stored[1]}-d), not {model_id} "
        f"({dimension}-d); open it with the embedder that wrote it, or copy the memories into a new store")

