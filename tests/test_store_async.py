"""The asyncio PostgreSQL store and AsyncMemory on it, against a real embedded PostgreSQL.

The store contract itself runs against the async store in test_store_conformance.py (``postgres-async``).
Here: many tasks on one event loop, a server that goes away, closing the pool, and AsyncMemory's native
path giving the same answers as the sync Memory on the same database.
"""

from __future__ import annotations

import asyncio

import numpy as np
import psycopg
import pytest

from memroute import Memory, StoreError
from memroute.embed import CachedEmbedder
from memroute.memory import AsyncMemory
from memroute.retrieval import RecallOptions, recall, recall_async
from memroute.stores import MemoryRecord, open_async_store
from memroute.stores.postgres_async import AsyncPostgresStore
from memroute.types import MemoryItem, SearchFilter
from tests.pg_server import PgServer

DIM = 8


def _db_name(url: str) -> str:
    return url.split("?")[0].rsplit("/", 1)[1]


def _rec(mid: str, token: str, seed: int, owner: str = "o") -> MemoryRecord:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return MemoryRecord(MemoryItem(id=mid, owner=owner, text=token), [token, "shared"], v / np.linalg.norm(v))


def _backends(admin_url: str, url: str, exclude: list[int] | None = None) -> list[int]:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> ALL(%s)",
                            (_db_name(url), exclude or [])).fetchall()
    return [r[0] for r in rows]


def _terminate(admin_url: str, pids: list[int]) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) pid", (pids,))


async def test_many_tasks_on_one_loop_lose_nothing_and_see_their_own_writes(pg_server: PgServer) -> None:
    store = await open_async_store(pg_server.new_database())
    await store.bind_model("m", DIM)
    tasks, per_task = 40, 15  # 40 tasks share the pool's 8 connections

    async def worker(t: int) -> list[str]:
        seen = []
        for i in range(per_task):
            token = f"task{t}item{i}"
            await store.upsert([_rec(f"{t}-{i}", token, t * 1000 + i, owner=f"owner{t % 4}")])
            hits = await store.search_bm25([token], SearchFilter(owner=f"owner{t % 4}"), 5)
            seen.extend(h.id for h in hits)
            vec = (await store.get_vectors([f"{t}-{i}"], f"owner{t % 4}"))[f"{t}-{i}"]
            top = await store.search_vector(vec, SearchFilter(owner=f"owner{t % 4}"), 1)
            assert top[0].id == f"{t}-{i}"
        return seen

    results = await asyncio.gather(*(worker(t) for t in range(tasks)))
    for t, seen in enumerate(results):
        assert seen == [f"{t}-{i}" for i in range(per_task)]  # each search found exactly its own write
    assert await store.count() == tasks * per_task
    ids = {rec.memory.id async for rec in store.iter_records(batch_size=97)}
    assert ids == {f"{t}-{i}" for t in range(tasks) for i in range(per_task)}
    assert sum([await store.count(f"owner{k}") for k in range(4)]) == tasks * per_task
    await store.close()


async def test_server_going_away_mid_request_fails_cleanly_then_reconnects(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    store = await open_async_store(url)
    await store.bind_model("m", DIM)
    await store.upsert([_rec("a", "alpha", 1)])
    with psycopg.connect(url) as blocker:
        # the write waits for the lock: it is in flight on the server when its connection is terminated
        blocker.execute("LOCK TABLE memroute_memories IN ACCESS EXCLUSIVE MODE")
        mine = blocker.execute("SELECT pg_backend_pid()").fetchone()
        assert mine is not None
        write = asyncio.create_task(store.upsert([_rec("b", "beta", 2)]))
        for _ in range(100):
            await asyncio.sleep(0.05)
            with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
                waiting = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type "
                                       "= 'Lock'", (_db_name(url),)).fetchone()
            if waiting and waiting[0]:
                break
        assert waiting and waiting[0], "the write never reached the server"
        _terminate(pg_server.admin_url, _backends(pg_server.admin_url, url, exclude=[mine[0]]))
        with pytest.raises(StoreError, match=r"cannot reach PostgreSQL|terminat"):
            await write
        blocker.rollback()
    flt = SearchFilter(owner="o")
    assert [h.id for h in await store.search_bm25(["alpha"], flt, 5)] == ["a"]  # the next call reconnects
    assert await store.get(["b"], "o") == []  # nothing half-written
    assert await store.search_bm25(["beta"], flt, 5) == []
    await store.upsert([_rec("b", "beta", 2)])
    assert [h.id for h in await store.search_bm25(["beta"], flt, 5)] == ["b"]
    await store.close()


async def test_pool_closes_cleanly(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    store = await AsyncPostgresStore.open(url, min_connections=3)
    await store.bind_model("m", DIM)
    await asyncio.gather(*(store.count() for _ in range(10)))
    assert len(_backends(pg_server.admin_url, url)) >= 3
    await store.close()
    for _ in range(50):  # the server notices closed connections a moment later
        if not _backends(pg_server.admin_url, url):
            break
        await asyncio.sleep(0.05)
    assert _backends(pg_server.admin_url, url) == []
    with pytest.raises(StoreError, match="closed"):
        await store.count()
    await store.close()  # a second close is harmless


async def test_bad_url_and_sqlite_are_clear(pg_server: PgServer) -> None:
    from memroute.errors import ConfigError

    with pytest.raises(StoreError, match="nobody_here"):
        await open_async_store(pg_server.new_database().replace("postgres:@", "nobody_here:@", 1))
    with pytest.raises(ConfigError, match="worker threads"):
        await open_async_store("sqlite://:memory:")


async def test_async_memory_on_postgres_is_native_and_answers_as_the_sync_memory(
        pg_server: PgServer, embedder: CachedEmbedder) -> None:
    url = pg_server.new_database()
    amem = await AsyncMemory.open(url, owner="alice", embedder=embedder)
    assert isinstance(amem.store, AsyncPostgresStore) and amem.sync is None
    texts = ["Kenji moved the Atlas launch to March 3", "The Atlas budget review is on Friday",
             "Mina prefers window seats on long flights", "プロジェクトXの締切は来週の金曜日",
             "다음 주 회의는 부산에서 열립니다", "Kenji's daughter starts school in April"]
    report = await amem.remember_many([{"text": t, "session": f"s{i % 2}"} for i, t in enumerate(texts)])
    assert report.stored == len(texts)
    note = await amem.remember("Atlas retro notes are in the wiki", session="s1")
    assert (await amem.update(note.id, text="Atlas retro notes moved to the drive")).text.endswith("drive")
    await amem.add_message("s1", "user", "When is the Atlas launch?")
    assert [m.text for m in await amem.recent_messages("s1")] == ["When is the Atlas launch?"]
    assert len(await amem.list()) == len(texts) + 1
    # many recalls and searches at once on one loop
    queries = ["When is the Atlas launch?", "seat preference", "締切はいつ", "회의 장소", "Kenji family"]
    opts = RecallOptions(llm=False)
    recalls = await asyncio.gather(*(amem.recall(q, session="s1", options=opts) for q in queries))
    searches = await asyncio.gather(*(amem.search(q, limit=3) for q in queries))
    with Memory.open(url, owner="alice", embedder=embedder) as mem:
        for q, r, s in zip(queries, recalls, searches, strict=True):
            want = mem.recall(q, session="s1", options=opts)
            assert [(m.memory.id, round(m.score, 6)) for m in r.memories] == \
                [(m.memory.id, round(m.score, 6)) for m in want.memories], q
            assert r.trace.strategy == want.trace.strategy
            assert [(h.memory.id, round(h.score, 6)) for h in s] == \
                [(h.memory.id, round(h.score, 6)) for h in mem.search(q, limit=3)], q
        # the module-level pipeline on an async store answers as on a sync one
        assert amem.store is not None
        now = "2026-11-24T12:00:00+00:00"
        direct = await recall_async(amem.store, embedder, queries[0], owner="alice", now=now, options=opts)
        want = recall(mem.store, embedder, queries[0], owner="alice", now=now, options=opts)
        assert direct.memories and [(m.memory.id, round(m.score, 6)) for m in direct.memories] == \
            [(m.memory.id, round(m.score, 6)) for m in want.memories]
    assert (await amem.stats()).memories == len(texts) + 1
    assert await amem.forget(session="s0") == 3
    assert await amem.forget(note.id) == 1
    await amem.close()


async def test_async_memory_on_sqlite_stays_on_threads(tmp_path: object, embedder: CachedEmbedder) -> None:
    amem = await AsyncMemory.open(f"sqlite:///{tmp_path}/a.db", owner="alice", embedder=embedder)
    assert amem.store is None and isinstance(amem.sync, Memory)
    item = await amem.remember("thread-backed store")
    assert (await amem.search("thread-backed", mode="bm25"))[0].memory.id == item.id
    await amem.close()
