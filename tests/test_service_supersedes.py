"""``supersedes`` over HTTP: a real server on a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from memroute.embed import CachedEmbedder
from tests.service_server import auth, live_service, settings_for


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[httpx.Client]:
    with live_service(settings_for(tmp_path_factory.mktemp("supersedes")), embedder) as running, \
            httpx.Client(base_url=running.url, headers=auth("alice"), timeout=30) as client:
        yield client


def test_a_memory_created_with_supersedes_wins_over_the_older_one(http: httpx.Client) -> None:
    old = http.post("/v1/memories", json={"id": "gym-old", "text": "My gym is FitLab on Canal Road",
                                          "occurred_at": "2025-01-05T10:00:00Z"})
    assert old.status_code == 201, old.text
    new = http.post("/v1/memories", json={"id": "gym-new", "text": "My gym is now Peak Club near the station",
                                          "occurred_at": "2025-06-01T10:00:00Z", "supersedes": ["gym-old"]})
    assert new.status_code == 201, new.text
    assert new.json()["metadata"]["supersedes"] == ["gym-old"]
    out = http.post("/v1/recall", json={"text": "Which gym do I go to?", "now": "2025-06-18T09:00:00Z"}).json()
    ids = [m["id"] for m in out["memories"]]
    assert ids.index("gym-new") < ids.index("gym-old")
    assert out["trace"]["superseded"] == {"gym-old": "gym-new"}
    assert next(m for m in out["memories"] if m["id"] == "gym-old")["superseded_by"] == "gym-new"


def test_supersedes_naming_nothing_is_a_clear_error_and_stores_nothing(http: httpx.Client) -> None:
    r = http.post("/v1/memories", json={"id": "x1", "text": "I moved to Lyon", "supersedes": ["missing"]})
    assert r.status_code == 404, r.text  # a reference to nothing, as for GET
    assert "supersedes" in r.text
    assert http.get("/v1/memories/x1").status_code == 404
