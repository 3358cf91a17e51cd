"""The MCP tools served by the HTTP service at /mcp/, through the `mcp` client: same keys, same owner scoping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
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


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("key", [None, "not-a-key"])
def test_every_mcp_request_needs_a_valid_key(live: Live, key: str | None) -> None:
    headers = MCP_HEADERS | ({"Authorization": f"Bearer {key}"} if key else {})
    for message in (INITIALIZE, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "analyze", "arguments": {"text": "what did we decide?"}}},
                    {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                     "params": {"name": "remember", "arguments": {"text": "should not be stored"}}}):
        r = httpx.post(f"{live.url}/mcp/", json=message, headers=headers)
        assert r.status_code == 401, (message["method"], r.text)
        assert r.json()["type"] == "AuthError" and r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{live.url}/mcp/", headers=headers).status_code == 401  # the event stream too
    assert live.memory.list(owner="alice") == []


def test_the_key_may_come_in_either_header(live: Live) -> None:
    r = httpx.post(f"{live.url}/mcp/", json=INITIALIZE, headers=MCP_HEADERS | {"X-API-Key": KEYS["alice"]})
    assert r.status_code == 200 and "memroute" in r.text  # the other header works as on the API
