"""Stores: one protocol, backends chosen by URL through :func:`open_store`.

- ``sqlite:///relative/path.db`` and ``sqlite:////absolute/path.db`` (three slashes, then the path, as in
  SQLAlchemy): the embedded default; add ``?mode=ro`` to open an existing file read-only.
- ``sqlite://:memory:``: a throw-away store in this process.
- ``postgresql://user:password@host:5432/dbname``: PostgreSQL 14+ with pgvector
  (``pip install 'memroute[postgres]'``).
"""

from __future__ import annotations

from memroute.errors import ConfigError
from memroute.stores.base import AsyncStore, MemoryRecord, StateEntry, Store, StoreStats


def open_store(url: str, busy_timeout_ms: int = 5000) -> Store:
    """Open (creating and migrating if needed) the store a URL names."""
    if url in ("sqlite://:memory:", "sqlite:///:memory:", ":memory:"):
        from memroute.stores.sqlite import SQLiteStore

        return SQLiteStore(":memory:", busy_timeout_ms)
    if url.startswith("sqlite:///"):
        from memroute.stores.sqlite import SQLiteStore

        path, _, query = url[len("sqlite:///") :].partition("?")
        if not path:
            raise ConfigError(f"store URL {url!r} names no file; example: sqlite:///data/memroute.db")
        if query not in ("", "mode=ro", "mode=rw"):
            raise ConfigError(f"store URL {url!r}: the only option is ?mode=ro (read-only)")
        return SQLiteStore(path, busy_timeout_ms, read_only=query == "mode=ro")
    if is_postgres_url(url):
        from memroute.stores.postgres import PostgresStore

        return PostgresStore(url)
    raise ConfigError(f"unknown store URL {url!r}; use sqlite:///path/memroute.db, sqlite://:memory: or "
                      "postgresql://user:password@host/dbname")


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///`` store URL; None for any other URL and for an in-memory store."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///") :].partition("?")[0]
    return path if path and path != ":memory:" else None


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


async def open_async_store(url: str) -> AsyncStore:
    """Open (creating and migrating if needed) a store with native asyncio I/O: PostgreSQL only."""
    if not is_postgres_url(url):
        raise ConfigError(f"store URL {url!r}: only postgresql:// stores have an asyncio driver; SQLite runs in "
                          "worker threads (AsyncMemory does that by itself)")
    from memroute.stores.postgres_async import AsyncPostgresStore

    return await AsyncPostgresStore.open(url)


__all__ = ["AsyncStore", "MemoryRecord", "StateEntry", "Store", "StoreStats", "is_postgres_url", "open_async_store",
           "open_store"]
