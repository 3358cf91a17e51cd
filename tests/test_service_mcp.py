"""The MCP tools served by the HTTP service at /mcp/, through the `mcp` client: same keys, same owner scoping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from memroute.embed import CachedEmbedder
from tests.service_server import KEYS, Live, live_service, settings_for


@pytest.fixture
def live(tmp_path: Path, embedder: CachedEmbedder) -> Iterator[Live]:
    with live_service(settings_for(tmp_path), embedder) as svc:
        yield svc


def connect(live: Live, key: str | None) -> Client:
    headers = {"Authorization": f"Bearer {KEYS[key]}"} if key else {}
    return Client(streamable_http_client(f"{live.url}/mcp/", http_client=httpx2.AsyncClient(headers=headers)),
                  read_timeout_seconds=60)


def data(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def error(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


async def test_tools_are_listed_and_scoped_by_the_api_key(live: Live) -> None:
    async with connect(live, "alice") as alice:
        names = {t.name for t in (await alice.list_tools()).tools}
        assert {"remember", "recall", "route", "analyze", "forget"} <= names
        mine = data(await alice.call_tool("remember", {"text": "Alice's locker code is 4812"}))
        routed = data(await alice.call_tool("route", {"text": "来週の予定を教えて"}))
        assert routed
    async with connect(live, "bob") as bob:
        assert data(await bob.call_tool("recall", {"text": "locker code"}))["memories"] == []
        assert "alice" in error(await bob.call_tool("recall", {"text": "locker code", "owner": "alice"}))
        assert data(await bob.call_tool("forget", {"ids": [mine["id"]]})) == {"deleted": 0}
    async with connect(live, "both") as both:
        hits = data(await both.call_tool("recall", {"text": "locker code", "owner": "alice"}))["memories"]
        assert [h["id"] for h in hits][:1] == [mine["id"]]
    # the HTTP API sees what MCP wrote, for the right owner only
    assert live.memory.get(mine["id"], owner="alice").text == "Alice's locker code is 4812"


async def test_no_key_and_a_wrong_key_are_refused(live: Live) -> None:
    async with connect(live, None) as anonymous:
        assert "API key" in error(await anonymous.call_tool("recall", {"text": "locker"}))
    headers = {"Authorization": "Bearer not-a-key"}
    async with Client(streamable_http_client(f"{live.url}/mcp/", http_client=httpx2.AsyncClient(headers=headers)),
                      read_timeout_seconds=60) as wrong:
        assert "key" in error(await wrong.call_tool("remember", {"text": "should not be stored"})).lower()
    assert live.memory.list(owner="alice") == []
