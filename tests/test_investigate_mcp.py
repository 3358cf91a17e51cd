"""One guided investigation driven from start to READY by an MCP client over stdio (`memroute mcp --repo`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.test_investigate_sessions import make_repo

MEMROUTE = str(Path(sys.executable).parent / "memroute")


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    return data


@pytest.mark.slow
async def test_session_from_start_to_ready_over_stdio(tmp_path: Path, db_url: str) -> None:
    repo = make_repo(tmp_path / "repo")
    params = StdioServerParameters(command=MEMROUTE, args=["mcp", "--store", db_url, "--owner", "alice",
                                                           "--repo", str(repo)])
    async with Client(params, read_timeout_seconds=120) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"start_session", "set_query_frame", "submit_understanding", "submit_hypotheses", "verify_hypothesis",
                "get_session", "decision_log", "find_definitions", "find_references", "search_text", "get_symbols",
                "analyze_structure", "query"} <= names

        query = "ログイン機能でパスワードが空のときエラーが出ない"
        start = _ok(await client.call_tool("start_session", {"query": query, "intent": "MODIFY"}))
        sid = start["session_id"]
        assert start["phase"] == "FRAME" and query in start["extraction_prompt"]
        no_llm = await client.call_tool("set_query_frame", {"session_id": sid})
        assert no_llm.is_error and "no LLM is configured" in no_llm.content[0].text
        framed = _ok(await client.call_tool("set_query_frame", {"session_id": sid, "slots": {
            "target_feature": {"value": "ログイン機能", "quote": "ログイン機能"},
            "trigger_condition": {"value": "パスワードが空", "quote": "パスワードが空"},
            "observed_issue": {"value": "エラーが出ない", "quote": "エラーが出ない"},
            "desired_action": {"value": "チェックを追加", "quote": "チェックを追加"}}}))
        assert framed["risk_level"] == "MEDIUM" and framed["rejected"][0]["slot"] == "desired_action"

        defs = _ok(await client.call_tool("find_definitions", {"name": "LoginService.authenticate",
                                                               "session_id": sid}))
        assert [(r["file"], r["line"]) for r in defs["results"]] == [("auth/login_service.py", 14)]
        refs = _ok(await client.call_tool("find_references", {"name": "authenticate", "session_id": sid}))
        assert [(r["file"], r["line"]) for r in refs["results"]] == [("auth/controller.py", 9)]
        outside = await client.call_tool("get_symbols", {"path": "../"})
        assert outside.is_error and "outside the allowed repository roots" in outside.content[0].text
        bad = await client.call_tool("submit_understanding", {"session_id": sid, "symbols": "LoginService"})
        assert bad.is_error

        ready = _ok(await client.call_tool("submit_understanding", {
            "session_id": sid, "symbols": ["LoginService", "AuthController", "PasswordValidator"],
            "entry_points": ["LoginService.authenticate()"], "patterns": ["Service + Validator"],
            "files": ["auth/login_service.py", "auth/controller.py"]}))
        assert ready["phase"] == "READY" and "LoginService" in ready["mapped_symbols"]["target_feature"]

        session = _ok(await client.call_tool("get_session", {"session_id": sid}))
        assert [h["target"] for h in session["history"]] == ["FRAME", "EXPLORATION", "READY"]
        assert session["tool_calls"] == 2 and session["ready_blockers"] == []
        log = _ok(await client.call_tool("decision_log", {"session_id": sid, "format": "jsonl"}))
        steps = [json.loads(line)["step"] for line in log["jsonl"].splitlines()]
        assert steps == ["start_session", "set_query_frame", "tool", "tool", "submit_understanding"]
        ready_log = _ok(await client.call_tool("decision_log", {"session_id": sid, "phase": "READY",
                                                                "risk_level": "MEDIUM"}))
        assert [r["step"] for r in ready_log["records"]] == ["submit_understanding"]
        late = await client.call_tool("set_query_frame", {"session_id": sid, "slots": {}})
        assert late.is_error and "phase READY" in late.content[0].text
        foreign = await client.call_tool("get_session", {"session_id": sid, "owner": "bob"})
        assert foreign.is_error and "AuthError" in foreign.content[0].text
