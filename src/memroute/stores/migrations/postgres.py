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


M005_POSTINGS = """
-- BM25 ranked every row a query term matched (a frequent term matches a third of a 1M store: p95 221-279 ms).
-- Postings with a precomputed impact, read best first per (owner, field, term), let a search stop early
-- (memroute.stores.pg_bm25). The impact is BM25's term-frequency part with the memory's length and the
-- reference average length stored as bm25_avgdl: k1 = 1.2, b = 0.75 (memroute.stores.bm25).
CREATE FUNCTION memroute_postings_of(text, bigint, text, text, integer, integer, tsvector, tsvector, float8)
RETURNS TABLE (owner text, field smallint, term text, impact real, row_id bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- tf: the term's count in the tokens plus one per other hyphenated token (whose parts the term may be,
    -- at most once each: memroute.text.hyphen_parts): exact without hyphens, an upper bound with them
    SELECT $1, f.field, t.term, (t.tf * 2.2 / (t.tf + 1.2 * (0.25 + 0.75 * f.len / $9)))::real, $2
    FROM (VALUES (0::smallint, $3, $5, $7), (1::smallint, $4, $6, $8)) f(field, tokens, len, tsv)
    CROSS JOIN LATERAL (
        SELECT lex AS term, (SELECT count(*) FROM unnest(string_to_array(f.tokens, ' ', '')) tok
                             WHERE tok = lex OR (strpos(tok, '-') > 0 AND tok <> lex)) AS tf
        FROM unnest(tsvector_to_array(f.tsv)) lex) t
$$;

CREATE TABLE memroute_postings (
    owner   text NOT NULL,
    field   smallint NOT NULL,  -- 0: the memory's own tokens, 1: its context tokens
    term    text NOT NULL,
    impact  real NOT NULL,
    row_id  bigint NOT NULL
);
INSERT INTO memroute_meta (key, value)
SELECT 'bm25_avgdl', coalesce(nullif(avg(len_own), 0), 10)::float8::text FROM memroute_lexical
ON CONFLICT (key) DO UPDATE SET value = excluded.value;
INSERT INTO memroute_postings
SELECT q.* FROM memroute_lexical r CROSS JOIN LATERAL memroute_postings_of(r.owner, r.row_id, r.tokens,
    r.context_tokens, r.len_own, r.len_ctx, r.tsv_own, r.tsv_ctx,
    (SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl')) q;
CREATE INDEX memroute_postings_term ON memroute_postings (owner, field, term, impact DESC, row_id);

-- Statement-level: a batch of writes changes its postings in one statement. A row's postings are deleted by
-- their whole key, recomputed by the same function from the old row.
CREATE FUNCTION memroute_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memroute_postings SELECT q.* FROM new_rows r CROSS JOIN LATERAL memroute_postings_of(r.owner,
        r.row_id, r.tokens, r.context_tokens, r.len_own, r.len_ctx, r.tsv_own, r.tsv_ctx,
        (SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl')) q;
    RETURN NULL;
END $$;
CREATE FUNCTION memroute_postings_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memroute_postings p USING old_rows r CROSS JOIN LATERAL memroute_postings_of(r.owner, r.row_id,
        r.tokens, r.context_tokens, r.len_own, r.len_ctx, r.tsv_own, r.tsv_ctx,
        (SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl')) q
    WHERE p.owner = q.owner AND p.field = q.field AND p.term = q.term AND p.impact = q.impact
        AND p.row_id = q.row_id;
    RETURN NULL;
END $$;
CREATE FUNCTION memroute_postings_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN  -- the old keys first: an unchanged row's new postings have the same keys
    DELETE FROM memroute_postings p USING old_rows r CROSS JOIN LATERAL memroute_postings_of(r.owner, r.row_id,
        r.tokens, r.context_tokens, r.len_own, r.len_ctx, r.tsv_own, r.tsv_ctx,
        (SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl')) q
    WHERE p.owner = q.owner AND p.field = q.field AND p.term = q.term AND p.impact = q.impact
        AND p.row_id = q.row_id;
    INSERT INTO memroute_postings SELECT q.* FROM new_rows r CROSS JOIN LATERAL memroute_postings_of(r.owner,
        r.row_id, r.tokens, r.context_tokens, r.len_own, r.len_ctx, r.tsv_own, r.tsv_ctx,
        (SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl')) q;
    RETURN NULL;
END $$;
CREATE TRIGGER memroute_postings_insert AFTER INSERT ON memroute_lexical REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memroute_postings_added();
CREATE TRIGGER memroute_postings_update AFTER UPDATE ON memroute_lexical
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memroute_postings_updated();
CREATE TRIGGER memroute_postings_delete AFTER DELETE ON memroute_lexical REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memroute_postings_deleted();
ANALYZE memroute_postings;
"""
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


M007_BLOCKS = """
-- BM25 at 1M memories grouped ~460,000 postings of a long utterance in the server per search (p95 124 ms at
-- load 1). Each (owner, field, term)'s postings are ALSO kept packed, in blocks of up to 65,536: row ids as
-- int8 and impacts as float4 (big-endian, the send functions' bytes, ascending row id), stored uncompressed
-- out of line, so a search fetches a long utterance's lists as a few MB and sums the bounds itself
-- (memroute.stores.pg_bm25). Rows written, updated or deleted since the blocks were built are listed in
-- memroute_blocks_changed (by triggers) and scored exactly by every search; writers fold them into new blocks.
CREATE TABLE memroute_blocks (
    owner   text NOT NULL,
    field   smallint NOT NULL,
    term    text NOT NULL,
    block   integer NOT NULL,
    row_ids bytea NOT NULL,
    impacts bytea NOT NULL,
    PRIMARY KEY (owner, field, term, block)
);
ALTER TABLE memroute_blocks ALTER COLUMN row_ids SET STORAGE EXTERNAL, ALTER COLUMN impacts SET STORAGE EXTERNAL;
CREATE TABLE memroute_blocks_changed (
    owner   text NOT NULL,
    row_id  bigint NOT NULL,
    PRIMARY KEY (owner, row_id)
);
INSERT INTO memroute_blocks
SELECT owner, field, term, (n / 65536)::int, string_agg(int8send(row_id), ''::bytea ORDER BY row_id),
    string_agg(float4send(impact), ''::bytea ORDER BY row_id)
FROM (SELECT p.*, row_number() OVER (PARTITION BY owner, field, term ORDER BY row_id) - 1 AS n
      FROM memroute_postings p) p
GROUP BY owner, field, term, n / 65536;

CREATE FUNCTION memroute_blocks_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memroute_blocks_changed SELECT owner, row_id FROM new_rows ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE FUNCTION memroute_blocks_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memroute_blocks_changed SELECT owner, row_id FROM old_rows ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER memroute_blocks_insert AFTER INSERT ON memroute_lexical REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memroute_blocks_added();
CREATE TRIGGER memroute_blocks_update AFTER UPDATE ON memroute_lexical REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memroute_blocks_added();
CREATE TRIGGER memroute_blocks_delete AFTER DELETE ON memroute_lexical REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memroute_blocks_removed();
ANALYZE memroute_blocks;
"""


M008_LINEAR_TERM_FREQUENCIES = """
-- Migration 5's function counted a term's tokens by scanning every token of the row once per term: a memory
-- of 20,000 distinct words took minutes of server CPU to write. The same counts, from the tokens grouped once:
-- count(tok = term) + (hyphenated tokens) - count(tok = term if the term is hyphenated).
CREATE OR REPLACE FUNCTION memroute_postings_of(text, bigint, text, text, integer, integer, tsvector, tsvector,
                                                float8)
RETURNS TABLE (owner text, field smallint, term text, impact real, row_id bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT $1, f.field, t.term, (t.tf * 2.2 / (t.tf + 1.2 * (0.25 + 0.75 * f.len / $9)))::real, $2
    FROM (VALUES (0::smallint, $3, $5, $7), (1::smallint, $4, $6, $8)) f(field, tokens, len, tsv)
    CROSS JOIN LATERAL (
        WITH g AS (SELECT tok, count(*) AS n FROM unnest(string_to_array(f.tokens, ' ', '')) tok GROUP BY tok),
             h AS (SELECT coalesce(sum(n) FILTER (WHERE strpos(tok, '-') > 0), 0)::bigint AS n FROM g)
        SELECT lex AS term,
               coalesce(g.n, 0) + h.n - CASE WHEN strpos(lex, '-') > 0 THEN coalesce(g.n, 0) ELSE 0 END AS tf
        FROM unnest(tsvector_to_array(f.tsv)) lex CROSS JOIN h LEFT JOIN g ON g.tok = lex) t
$$;
"""

M009_POSTINGS_ROWS_ESTIMATE = """
-- A function returning a set is taken to return 1,000 rows: the delete and update triggers, joining the
-- postings of the rows changed (a transition table, taken as 250 rows: 250,000 postings) to memroute_postings,
-- hashed the whole table instead of probing its index. At 1M memories (9.2M postings) deleting 64 memories took
-- 10.6 s in that trigger, 14 ms with the estimate below (docs/benchmarks.md). A memory has ~10 postings.
ALTER FUNCTION memroute_postings_of(text, bigint, text, text, integer, integer, tsvector, tsvector, float8) ROWS 10;
"""


M010_TOKEN_VECTORS = """
-- Late interaction (memroute.embed.tokens): a memory's token vectors, int8 codes with a float16 scale per token
-- (memroute.stores.token_blobs), for embedders that give them; rows written before, or by other embedders, have
-- none. A deleted memory's row goes with it (ON DELETE CASCADE).
CREATE TABLE memroute_tokens (
    row_id  bigint PRIMARY KEY REFERENCES memroute_memories (row_id) ON DELETE CASCADE,
    owner   text NOT NULL,
    ids     int4[] NOT NULL,
    codes   bytea NOT NULL,
    scales  bytea NOT NULL
);
-- The document frequency of every token id per owner (late interaction's idf), kept by the triggers below on
-- every insert and delete of memroute_tokens (rows are deleted and inserted again, never updated); token -1
-- counts the owner's memories with token vectors.
CREATE TABLE memroute_token_df (
    owner   text NOT NULL,
    token   integer NOT NULL,
    df      integer NOT NULL,
    PRIMARY KEY (owner, token)
);
CREATE FUNCTION memroute_tokens_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memroute_token_df AS d (owner, token, df)
    SELECT owner, token, count(*) FROM (SELECT DISTINCT n.row_id, n.owner, t.token FROM new_rows n
                                        CROSS JOIN LATERAL unnest(n.ids || -1) AS t(token)) u
    GROUP BY owner, token
    ON CONFLICT (owner, token) DO UPDATE SET df = d.df + excluded.df;
    RETURN NULL;
END $$;
CREATE FUNCTION memroute_tokens_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (SELECT owner, token, count(*) AS n FROM (SELECT DISTINCT o.row_id, o.owner, t.token FROM old_rows o
                                                           CROSS JOIN LATERAL unnest(o.ids || -1) AS t(token)) u
                  GROUP BY owner, token)
    UPDATE memroute_token_df d SET df = d.df - gone.n FROM gone WHERE d.owner = gone.owner AND d.token = gone.token;
    DELETE FROM memroute_token_df d
    USING (SELECT DISTINCT o.owner, t.token FROM old_rows o CROSS JOIN LATERAL unnest(o.ids || -1) AS t(token)) g
    WHERE d.owner = g.owner AND d.token = g.token AND d.df <= 0;
    RETURN NULL;
END $$;
-- A memory written again (an upsert's update) loses its token vectors; the write inserts its new ones after.
CREATE FUNCTION memroute_tokens_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memroute_tokens WHERE row_id = NEW.row_id;
    RETURN NULL;
END $$;
CREATE TRIGGER memroute_memories_rewritten AFTER UPDATE OF text ON memroute_memories
    FOR EACH ROW EXECUTE FUNCTION memroute_tokens_stale();
CREATE TRIGGER memroute_tokens_insert AFTER INSERT ON memroute_tokens REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memroute_tokens_added();
CREATE TRIGGER memroute_tokens_delete AFTER DELETE ON memroute_tokens REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memroute_tokens_removed();
"""


Migration = str | Callable[[], Generator[Any, Any, None]]
"""SQL, or an operation (see :mod:`memroute.stores.pg_ops`) for what SQL alone cannot compute."""

MIGRATIONS: tuple[tuple[int, str, Migration], ...] = (
    (1, "initial", M001_INITIAL),
    (2, "inline vectors", M002_INLINE_VECTORS),
    (3, "lexical table", M003_LEXICAL_TABLE),
    (4, "word parts", m004_word_parts),
    (5, "bm25 postings", M005_POSTINGS),
    (6, "pending vectors", m006_pending_vectors),
    (7, "bm25 blocks", M007_BLOCKS),
    (8, "linear term frequencies", M008_LINEAR_TERM_FREQUENCIES),
    (9, "postings rows estimate", M009_POSTINGS_ROWS_ESTIMATE),
    (10, "token vectors", M010_TOKEN_VECTORS),
)
