"""The MCP server, through the `mcp` client: over stdio against `memroute mcp` as a subprocess (a real SQLite
file), and over streamable HTTP on loopback with a per-request owner scope."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver.exceptions import ToolError
from starlette.requests import Request

import memroute.data
from memroute import Memory
from memroute.embed import CachedEmbedder
from memroute.errors import AuthError
from memroute.mcp import create_mcp_server, mcp_http_app, single_owner
from memroute.mcp.server import guard

MEMROUTE = str(Path(sys.executable).parent / "memroute")
AGENTS = str(Path(memroute.data.__file__).parent / "demo_agents.toml")
MEMORY_TOOLS = {"remember", "recall", "route", "analyze", "forget"}


def _server(db_url: str, owner: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=MEMROUTE, args=["mcp", "--store", db_url, "--owner", owner, *extra])


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    return data


def _error(result: Any) -> str:
    assert result.is_error, result.structured_content
    text: str = result.content[0].text
    return text


@pytest.mark.slow
async def test_stdio_tools_list_call_and_errors(db_url: str, embedder: CachedEmbedder) -> None:
    with Memory.open(db_url, owner="bob", embedder=embedder) as mem:
        bob = mem.remember("Bob's locker code is 4711", kind="fact", occurred_at="2025-01-10T09:00:00Z")
    async with Client(_server(db_url, "alice", "--agents", AGENTS), read_timeout_seconds=120) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == MEMORY_TOOLS  # no --repo: no investigation tools
        for tool in tools.values():
            assert tool.description and len(tool.description) > 60
            assert tool.input_schema["type"] == "object"
        assert tools["recall"].input_schema["required"] == ["text"]
        assert tools["remember"].input_schema["properties"]["kind"]["enum"] == ["note", "fact", "episode", "message"]

        stored = _data(await client.call_tool("remember", {"text": "プロジェクトXの締切は3月末", "kind": "fact",
                                                          "session": "s1"}))
        _data(await client.call_tool("remember", {"text": "I prefer green tea in the afternoon"}))
        recalled = _data(await client.call_tool("recall", {"text": "プロジェクトXの締切はいつ？"}))
        assert recalled["memories"][0]["id"] == stored["id"]
        assert all(m["id"] != bob.id for m in recalled["memories"])
        assert "[EPISODE_EVIDENCE]" in recalled["memory_pack"] or not recalled["should_inject"]

        routed = _data(await client.call_tool("route", {"text": "これを英語に翻訳して", "session": "chat-1"}))
        assert routed["agent"] == "translator"
        follow = _data(await client.call_tool("route", {"text": "じゃあ韓国語では？", "session": "chat-1"}))
        assert follow["agent"] == "translator" and follow["action"] in ("stayed", "routed")
        ranked = _data(await client.call_tool("route", {"text": "Book a meeting with Kenji tomorrow", "top_k": 2}))
        assert ranked["agent"] == "calendar" and len(ranked["scores"]) == 2

        analysed = _data(await client.call_tool("analyze", {"text": "あれどうなった？", "recent_messages": [
            {"role": "user", "text": "プロジェクトXの進捗を教えて"}]}))
        assert analysed["language"] == "ja" and analysed["needs_context"] is True
        assert analysed["references"][0]["surface"] == "あれ"

        assert _data(await client.call_tool("forget", {"ids": [stored["id"]]})) == {"deleted": 1}
        assert _data(await client.call_tool("forget", {"session": "s1"})) == {"deleted": 0}

        # bad arguments come back as tool errors, and the server keeps serving
        assert "text" in _error(await client.call_tool("recall", {}))
        assert "at least 1 character" in _error(await client.call_tool("remember", {"text": ""}))
        assert "kind" in _error(await client.call_tool("remember", {"text": "x", "kind": "poem"}))
        assert "limit" in _error(await client.call_tool("recall", {"text": "tea", "limit": 0}))
        assert "either ids or a session" in _error(await client.call_tool("forget", {}))
        assert "ISO 8601" in _error(await client.call_tool("remember", {"text": "x", "occurred_at": "yesterday"}))
        assert "NUL" in _error(await client.call_tool("remember", {"text": "a\x00b"}))
        assert _data(await client.call_tool("recall", {"text": "green tea"}))["memories"]


@pytest.mark.slow
async def test_stdio_owner_scoping(db_url: str, embedder: CachedEmbedder) -> None:
    with Memory.open(db_url, owner="bob", embedder=embedder) as mem:
        secret = mem.remember("Bob's bank PIN is 9321", kind="fact", session="bob-s",
                              occurred_at="2025-01-10T09:00:00Z")
    async with Client(_server(db_url, "alice"), read_timeout_seconds=120) as client:
        found = _data(await client.call_tool("recall", {"text": "Bob's bank PIN", "max_sensitivity": "secret"}))
        assert found["memories"] == []
        for tool, args in [("recall", {"text": "Bob's bank PIN"}), ("forget", {"ids": [secret.id]}),
                           ("remember", {"text": "planted"}), ("route", {"text": "hi"})]:
            message = _error(await client.call_tool(tool, {**args, "owner": "bob"}))
            assert "AuthError" in message and "'alice' only" in message
        assert _data(await client.call_tool("forget", {"ids": [secret.id]})) == {"deleted": 0}
        assert _data(await client.call_tool("forget", {"session": "bob-s"})) == {"deleted": 0}
        assert _data(await client.call_tool("recall", {"text": "Bob PIN", "owner": "alice"}))["memories"] == []
    with Memory.open(db_url, owner="bob", embedder=embedder) as mem:
        assert mem.get(secret.id).text == "Bob's bank PIN is 9321"  # nothing leaked, nothing deleted
        assert mem.list(owner="alice") == []


# ------------------------------------------------------------------------------ streamable HTTP
KEYS = {"key-a": "alice", "key-b": "bob"}


def _scope(request: Request | None, requested: str | None) -> str:
    """What the HTTP service does: the API key decides the owner."""
    key = request.headers.get("x-api-key") if request is not None else None
    if key not in KEYS:
        raise AuthError("an API key is required", status=401)
    owner = KEYS[key]
    if requested not in (None, owner):
        raise AuthError(f"this API key may not act for owner {requested!r}", status=403)
    return owner


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server(db_url: str, embedder: CachedEmbedder) -> Iterator[str]:
    mem = Memory.open(db_url, embedder=embedder)
    app = mcp_http_app(create_mcp_server(mem, None, _scope), path="/mcp")
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)
    mem.close()


async def test_streamable_http_scope_per_request(http_server: str) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    def connect(key: str | None) -> Client:
        headers = {"x-api-key": key} if key else {}
        return Client(streamable_http_client(http_server, http_client=httpx2.AsyncClient(headers=headers)),
                      read_timeout_seconds=60)

    async with connect("key-a") as alice:
        mine = _data(await alice.call_tool("remember", {"text": "Alice parks on level 3"}))
    async with connect("key-b") as bob:
        assert _data(await bob.call_tool("recall", {"text": "where does Alice park"}))["memories"] == []
        assert _data(await bob.call_tool("forget", {"ids": [mine["id"]]})) == {"deleted": 0}
        assert "may not act for owner 'alice'" in _error(await bob.call_tool(
            "recall", {"text": "Alice parks", "owner": "alice"}))
    async with connect(None) as anonymous:
        assert "API key is required" in _error(await anonymous.call_tool("recall", {"text": "level 3"}))
    async with connect("key-a") as alice:
        hits = _data(await alice.call_tool("recall", {"text": "where does Alice park"}))["memories"]
        assert [h["id"] for h in hits][:1] == [mine["id"]]
        assert json.dumps(hits, ensure_ascii=False).count("level 3") == 1


@pytest.mark.slow
async def test_cli_streamable_http_on_loopback(db_url: str, embedder: CachedEmbedder) -> None:
    with Memory.open(db_url, owner="bob", embedder=embedder) as mem:
        mem.remember("Bob's locker code is 4711", occurred_at="2025-01-10T09:00:00Z")
    port = _free_port()
    proc = subprocess.Popen([MEMROUTE, "mcp", "--store", db_url, "--owner", "alice", "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
            assert {t.name for t in (await client.list_tools()).tools} == MEMORY_TOOLS
            stored = _data(await client.call_tool("remember", {"text": "Alice's locker code is 1234"}))
            hits = _data(await client.call_tool("recall", {"text": "locker code"}))["memories"]
            assert [h["id"] for h in hits] == [stored["id"]]
    finally:
        proc.terminate()
        proc.wait(10)


def test_guard_turns_failures_into_tool_errors() -> None:
    def broken() -> None:
        raise RuntimeError("secret internals")

    def refused() -> None:
        raise AuthError("no", status=403)

    with pytest.raises(ToolError, match=r"internal error in broken \(RuntimeError\)") as info:
        guard(broken)()
    assert "secret internals" not in str(info.value)
    with pytest.raises(ToolError, match="AuthError: no"):
        guard(refused)()
    with pytest.raises(AuthError, match="needs an owner"):
        single_owner(" ")
