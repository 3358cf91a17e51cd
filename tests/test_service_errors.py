"""An unexpected error inside the service: one 500 with the request id, one logged trace, the connection kept.

The fault is real: a store whose listing raises an exception no handler knows, served by uvicorn over a
real socket, with a keep-alive client that must reuse its connection for the next request.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memroute import Memory
from memroute.cli.demo import demo_agents
from memroute.embed import CachedEmbedder
from memroute.service.app import create_app
from memroute.stores import open_store
from tests.service_server import auth, serving, settings_for


class BrokenListing:
    """A real SQLite store whose ``list_memories`` fails the way a bug would (not a ``MemrouteError``)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def list_memories(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected fault: a bug in the store")


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[Records]:
    """Every record of the server's and memroute's loggers (uvicorn's do not propagate to the root)."""
    handler = Records()
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "memroute")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


def _local_port(response: httpx.Response) -> int:
    """The client-side port of the connection that carried ``response``."""
    return int(response.extensions["network_stream"].get_extra_info("client_addr")[1])


def test_an_unexpected_error_is_one_500_on_a_connection_that_stays_open(
        tmp_path: Path, embedder: CachedEmbedder, records: Records) -> None:
    settings = settings_for(tmp_path)
    memory = Memory(BrokenListing(open_store(settings.store)), embedder, settings)
    try:
        app = create_app(settings, memory, agents=demo_agents())
        with serving(app, settings) as url, httpx.Client(base_url=url, headers=auth("alice"), timeout=30) as http:
            first = http.get("/healthz")
            assert first.status_code == 200
            assert first.headers["x-request-id"]
            stored = http.post("/v1/memories", json={"text": "the launch moved to Friday"})
            assert stored.status_code == 201, stored.text

            failed = http.get("/v1/memories", headers={"X-Request-ID": "probe-42"})
            assert failed.status_code == 500
            body = failed.json()
            assert body["type"] == "InternalError"
            assert body["detail"] == {"request_id": "probe-42"}
            assert "injected" not in failed.text and "Traceback" not in failed.text
            assert failed.headers["x-request-id"] == "probe-42"
            assert "close" not in failed.headers.get("connection", "")

            after = http.get("/v1/memories/" + stored.json()["id"])  # the next request, same connection
            assert after.status_code == 200
            assert _local_port(first) == _local_port(failed) == _local_port(after)

            hostile = http.get("/healthz", headers={"X-Request-ID": "x\tz" * 40})
            assert hostile.headers["x-request-id"] != "x\tz" * 40  # not echoed: a fresh id instead
    finally:
        memory.close()
    traced = [r for r in records.records if r.exc_info]
    assert len(traced) == 1, [r.getMessage() for r in traced]
    assert "probe-42" in traced[0].getMessage()
    assert isinstance(traced[0].exc_info[1], RuntimeError)  # type: ignore[index]
