"""``memroute.Client`` and ``memroute.AsyncClient`` against the real service over real HTTP."""

from __future__ import annotations

import inspect
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from memroute import (
    Agent,
    AsyncClient,
    AsyncMemory,
    AuthError,
    Client,
    Hit,
    InputError,
    Memory,
    MemoryItem,
    MemoryKind,
    Message,
    NotFoundError,
    RateLimitError,
    Sensitivity,
    ServiceError,
)
from memroute.embed import CachedEmbedder
from memroute.retrieval import RecallOptions
from tests.service_server import KEYS, Live, live_service, settings_for


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Live]:
    with live_service(settings_for(tmp_path_factory.mktemp("client")), embedder) as running:
        yield running


@pytest.fixture
def client(live: Live) -> Iterator[Client]:
    with Client(live.url, api_key=KEYS["alice"]) as c:
        yield c


def test_the_clients_have_the_librarys_method_names() -> None:
    library = {n for n, _ in inspect.getmembers(Memory, inspect.isfunction) if not n.startswith("_")}
    library -= {"open", "close", "stats", "filter"}  # local: opening a store, its statistics, a filter object
    library -= {"item_of", "message_of", "records"}  # local: checked records for the store's write_batch (import)
    assert library <= {n for n in dir(Client) if not n.startswith("_")}
    assert library <= {n for n in dir(AsyncClient) if not n.startswith("_")}
    for name in library:
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name
        if hasattr(AsyncMemory, name):
            assert inspect.iscoroutinefunction(getattr(AsyncMemory, name))


def test_memories_round_trip_as_library_types(client: Client) -> None:
    when = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
    item = client.remember("Kenji owns the Atlas rollout", session="c-1", kind=MemoryKind.FACT, occurred_at=when,
                           sensitivity=Sensitivity.PRIVATE, metadata={"source": "standup"}, id="c-mem-1")
    assert isinstance(item, MemoryItem)
    assert (item.id, item.owner, item.kind, item.sensitivity, item.occurred_at) == (
        "c-mem-1", "alice", MemoryKind.FACT, Sensitivity.PRIVATE, when)
    assert client.get("c-mem-1") == item
    naive = client.remember("a naive time is UTC, as in the library", occurred_at=when.replace(tzinfo=None))
    assert naive.occurred_at == when and client.forget(naive.id) == 1
    with pytest.raises(InputError, match="already exists"):
        client.remember("again", id="c-mem-1")
    changed = client.update("c-mem-1", text="Mika owns the Atlas rollout now", sensitivity=0)
    assert (changed.text, changed.sensitivity, changed.session_id) == (
        "Mika owns the Atlas rollout now", Sensitivity.PUBLIC, "c-1")
    hits = client.search("who owns the Atlas rollout", session="c-1")
    assert hits and isinstance(hits[0], Hit) and hits[0].memory.id == "c-mem-1" and hits[0].scores
    assert [m.id for m in client.list(session="c-1", kinds=["fact"])] == ["c-mem-1"]
    assert client.forget("c-mem-1") == 1
    assert client.forget("c-mem-1") == 0  # like the library: nothing to delete is not an error
    with pytest.raises(NotFoundError):
        client.get("c-mem-1")


def test_remember_many_in_batches_reports_positions(client: Client) -> None:
    items = [{"text": f"batch note {i}", "session_id": "c-batch", "id": f"b-{i}"} for i in range(5)]
    items[3]["text"] = ""
    report = client.remember_many(items, batch_size=2, skip_invalid=True)
    assert report.stored == 4 and [pos for pos, _ in report.rejected] == [3]
    assert len(client.list(session="c-batch")) == 4
    with pytest.raises(InputError):
        client.remember_many(items, batch_size=2)
    with pytest.raises(InputError, match="owner"):
        client.remember_many([{"text": "x", "owner": "bob"}])
    assert client.forget(session="c-batch") == 4


def test_messages_turns_and_agents(client: Client) -> None:
    msg = client.add_message("c-chat", "user", "プロジェクトXのデザインレビュー、まだ？")
    assert isinstance(msg, Message) and msg.session_id == "c-chat" and msg.owner == "alice"
    assert [m.text for m in client.recent_messages("c-chat")] == [msg.text]
    client.remember("プロジェクトXの進捗が遅れている。原因はデザインレビューの待ち時間。", session="ja", kind="episode",
                    occurred_at=datetime.now(UTC) - timedelta(days=2))
    r = client.recall("あれどうなった？", session="c-chat", options=RecallOptions(limit=3, strategy="hybrid"))
    assert r["trace"]["strategy"] == "hybrid" and r["trace"]["strategy_forced"] is True
    assert r["memories"] and "プロジェクトX" in r["memories"][0]["text"]
    assert "memory_pack" in r
    history = [Message("h", "user", "この文を中国語に翻訳して", datetime.now(UTC))]
    assert client.analyze("じゃあ英語では？", history)["continuation"] == "follow_up"
    assert client.route("これを韓国語に訳して")["agent"] == "translator"
    assert client.route("Translate 'hi' to Japanese", session="c-route")["action"] == "routed"

    agents = client.list_agents()
    assert agents and all(isinstance(a, Agent) for a in agents)
    weather = client.put_agent(Agent("weather", "Weather", "Forecasts and rain", keywords=("weather", "天気")))
    assert weather.keywords == ("weather", "天気")
    assert "weather" in [a.id for a in client.list_agents()]
    client.delete_agent("weather")
    with pytest.raises(NotFoundError):
        client.delete_agent("weather")
    assert client.health() == {"status": "ready"}


def test_errors_come_back_as_memroute_errors(live: Live) -> None:
    with Client(live.url, api_key="mr_wrong") as wrong, pytest.raises(AuthError) as err:
        wrong.list()
    assert err.value.status == 401
    with Client(live.url, api_key=KEYS["alice"], owner="bob") as other, pytest.raises(AuthError) as err:
        other.get("anything")
    assert err.value.status == 403
    with Client(live.url, api_key=KEYS["alice"]) as c:
        with pytest.raises(InputError):
            c.search("x", limit=10_000)  # 422
        with pytest.raises(InputError):
            c.recall("", now="the day after tomorrow")  # the library's own InputError, from the service
        with pytest.raises(InputError, match="sensitivity"):
            c.remember("x", sensitivity=7)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with Client(f"http://127.0.0.1:{closed}") as c, pytest.raises(ServiceError, match="cannot reach"):
        c.list()


def test_rate_limit_error_carries_retry_after(tmp_path_factory: pytest.TempPathFactory,
                                              embedder: CachedEmbedder) -> None:
    settings = settings_for(tmp_path_factory.mktemp("client-rate"), rate_limit_per_minute=60, rate_limit_burst=1)
    with live_service(settings, embedder) as live, Client(live.url, api_key=KEYS["alice"]) as c:
        c.list()
        with pytest.raises(RateLimitError) as err:
            c.list()
    assert err.value.status == 429 and err.value.retry_after == 1


async def test_async_client_has_the_same_behaviour(live: Live) -> None:
    async with AsyncClient(live.url, api_key=KEYS["both"], owner="bob") as c:
        item = await c.remember("Bob prefers aisle seats on long flights", session="a-1", id="a-mem-1",
                                occurred_at=datetime.now(UTC) - timedelta(days=1))
        assert item.owner == "bob" and (await c.get("a-mem-1")) == item
        assert [h.memory.id for h in await c.search("aisle seat", mode="bm25")] == ["a-mem-1"]
        report = await c.remember_many([{"text": "first"}, {"text": "second"}], batch_size=1)
        assert report.stored == 2
        await c.add_message("a-1", "user", "Translate 'good night' to Korean")
        assert len(await c.recent_messages("a-1")) == 1
        assert (await c.recall("aisle or window?", session="a-1", trace=False))["memories"]
        assert (await c.route("Now to Japanese", session="a-route"))["mode"] == "conversation"
        assert (await c.analyze("先週の会議", now="2025-03-12T15:00:00+09:00"))["time_range"] is not None
        assert (await c.update("a-mem-1", archived=True)).archived
        assert await c.list(session="a-1") == []  # archived memories are left out by default
        assert len(await c.list(session="a-1", include_archived=True)) == 1
        assert await c.forget(everything=True) == 3
        with pytest.raises(NotFoundError):
            await c.get("a-mem-1")
        with pytest.raises(AuthError):
            await c.list(owner="carol")
