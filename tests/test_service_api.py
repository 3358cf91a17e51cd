"""The HTTP API, every endpoint, against the real app served by uvicorn on a loopback port over real HTTP."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.types import Receive, Scope, Send

from memroute import Memory, StoreError
from memroute.cli.demo import demo_agents, demo_items
from memroute.embed import CachedEmbedder
from memroute.service.api import ROUTERS
from memroute.service.app import create_app
from tests.service_server import Live, auth, live_service, serving, settings_for

RECALL_HISTORY = [{"role": "user", "text": "プロジェクトXのデザインレビュー、まだ？"}]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Live]:
    with live_service(settings_for(tmp_path_factory.mktemp("api")), embedder) as running:
        yield running


@pytest.fixture(scope="module")
def http(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, headers=auth("alice"), timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def demo_loaded(http: httpx.Client) -> None:
    """The bundled demo memories, stored for alice through the import endpoint."""
    r = http.post("/v1/memories/import", json={"items": [_wire(i) for i in demo_items()]})
    assert r.status_code == 200, r.text
    assert r.json() == {"stored": len(demo_items()), "rejected": []}


def _wire(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "owner"}


def test_health_readiness_docs_and_schema(live: Live) -> None:
    assert httpx.get(f"{live.url}/healthz").json()["status"] == "ok"
    assert httpx.get(f"{live.url}/readyz").json() == {"status": "ready"}
    assert "swagger" in httpx.get(f"{live.url}/docs", follow_redirects=True).text.lower()
    schema = httpx.get(f"{live.url}/openapi.json").json()
    paths = set(schema["paths"])
    assert {"/v1/memories", "/v1/memories/import", "/v1/memories/{memory_id}", "/v1/search", "/v1/recall",
            "/v1/route", "/v1/analyze", "/v1/agents", "/v1/agents/{agent_id}", "/v1/sessions/{session_id}",
            "/v1/sessions/{session_id}/messages", "/v1/owner", "/healthz", "/readyz", "/metrics"} <= paths
    assert set(schema["paths"]["/v1/memories/{memory_id}"]) == {"get", "patch", "delete"}
    assert "ErrorOut" in schema["components"]["schemas"]


def test_memory_lifecycle(http: httpx.Client) -> None:
    body = {"id": "life-1", "text": "The quarterly budget review is on Friday", "session": "life",
            "kind": "episode", "reply": "Added to your calendar.", "occurred_at": "2026-11-02T09:00:00Z",
            "sensitivity": "private", "metadata": {"source": "test", "n": [1, 2]}}
    r = http.post("/v1/memories", json=body)
    assert r.status_code == 201, r.text
    stored = r.json()
    assert (stored["owner"], stored["kind"], stored["session_id"], stored["sensitivity"], stored["language"]) == (
        "alice", "episode", "life", "private", "en")
    assert stored["metadata"] == {"source": "test", "n": [1, 2]}
    assert stored["occurred_at"].startswith("2026-11-02T09:00:00")

    conflict = http.post("/v1/memories", json=body)
    assert conflict.status_code == 409 and conflict.json()["type"] == "Conflict"
    assert http.post("/v1/memories", params={"replace": "true"}, json=body).status_code == 201

    assert http.get("/v1/memories/life-1").json()["text"] == body["text"]
    patched = http.patch("/v1/memories/life-1", json={"text": "The annual offsite moved to Kyoto", "reply": None})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["text"], patched.json()["reply"], patched.json()["session_id"]) == (
        "The annual offsite moved to Kyoto", None, "life")
    found = http.get("/v1/search", params={"q": "Kyoto offsite", "mode": "bm25", "max_sensitivity": "private"}).json()
    assert [h["memory"]["id"] for h in found] == ["life-1"]
    assert found[0]["scores"]["bm25"] > 0
    old_words = http.get("/v1/search", params={"q": "quarterly budget", "mode": "bm25",
                                               "max_sensitivity": "private"}).json()
    assert "life-1" not in [h["memory"]["id"] for h in old_words]

    listed = http.get("/v1/memories", params={"session": "life", "max_sensitivity": "secret"}).json()
    assert [m["id"] for m in listed] == ["life-1"]
    assert http.get("/v1/memories", params={"session": "life"}).json() == []  # private: above the default

    assert http.delete("/v1/memories/life-1").json() == {"deleted": 1}
    gone = http.get("/v1/memories/life-1")
    assert gone.status_code == 404 and gone.json()["type"] == "NotFoundError"
    assert http.delete("/v1/memories/life-1").status_code == 404


def test_import_skips_or_refuses_invalid_items(http: httpx.Client) -> None:
    items = [{"id": "imp-1", "text": "first imported note", "session": "imp"}, {"id": "imp-2", "text": "   "},
             {"id": "imp-3", "text": "third imported note", "session": "imp", "kind": "fact"}]
    refused = http.post("/v1/memories/import", json={"items": items})
    assert refused.status_code == 400 and "item 1" in refused.json()["message"]
    assert http.get("/v1/memories", params={"session": "imp"}).json() == []  # one transaction: nothing stored
    r = http.post("/v1/memories/import", json={"items": items, "skip_invalid": True}).json()
    assert r["stored"] == 2 and [x["index"] for x in r["rejected"]] == [1]
    assert "empty" in r["rejected"][0]["reason"]
    assert sorted(m["id"] for m in http.get("/v1/memories", params={"session": "imp"}).json()) == ["imp-1", "imp-3"]
    assert [m["id"] for m in http.get("/v1/memories", params={"session": "imp", "kinds": "fact"}).json()] == ["imp-3"]


def test_messages_and_forgetting_a_session(http: httpx.Client) -> None:
    turns = [("user", "こんにちは"), ("assistant", "はい、何でしょう"), ("user", "그거 다시")]
    for i, (role, text) in enumerate(turns):
        r = http.post("/v1/sessions/chat-1/messages", json={"role": role, "text": text,
                                                             "at": f"2026-11-20T10:0{i}:00Z"})
        assert r.status_code == 201 and r.json()["session_id"] == "chat-1"
    recent = http.get("/v1/sessions/chat-1/messages", params={"limit": 2}).json()
    assert [(m["role"], m["text"]) for m in recent] == [("assistant", "はい、何でしょう"), ("user", "그거 다시")]
    http.post("/v1/memories", json={"text": "a memory of chat-1", "session": "chat-1"})
    assert http.delete("/v1/sessions/chat-1").json() == {"deleted": 1}
    assert http.get("/v1/sessions/chat-1/messages").json() == []


@pytest.mark.usefixtures("demo_loaded")
def test_recall_answers_memories_trace_and_pack(http: httpx.Client) -> None:
    r = http.post("/v1/recall", json={"text": "あれどうなった？", "recent_messages": RECALL_HISTORY,
                                      "now": "2026-11-12T09:00:00+09:00"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["memories"], out
    top = out["memories"][0]
    assert top["id"] == "demo-05" and top["relevance"] in ("high", "medium") and top["reason"]
    assert 0 < top["score"] <= 1 and "fused" in top["scores"]
    trace = out["trace"]
    assert trace["strategy"] in ("semantic_only", "keyword_boost", "temporal", "hybrid")
    assert len(trace["queries"]) >= 2  # the message and at least one expansion (あれ resolved)
    assert {"analyse", "search", "rerank"} <= set(trace["stages_ms"])
    assert isinstance(out["memory_pack"], str)
    assert out["should_inject"] == bool(out["memory_pack"])

    forced = http.post("/v1/recall", json={"text": "Atlas release owner", "trace": True,
                                           "options": {"strategy": "keyword_boost", "limit": 2}}).json()
    assert forced["trace"]["strategy"] == "keyword_boost" and forced["trace"]["strategy_forced"] is True
    assert len(forced["memories"]) <= 2
    assert "trace" not in http.post("/v1/recall", json={"text": "Atlas", "trace": False}).json()


def test_route_a_message_and_a_conversation(http: httpx.Client) -> None:
    agents = {a.id for a in demo_agents()}
    one = http.post("/v1/route", json={"text": "これを韓国語に訳して"}).json()
    assert (one["mode"], one["agent"], one["catalogue"]) == ("message", "translator", "default")
    assert {s["agent_id"] for s in one["scores"]} == agents  # every candidate, with its strategies
    assert one["scores"][0]["strategies"] and one["scores"][0]["score"] >= one["scores"][-1]["score"]

    turns = [("Translate 'good morning' to Japanese", "translator", "routed"),
             ("Now to Korean", "translator", "stayed"),
             ("By the way, what's on my calendar tomorrow?", "calendar", "switched")]
    for text, agent, action in turns:
        d = http.post("/v1/route", json={"text": text, "session": "route-chat"}).json()
        assert (d["mode"], d["agent"], d["action"]) == ("conversation", agent, action), d
        assert set(d["scores"]) == agents and d["candidates"][0]["strategies"]
    logged = http.get("/v1/sessions/route-chat/messages").json()
    assert [m["text"] for m in logged] == [t for t, _, _ in turns]
    top2 = http.post("/v1/route", json={"text": "translate this", "top_k": 2}).json()
    assert len(top2["scores"]) == 2


def test_analyze_reads_the_conversation(http: httpx.Client) -> None:
    history = [{"role": "user", "text": "この文を中国語に翻訳して"}, {"role": "assistant", "text": "谢谢"}]
    a = http.post("/v1/analyze", json={"text": "じゃあ英語では？", "recent_messages": history,
                                       "now": "2025-03-12T15:00:00+09:00"}).json()
    assert (a["continuation"], a["needs_context"], a["language"]) == ("follow_up", True, "ja")
    for m in history:
        http.post("/v1/sessions/an-1/messages", json=m)
    from_log = http.post("/v1/analyze", json={"text": "じゃあ英語では？", "session": "an-1"}).json()
    assert from_log["continuation"] == "follow_up"
    week = http.post("/v1/analyze", json={"text": "先週の会議", "now": "2025-03-12T15:00:00+09:00"}).json()
    assert week["time_range"]["start"].startswith("2025-03-03")


def test_agent_catalogue_is_per_owner_and_survives_a_restart(tmp_path: Path, embedder: CachedEmbedder) -> None:
    settings = settings_for(tmp_path)
    agent = {"name": "Weather", "description": "Forecasts, rain and temperature", "keywords": ["weather", "天気"],
             "examples": ["Will it rain tomorrow?"]}
    with live_service(settings, embedder) as live, httpx.Client(base_url=live.url, headers=auth("alice")) as http:
        assert http.get("/v1/agents").json()["source"] == "default"
        assert http.put("/v1/agents/weather", json=agent).status_code == 201
        changed = {**agent, "keywords": ["weather", "天気", "날씨"]}
        assert http.put("/v1/agents/weather", json=changed).status_code == 200
        assert http.put("/v1/agents/weather", json={**agent, "id": "other"}).status_code == 409
        assert http.post("/v1/route", json={"text": "明日の天気は？"}).json()["agent"] == "weather"
        assert http.delete("/v1/agents/coder").json() == {"deleted": 1}
        assert http.delete("/v1/agents/coder").status_code == 404
    with live_service(settings, embedder) as live, httpx.Client(base_url=live.url, headers=auth("alice")) as http:
        catalogue = http.get("/v1/agents").json()
        ids = [a["id"] for a in catalogue["agents"]]
        assert catalogue["source"] == "owner" and "weather" in ids and "coder" not in ids
        weather = next(a for a in catalogue["agents"] if a["id"] == "weather")
        assert weather["keywords"] == ["weather", "天気", "날씨"]
        bob = http.get("/v1/agents", headers=auth("bob")).json()
        assert bob["source"] == "default" and "weather" not in [a["id"] for a in bob["agents"]]


def test_forget_everything_of_an_owner(http: httpx.Client) -> None:
    admin = auth("admin")
    http.post("/v1/memories", params={"owner": "temp-owner"}, json={"text": "short-lived"}, headers=admin)
    http.post("/v1/sessions/s/messages", params={"owner": "temp-owner"}, json={"role": "user", "text": "hi"},
              headers=admin)
    assert http.delete("/v1/owner", params={"owner": "temp-owner"}, headers=admin).json() == {"deleted": 1}
    assert http.get("/v1/memories", params={"owner": "temp-owner"}, headers=admin).json() == []
    assert http.get("/v1/sessions/s/messages", params={"owner": "temp-owner"}, headers=admin).json() == []


@pytest.mark.usefixtures("demo_loaded")
def test_metrics_are_prometheus_text(http: httpx.Client) -> None:
    http.post("/v1/recall", json={"text": "Atlas release"})
    assert http.get("/console/").status_code == 200
    assert http.get("/no-such-page").status_code == 404
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'http_requests_total{method="POST",route="/v1/recall",status="200"}' in text
    assert 'http_requests_total{method="GET",route="/console",status="200"}' in text  # the mount, not the path
    assert 'http_requests_total{method="GET",route="unmatched",status="404"}' in text
    assert "http_request_latency_ms_bucket" in text and "retrieval_latency_ms_bucket" in text


def test_a_mount_and_its_lifespan_are_one_line_each(tmp_path: Path, embedder: CachedEmbedder) -> None:
    events: list[str] = []

    async def extra(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"mounted"})

    @asynccontextmanager
    async def hook() -> AsyncIterator[None]:
        events.append("start")
        yield
        events.append("stop")

    settings = settings_for(tmp_path)
    with Memory.open(settings.store, settings=settings, embedder=embedder) as memory:
        app = create_app(settings, memory)
        app.mount("/extra", extra)
        app.state.lifespans.append(hook)
        with serving(app, settings) as url:
            assert httpx.get(f"{url}/extra/").text == "mounted"
            assert httpx.get(f"{url}/healthz").status_code == 200
            assert events == ["start"]
    assert events == ["start", "stop"]


def test_no_endpoint_or_dependency_is_handed_to_a_thread_of_its_own() -> None:
    """FastAPI runs a plain ``def`` endpoint or dependency in a worker thread, and back: a hand-off of every
    request on top of the one library call (``Service.run``). The ``service_of`` dependency was one, and two
    requests in one worker process waited on each other's hand-offs (docs/benchmarks.md, issue 17 item 4)."""
    in_threads: list[str] = []

    def check(dependant: Dependant, where: str) -> None:
        call = dependant.call
        if call is not None and not (inspect.iscoroutinefunction(call)
                                     or inspect.iscoroutinefunction(type(call).__call__)):  # HTTPBearer()
            in_threads.append(f"{where}: {getattr(dependant.call, '__name__', dependant.call)}")
        for sub in dependant.dependencies:
            check(sub, where)

    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute):
                check(route.dependant, route.path)
    assert in_threads == []


def test_the_app_opens_and_closes_its_own_memory(tmp_path: Path, embedder: CachedEmbedder) -> None:
    catalogue = tmp_path / "agents.toml"
    catalogue.write_text('[[agents]]\nid = "weather"\nname = "Weather"\ndescription = "Forecasts and rain"\n', "utf-8")
    settings = settings_for(tmp_path, agents=str(catalogue))
    app = create_app(settings)  # Memory.open(settings.store), catalogue from the agents setting
    memory = app.state.service.memory
    with serving(app, settings) as url, httpx.Client(base_url=url, headers=auth("alice")) as http:
        assert http.post("/v1/memories", json={"text": "kept in the settings' store"}).status_code == 201
        assert [a["id"] for a in http.get("/v1/agents").json()["agents"]] == ["weather"]
    with pytest.raises(StoreError):  # closed at shutdown
        memory.store.count()
    with Memory.open(settings.store, settings=settings, embedder=embedder) as reopened:
        assert [m.text for m in reopened.list(owner="alice")] == ["kept in the settings' store"]


def test_an_integer_beyond_64_bits_in_metadata_is_refused_and_nothing_is_stored(http: httpx.Client) -> None:
    big = 10**30  # JSON has no integer limit; stores and clients in other languages stop at 64 bits
    r = http.post("/v1/memories", json={"id": "long-invoice", "text": "the invoice number is long",
                                        "metadata": {"n": big}})
    assert r.status_code == 422 and "64-bit" in r.text, r.text
    assert http.get("/v1/memories/long-invoice").status_code == 404
    r = http.post("/v1/memories/import", json={"items": [{"text": "fine"}, {"text": "x", "metadata": {"n": big}}],
                                               "skip_invalid": True})
    assert r.status_code == 200 and r.json()["stored"] == 1, r.text
    assert [(e["index"], "64-bit" in e["reason"]) for e in r.json()["rejected"]] == [(1, True)]


def test_a_logged_reply_is_encoded_before_the_next_routed_turn(http: httpx.Client, live: Live) -> None:
    import time

    cache = live.app.state.service.router.embedder
    assert isinstance(cache, CachedEmbedder)
    reply, user = "明日の会議は10時からに変更しました（返信 41）", "会議の場所も教えて（質問 41）"
    for role, text in (("assistant", reply), ("user", user)):
        assert http.post("/v1/sessions/ahead-1/messages", json={"role": role, "text": text}).status_code == 201
    deadline = time.monotonic() + 20
    while not cache.holds(reply, "query") and time.monotonic() < deadline:
        time.sleep(0.05)  # encoded in the background, after the answer was sent
    assert cache.holds(reply, "query")
    assert not cache.holds(user, "query")  # a user's message is encoded when it is routed, not when logged
