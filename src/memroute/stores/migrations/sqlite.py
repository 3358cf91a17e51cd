"""SQLite migrations, applied in order on open; ``PRAGMA user_version`` holds the number applied."""

from __future__ import annotations

M001_INITIAL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE memories (
    rowid        INTEGER PRIMARY KEY,
    owner        TEXT NOT NULL,
    id           TEXT NOT NULL,
    session_id   TEXT,
    kind         TEXT NOT NULL,
    text         TEXT NOT NULL,
    reply        TEXT,
    occurred_at  REAL,
    created_at   REAL NOT NULL,
    expires_at   REAL,
    archived     INTEGER NOT NULL DEFAULT 0,
    sensitivity  INTEGER NOT NULL DEFAULT 0,
    source_type  TEXT,
    metadata     TEXT NOT NULL DEFAULT '{}',
    language     TEXT NOT NULL DEFAULT 'und',
    tokens       TEXT NOT NULL,
    context_tokens TEXT NOT NULL DEFAULT '',
    UNIQUE (owner, id)
);

-- Vectors apart, so that filtering BM25 matches reads narrow rows, not 2 KB blobs.
CREATE TABLE memory_vectors (rowid INTEGER PRIMARY KEY, vector BLOB NOT NULL);
CREATE INDEX memories_owner_time ON memories (owner, occurred_at);
CREATE INDEX memories_owner_session ON memories (owner, session_id);

-- Every changed row, so that other processes can bring their in-memory search index up to date.
CREATE TABLE index_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, row INTEGER NOT NULL, op TEXT NOT NULL);

CREATE TABLE messages (
    id          INTEGER PRIMARY KEY,
    owner       TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    role        TEXT NOT NULL,
    text        TEXT NOT NULL,
    created_at  REAL NOT NULL
);
CREATE INDEX messages_session ON messages (owner, session_id, id);

CREATE TABLE state (
    namespace   TEXT NOT NULL,
    owner       TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  REAL NOT NULL,
    PRIMARY KEY (namespace, owner, key)
);
"""

M002_EXACT_TIMES = """
-- Times as whole microseconds since the epoch (INTEGER), not float seconds (REAL): a float rounds at
-- microsecond resolution, and 9999-12-31T23:59:59.999999Z rounded into a year no reader could load, which
-- failed every owner's search. SQLite cannot change a column's type: the tables are rebuilt, keeping every
-- rowid (the vectors and the index change log refer to them).
CREATE TABLE memories_v2 (
    rowid        INTEGER PRIMARY KEY,
    owner        TEXT NOT NULL,
    id           TEXT NOT NULL,
    session_id   TEXT,
    kind         TEXT NOT NULL,
    text         TEXT NOT NULL,
    reply        TEXT,
    occurred_at  INTEGER,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    archived     INTEGER NOT NULL DEFAULT 0,
    sensitivity  INTEGER NOT NULL DEFAULT 0,
    source_type  TEXT,
    metadata     TEXT NOT NULL DEFAULT '{}',
    language     TEXT NOT NULL DEFAULT 'und',
    tokens       TEXT NOT NULL,
    context_tokens TEXT NOT NULL DEFAULT '',
    UNIQUE (owner, id)
);
INSERT INTO memories_v2
SELECT rowid, owner, id, session_id, kind, text, reply, CAST(round(occurred_at * 1000000) AS INTEGER),
       CAST(round(created_at * 1000000) AS INTEGER), CAST(round(expires_at * 1000000) AS INTEGER), archived,
       sensitivity, source_type, metadata, language, tokens, context_tokens
FROM memories ORDER BY rowid;
DROP TABLE memories;
ALTER TABLE memories_v2 RENAME TO memories;
CREATE INDEX memories_owner_time ON memories (owner, occurred_at);
CREATE INDEX memories_owner_session ON memories (owner, session_id);

CREATE TABLE messages_v2 (
    id          INTEGER PRIMARY KEY,
    owner       TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    role        TEXT NOT NULL,
    text        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
INSERT INTO messages_v2
SELECT id, owner, session_id, role, text, CAST(round(created_at * 1000000) AS INTEGER) FROM messages ORDER BY id;
DROP TABLE messages;
ALTER TABLE messages_v2 RENAME TO messages;
CREATE INDEX messages_session ON messages (owner, session_id, id);
"""

M003_TOKEN_VECTORS = """
-- Late interaction (memroute.embed.tokens): a memory's token vectors, int8 codes with a float16 scale per token
-- (memroute.stores.token_blobs), for embedders that give them; rows written before, or by other embedders, have
-- none. ``ids`` are the encoder's token ids, space-separated.
CREATE TABLE memory_tokens (
    rowid   INTEGER PRIMARY KEY,
    owner   TEXT NOT NULL,
    ids     TEXT NOT NULL,
    codes   BLOB NOT NULL,
    scales  BLOB NOT NULL
);
-- The document frequency of every token id per owner (late interaction's idf), kept by the triggers below on
-- every insert and delete of memory_tokens; token -1 counts the owner's memories with token vectors.
CREATE TABLE token_df (
    owner   TEXT NOT NULL,
    token   INTEGER NOT NULL,
    df      INTEGER NOT NULL,
    PRIMARY KEY (owner, token)
) WITHOUT ROWID;
CREATE TRIGGER memory_tokens_added AFTER INSERT ON memory_tokens BEGIN
    INSERT INTO token_df (owner, token, df)
    SELECT NEW.owner, t, 1 FROM (SELECT DISTINCT CAST(value AS INTEGER) AS t
                                 FROM json_each('[' || replace(trim(NEW.ids), ' ', ',') || ']')
                                 UNION SELECT -1) WHERE true
    ON CONFLICT (owner, token) DO UPDATE SET df = df + 1;
END;
CREATE TRIGGER memory_tokens_removed AFTER DELETE ON memory_tokens BEGIN
    UPDATE token_df SET df = df - 1 WHERE owner = OLD.owner AND token IN (
        SELECT CAST(value AS INTEGER) FROM json_each('[' || replace(trim(OLD.ids), ' ', ',') || ']') UNION SELECT -1);
    DELETE FROM token_df WHERE owner = OLD.owner AND df <= 0 AND token IN (
        SELECT CAST(value AS INTEGER) FROM json_each('[' || replace(trim(OLD.ids), ' ', ',') || ']') UNION SELECT -1);
END;
-- Whatever deletes a memory (forget, an owner's or a session's forget, a replacing write) deletes its tokens.
CREATE TRIGGER memories_tokens_gone AFTER DELETE ON memories BEGIN
    DELETE FROM memory_tokens WHERE rowid = OLD.rowid;
END;
"""

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "initial", M001_INITIAL),
    (2, "exact times", M002_EXACT_TIMES),
    (3, "token vectors", M003_TOKEN_VECTORS),
)
