"""PostgreSQL migrations, applied in order on open under an advisory lock (safe from many replicas at once).

The number applied is kept in ``memroute_meta`` under ``schema_version``. The vector column gets its
dimension, and its HNSW index, when the first embedding model is bound (see ``PostgresStore.bind_model``).
Released migrations are never edited: a change is a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

M001_INITIAL = """
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS memroute_meta (key text PRIMARY KEY, value text NOT NULL);

CREATE TABLE memroute_memories (
    row_id          bigserial PRIMARY KEY,
    owner           text NOT NULL,
    id              text NOT NULL,
    session_id      text,
    kind            text NOT NULL,
    text            text NOT NULL,
    reply           text,
    occurred_at     timestamptz,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz,
    archived        boolean NOT NULL DEFAULT false,
    sensitivity     smallint NOT NULL DEFAULT 0,
    source_type     text,
    metadata        jsonb NOT NULL DEFAULT '{}',
    language        text NOT NULL DEFAULT 'und',
    -- memroute's own tokens, space-separated (PostgreSQL has no Japanese or Korean configuration)
    tokens          text NOT NULL,
    context_tokens  text NOT NULL DEFAULT '',
    len_own         integer NOT NULL,
    len_ctx         integer NOT NULL,
    tsv_own         tsvector NOT NULL,
    tsv_ctx         tsvector NOT NULL,
    embedding       vector NOT NULL,
    UNIQUE (owner, id)
);
CREATE INDEX memroute_memories_owner_time ON memroute_memories (owner, occurred_at);
CREATE INDEX memroute_memories_owner_session ON memroute_memories (owner, session_id);
CREATE INDEX memroute_memories_tsv_own ON memroute_memories USING gin (tsv_own);
CREATE INDEX memroute_memories_tsv_ctx ON memroute_memories USING gin (tsv_ctx);

CREATE TABLE memroute_messages (
    id          bigserial PRIMARY KEY,
    owner       text NOT NULL,
    session_id  text NOT NULL,
    role        text NOT NULL,
    text        text NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX memroute_messages_session ON memroute_messages (owner, session_id, id);

CREATE TABLE memroute_state (
    namespace   text NOT NULL,
    owner       text NOT NULL,
    key         text NOT NULL,
    value       jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, owner, key)
);
"""

M002_INLINE_VECTORS = """
-- A 512-d vector (2 kB) is just over the TOAST threshold: out of line, an exact scan reads three pages per
-- row instead of one (5,000 rows: 48 ms against 5 ms, measured). MAIN keeps it in the row; rows written
-- before this migration stay where they are until they are rewritten.
ALTER TABLE memroute_memories ALTER COLUMN embedding SET STORAGE MAIN;
"""

M003_LEXICAL_TABLE = """
-- BM25 ranks every row a query term matches (ts_rank over the GIN bitmap's rows). In memroute_memories each
-- of those rows fills an 8 kB page of its own (the 2 kB inline vector): 36,850 matching rows of a 1M store
-- read 36,000 pages (1.1 s, measured). Here the lexical data and the filter columns BM25 needs sit in a
-- narrow row of their own (~25 to a page). Writes change both tables in one statement; a deleted memory's
-- row goes with it. The dropped columns' space in memroute_memories is reused as rows are rewritten
-- (VACUUM FULL memroute_memories returns it at once).
CREATE TABLE memroute_lexical (
    row_id          bigint PRIMARY KEY REFERENCES memroute_memories (row_id) ON DELETE CASCADE,
    owner           text NOT NULL,
    id              text NOT NULL,
    session_id      text,
    kind            text NOT NULL,
    occurred_at     timestamptz,
    expires_at      timestamptz,
    archived        boolean NOT NULL,
    sensitivity     smallint NOT NULL,
    tokens          text NOT NULL,
    context_tokens  text NOT NULL,
    len_own         integer NOT NULL,
    len_ctx         integer NOT NULL,
    tsv_own         tsvector NOT NULL,
    tsv_ctx         tsvector NOT NULL
);
INSERT INTO memroute_lexical
SELECT row_id, owner, id, session_id, kind, occurred_at, expires_at, archived, sensitivity, tokens, context_tokens,
       len_own, len_ctx, tsv_own, tsv_ctx
FROM memroute_memories ORDER BY row_id;
ALTER TABLE memroute_memories DROP COLUMN tokens, DROP COLUMN context_tokens, DROP COLUMN len_own,
    DROP COLUMN len_ctx, DROP COLUMN tsv_own, DROP COLUMN tsv_ctx;
CREATE INDEX memroute_lexical_tsv_own ON memroute_lexical USING gin (tsv_own);
CREATE INDEX memroute_lexical_tsv_ctx ON memroute_lexical USING gin (tsv_ctx);
ANALYZE memroute_lexical;
"""


def m004_word_parts() -> Generator[Any, Any, None]:
    """Index the parts of hyphenated words: "follow-up" also under "follow" and "followup"
    (:func:`memroute.text.index_terms`). The stored tokens and lengths stay; the ``tsvector`` columns of every
    row with a hyphen in its tokens are rebuilt, a page of rows at a time. Python, not SQL: the parts are
    stemmed by memroute's own English stemmer."""
    from memroute.stores.pg_ops import Many, Sql  # here: pg_ops imports this module
    from memroute.stores.pg_sql import TSV_SQL, terms_text

    after = 0
    while True:
        rows = yield Sql("SELECT row_id, tokens, context_tokens FROM memroute_lexical WHERE row_id > %s AND "
                         "(strpos(tokens, '-') > 0 OR strpos(context_tokens, '-') > 0) ORDER BY row_id LIMIT 2000",
                         (after,))
        if not rows:
            return
        yield Many(f"UPDATE memroute_lexical SET tsv_own = {TSV_SQL}, tsv_ctx = {TSV_SQL} WHERE row_id = %s",
                   [(terms_text(own) or own, terms_text(ctx) or ctx, row_id) for row_id, own, ctx in rows])
        after = rows[-1][0]


def m006_pending_vectors() -> Generator[Any, Any, None]:
    """Memories enter the HNSW graph after their write commits, not in it (pgvector's graph insert took
    4.7-6.3 ms a row, docs/benchmarks.md): ``indexed`` says which part a row is in, the graph covers only
    ``WHERE indexed`` rows and vector search scans the others (``memroute_memories_pending``) exactly. Rows
    written before are in the graph already; the graph, if there is one, is built again as a partial index
    (minutes at a million memories). New rows default to pending: whatever writes a row, search finds it."""
    from memroute.stores.pg_ops import Sql  # here: pg_ops imports this module

    yield Sql("ALTER TABLE memroute_memories ADD COLUMN indexed boolean NOT NULL DEFAULT true")
    yield Sql("ALTER TABLE memroute_memories ALTER COLUMN indexed SET DEFAULT false")
    yield Sql("CREATE INDEX memroute_memories_pending ON memroute_memories (owner) WHERE NOT indexed")
    found = yield Sql("SELECT to_regclass('memroute_memories_embedding') IS NOT NULL")
    if found[0][0]:
        yield Sql("DROP INDEX memroute_memories_embedding")
        yield Sql("CREATE INDEX memroute_memories_embedding ON memroute_memories USING hnsw (embedding "
                  "vector_cosine_ops) WITH (m = 32, ef_construction = 128) WHERE indexed")


Migration = str | Callable[[], Generator[Any, Any, None]]
"""SQL, or an operation (see :mod:`memroute.stores.pg_ops`) for what SQL alone cannot compute."""

MIGRATIONS: tuple[tuple[int, str, Migration], ...] = (
    (1, "initial", M001_INITIAL),
    (2, "inline vectors", M002_INLINE_VECTORS),
    (3, "lexical table", M003_LEXICAL_TABLE),
    (4, "word parts", m004_word_parts),
    (6, "pending vectors", m006_pending_vectors),  # 5 is taken by the BM25 postings (branch pgbm25)
)
