"""Shared fixtures: real SQLite files in a temporary directory, the real default embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memroute import Memory
from memroute.embed import CachedEmbedder, get_embedder
from tests.pg_server import PgServer, pg_server_fixture


@pytest.fixture(scope="session")
def embedder() -> CachedEmbedder:
    return get_embedder("use-m3")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    yield from pg_server_fixture()


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'memroute.db'}"


@pytest.fixture
def memory(db_url: str, embedder: CachedEmbedder) -> Iterator[Memory]:
    mem = Memory.open(db_url, owner="alice", embedder=embedder)
    yield mem
    mem.close()
