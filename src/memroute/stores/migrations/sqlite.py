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

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "initial", M001_INITIAL),
)
