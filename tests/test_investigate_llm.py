"""The query frame extracted by the server's LLM (seed 002's QueryDecomposer), against a scripted
OpenAI-protocol server: a correct answer is used; every failure leaves an empty frame (every slot missing
and guided) in time, and the decision log says which fallback happened."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memroute.cli import main
from memroute.embed import CachedEmbedder
from memroute.errors import InputError
from memroute.investigate import Investigator, Phase, Workspace
from memroute.llm import LlmAssistant, LlmPolicy, OpenAICompatibleLLM
from memroute.stores import open_store
from tests.fake_llm import FakeLLMServer, fake_llm_server
from tests.test_investigate_sessions import make_repo

QUERY = "ログイン機能でパスワードが空のときエラーが出ない"
SLOTS = {"target_feature": {"value": "ログイン機能", "quote": "ログイン機能"},
         "trigger_condition": {"value": "パスワードが空", "quote": "パスワードが空"},
         "observed_issue": {"value": "エラーが出ない", "quote": "エラーが出ない"}}
TIMEOUT = 0.6
MARGIN = 0.6


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    yield from fake_llm_server()


def _inv(tmp_path: Path, db_url: str, embedder: CachedEmbedder, server: FakeLLMServer | None,
         steps: frozenset[str] = frozenset({"slots"})) -> Investigator:
    llm = None
    if server is not None:
        client = OpenAICompatibleLLM(server.url, "fake-model", timeout_s=TIMEOUT, retries=2, backoff_s=0.05)
        llm = LlmAssistant(client, LlmPolicy(steps=steps, step_timeout_s=TIMEOUT, request_timeout_s=2 * TIMEOUT))
    return Investigator(open_store(db_url), Workspace([make_repo(tmp_path / "repo")]), embedder=embedder,
                        owner="alice", llm=llm)


def test_the_llm_extracts_the_frame_and_the_server_validates_it(tmp_path: Path, db_url: str,
                                                                embedder: CachedEmbedder,
                                                                server: FakeLLMServer) -> None:
    inv = _inv(tmp_path, db_url, embedder, server)
    s = inv.start_session(QUERY, "MODIFY")
    server.script.append(("ok", json.dumps(SLOTS)))
    framed = inv.set_query_frame(s.session_id).to_dict()
    # seed 002's own example, with the slots now extracted by the server: MEDIUM, desired_action missing
    assert framed["risk_level"] == "MEDIUM" and framed["missing_slots"] == ["desired_action"]
    assert framed["query_frame"]["target_feature"] == SLOTS["target_feature"]
    assert framed["slots_from"] == "llm" and framed["llm"]["used_llm"] and framed["llm"]["fallback"] is None
    prompt = server.requests[0]["body"]["messages"][-1]["content"]
    assert prompt == s.to_dict()["extraction_prompt"]  # the same prompt an agent would have been given
    record = inv.decision_log(s.session_id, step="set_query_frame")[0]
    assert not record.fallback_triggered and record.detail["llm"]["step"] == "slots"
    inv.store.close()


@pytest.mark.parametrize("script, reason", [
    ([("hang", 30.0)], "timeout"),
    ([("late", 3 * TIMEOUT, json.dumps(SLOTS))], "timeout"),
    ([("status", 500)] * 3, "http_500"),
    ([("status", 429)] * 3, "http_429"),
    ([("raw", b"<html>Welcome to nginx!</html>")], "not_openai"),
    ([("ok", '{"target_feature": {"value": "ログイン')], "contract"),
    ([("ok", "The feature is login and the issue is a missing error.")], "contract"),
    ([("ok", json.dumps({**SLOTS, "desired_action": {"value": "入力チェックを追加", "quote": "チェックを追加して"}}))],
     "contract"),
    ([("huge", 10 * 1024 * 1024)], "too_large"),
])
def test_a_failed_extraction_leaves_every_slot_missing(tmp_path: Path, db_url: str, embedder: CachedEmbedder,
                                                       server: FakeLLMServer, script: list[tuple[Any, ...]],
                                                       reason: str) -> None:
    inv = _inv(tmp_path, db_url, embedder, server)
    s = inv.start_session(QUERY, "MODIFY")
    server.script.extend(script)
    started = time.monotonic()
    framed = inv.set_query_frame(s.session_id).to_dict()
    assert time.monotonic() - started < TIMEOUT + MARGIN
    assert framed["llm"]["fallback"] == reason, framed["llm"]["detail"]
    # Nothing the model said is kept: MODIFY without a target feature is HIGH risk, every slot is guided.
    assert framed["missing_slots"] == ["target_feature", "trigger_condition", "observed_issue", "desired_action"]
    assert framed["risk_level"] == "HIGH" and len(framed["guidance"]) == 4
    assert framed["phase"] == "EXPLORATION"
    record = inv.decision_log(s.session_id, step="set_query_frame")[0]
    assert record.fallback_triggered and record.fallback_reason is not None
    assert record.fallback_reason.startswith(f"LLM slot extraction: {reason} (")
    inv.store.close()


def test_no_llm_or_no_slots_step_is_a_clear_error(tmp_path: Path, db_url: str, embedder: CachedEmbedder,
                                                  server: FakeLLMServer) -> None:
    for inv, message in ((_inv(tmp_path / "a", db_url, embedder, None), "no LLM is configured"),
                         (_inv(tmp_path / "b", db_url, embedder, server, frozenset({"expand"})),
                          "do not include 'slots'")):
        s = inv.start_session(QUERY, "MODIFY")
        with pytest.raises(InputError, match=message):
            inv.set_query_frame(s.session_id)
        assert inv.get_session(s.session_id).phase == Phase.FRAME and server.requests == []
        inv.store.close()


def test_cli_frame_without_slots_asks_the_configured_llm(tmp_path: Path, db_url: str, server: FakeLLMServer,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    repo = str(make_repo(tmp_path / "repo"))
    common = ("--store", db_url, "--owner", "dave", "--repo", repo, "--json")
    assert main(["investigate", "start", QUERY, "--intent", "MODIFY", *common]) == 0
    sid = json.loads(capsys.readouterr().out)["session_id"]
    monkeypatch.setenv("MEMROUTE_LLM_URL", server.url)
    monkeypatch.setenv("MEMROUTE_LLM_MODEL", "fake-model")
    monkeypatch.setenv("MEMROUTE_LLM_STEPS", "slots")
    server.script.append(("ok", json.dumps(SLOTS)))
    assert main(["investigate", "frame", sid, *common]) == 0
    framed = json.loads(capsys.readouterr().out)
    assert framed["risk_level"] == "MEDIUM" and framed["slots_from"] == "llm" and len(server.requests) == 1
    monkeypatch.setenv("MEMROUTE_LLM_STEPS", "expand")
    assert main(["investigate", "frame", sid, *common]) == 1
    assert "do not include 'slots'" in capsys.readouterr().err


@pytest.mark.parametrize(("query", "marker"), [
    ("ログイン機能でパスワードが空のときエラーが出ない", "以下のクエリから情報を抽出してください"),
    ("로그인할 때 비밀번호가 비어 있으면 오류가 안 나와요", "아래 쿼리에서 정보를 추출하세요"),
    ("The login accepts an empty password", "Extract information from the query below"),
])
def test_the_extraction_prompt_is_in_the_language_of_the_query(tmp_path: Path, db_url: str,
                                                               embedder: CachedEmbedder, query: str,
                                                               marker: str) -> None:
    inv = _inv(tmp_path, db_url, embedder, None)
    prompt = inv.start_session(query).to_dict()["extraction_prompt"]
    assert marker in prompt and query in prompt and '"quote"' in prompt
    inv.store.close()
