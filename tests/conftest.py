"""Shared fixtures: real SQLite files in a temporary directory, the real default embedder."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memroute import Memory
from memroute.embed import CachedEmbedder, E5SmallEmbedder, LanguageAwareEmbedder, get_embedder
from tests.pg_server import PgServer, pg_server_fixture


@pytest.fixture(scope="session")
def embedder() -> CachedEmbedder:
    return get_embedder("use-m3")


@pytest.fixture(scope="session")
def aware(embedder: CachedEmbedder) -> LanguageAwareEmbedder:
    """The language-aware encoder (use-m3, plus multilingual-e5-small for Japanese and Korean texts)."""
    e5 = E5SmallEmbedder()
    return LanguageAwareEmbedder(embedder, lambda: e5, e5.model_id, e5.dimension)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    yield from pg_server_fixture()


@pytest.fixture(autouse=True)
def no_indexer_outlives_its_store() -> Iterator[None]:
    """A closed PostgreSQL store has joined its background indexer: none may be running after a test (a test
    that leaves a store open fails here too)."""
    before = {t for t in threading.enumerate() if t.name == "memroute-pg-indexer"}
    yield
    deadline = time.monotonic() + 2.0  # a thread that returned may need a moment to be reaped
    while (left := [t for t in threading.enumerate() if t.name == "memroute-pg-indexer" and t not in before
                    and t.is_alive()]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"{len(left)} memroute-pg-indexer thread(s) still running after the test"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'memroute.db'}"


@pytest.fixture
def memory(db_url: str, embedder: CachedEmbedder) -> Iterator[Memory]:
    mem = Memory.open(db_url, owner="alice", embedder=embedder)
    yield mem
    mem.close()
