"""The Memory facade on real SQLite files: round trips, filters, multilingual BM25, bad input, concurrency."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memroute import (
    AsyncMemory,
    InputError,
    Memory,
    ModelMismatchError,
    NotFoundError,
    StoreLockedError,
    StoreReadOnlyError,
)
from memroute.embed import CachedEmbedder, get_embedder

# Any Unicode except NUL (rejected on purpose) and surrogates (not encodable), including emoji and RTL.
any_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1,
                   max_size=200).filter(lambda s: s.strip())


# metadata strings: no NUL either (PostgreSQL's jsonb cannot hold one, so neither store takes it)
meta_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=any_text, reply=st.none() | any_text, meta=st.dictionaries(meta_text, meta_text))
def test_roundtrip_loses_nothing(memory: Memory, text: str, reply: str | None, meta: dict[str, str]) -> None:
    item = memory.remember(text, reply=reply, metadata=meta, kind="episode")
    got = memory.get(item.id)
    assert got == item
    assert got.text == text and got.reply == reply and dict(got.metadata) == meta


def test_rtl_emoji_and_controls(memory: Memory) -> None:
    for text in ("שלום עולם 👋🏽", "مرحبا\u200f", "tab\tand\x01control\x7f", "🎉" * 50):
        assert memory.get(memory.remember(text).id).text == text


def test_japanese_bm25(memory: Memory) -> None:
    target = memory.remember("プロジェクトXは進捗が遅れている")
    memory.remember("今日は天気がいい")
    memory.remember("新しいプロジェクトの予算")
    hits = memory.search("プロジェクトXの進捗", mode="bm25")
    assert hits and hits[0].memory.id == target.id


def test_korean_bm25(memory: Memory) -> None:
    target = memory.remember("지난주에 회의를 했다")
    memory.remember("오늘은 날씨가 좋다")
    memory.remember("다음 주에 여행을 간다")
    hits = memory.search("지난주 회의", mode="bm25")
    assert hits and hits[0].memory.id == target.id


def test_cross_lingual_vector_search(memory: Memory) -> None:
    target = memory.remember("来週の月曜日に田中さんと予算の打ち合わせがある")
    memory.remember("The cat sat on the mat")
    memory.remember("주말에 부산에 간다")
    hits = memory.search("budget meeting next Monday", mode="vector", limit=1)
    assert hits[0].memory.id == target.id


def test_owner_isolation(memory: Memory) -> None:
    secret = memory.remember("alice's private plan about the merger", owner="alice")
    memory.remember("bob's note about lunch", owner="bob")
    for mode in ("bm25", "vector", "hybrid"):
        assert all(h.memory.owner == "bob" for h in memory.search("merger plan", mode=mode, owner="bob"))
    with pytest.raises(NotFoundError):
        memory.get(secret.id, owner="bob")
    assert memory.forget(secret.id, owner="bob") == 0
    assert memory.get(secret.id, owner="alice").id == secret.id


def test_expired_archived_sensitive_never_returned(memory: Memory) -> None:
    now = datetime.now(UTC)
    memory.remember("quarterly budget expired", expires_at=now - timedelta(minutes=1))
    memory.remember("quarterly budget archived", id="arch")
    memory.update("arch", archived=True)
    memory.remember("quarterly budget secret", sensitivity="secret")
    memory.remember("quarterly budget private", sensitivity="private")
    visible = memory.remember("quarterly budget public")
    for mode in ("bm25", "vector", "hybrid"):
        got = {h.memory.text for h in memory.search("quarterly budget", mode=mode)}
        assert got == {visible.text}, mode
        got = {h.memory.text for h in memory.search("quarterly budget", mode=mode, max_sensitivity="private")}
        assert got == {visible.text, "quarterly budget private"}, mode


def test_update_reindexes_and_forget_removes_everywhere(memory: Memory) -> None:
    item = memory.remember("the blue whale is large")
    memory.update(item.id, text="the red fox is quick")
    assert memory.search("whale", mode="bm25") == []
    assert memory.search("fox", mode="bm25")[0].memory.id == item.id
    assert memory.forget(item.id) == 1
    for mode in ("bm25", "vector", "hybrid"):
        assert memory.search("red fox quick", mode=mode) == []


def test_forget_by_session_and_owner(memory: Memory) -> None:
    memory.remember("a", session="s1")
    memory.remember("b", session="s2")
    memory.add_message("s1", "user", "hello")
    assert memory.forget(session="s1") == 1
    assert memory.recent_messages("s1") == []
    with pytest.raises(InputError):
        memory.forget()
    assert memory.forget(everything=True) == 1
    assert memory.list() == []


@pytest.mark.parametrize("bad", ["", "   \n\t", "x\x00y"])
def test_bad_text_rejected(memory: Memory, bad: str) -> None:
    with pytest.raises(InputError):
        memory.remember(bad)
    assert memory.stats().memories == 0


def test_huge_text(memory: Memory) -> None:
    big = "とても長い文章です。" * 100_000  # 1M characters
    item = memory.remember(big)
    assert memory.get(item.id).text == big
    with pytest.raises(InputError, match="limit"):
        memory.remember(big + "!")


def test_bad_fields_rejected_nothing_written(memory: Memory) -> None:
    for kwargs in ({"kind": "diary"}, {"sensitivity": "top"}, {"occurred_at": "yesterday"},
                   {"metadata": ["not", "a", "dict"]}):
        with pytest.raises(InputError):
            memory.remember("hello", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        memory.remember_many([{"text": "fine"}, {"text": ""}])
    assert memory.stats().memories == 0
    report = memory.remember_many([{"text": "fine"}, {"text": ""}, {"txt": "typo"}], skip_invalid=True)
    assert report.stored == 1 and [p for p, _ in report.rejected] == [1, 2]


def test_search_fts_syntax_in_user_text(memory: Memory) -> None:
    memory.remember("near the station and the park")
    for q in ('"unbalanced', "prefix*", "NEAR(a b)", "a AND b", "-minus", "col:value", "))(("):
        memory.search(q)  # never raises


def test_unknown_owner_and_empty_store(memory: Memory) -> None:
    assert memory.search("anything", owner="nobody") == []
    assert memory.list(owner="nobody") == []


def test_other_model_fails_clearly(db_url: str, embedder: CachedEmbedder) -> None:
    Memory.open(db_url, embedder=embedder).remember("hello")  # binds use-m3
    with pytest.raises(ModelMismatchError, match="use-m3"):
        Memory.open(db_url, embedder=get_embedder("e5-small"))


def _writer(url: str, worker: int, n: int) -> None:
    mem = Memory.open(url, owner="shared", embedder=get_embedder("use-m3"))
    for i in range(n):
        mem.remember(f"worker {worker} note {i}", id=f"w{worker}-{i}")
        mem.add_message("log", "user", f"w{worker} {i}")
    mem.close()


def test_two_processes_write_same_file(db_url: str, embedder: CachedEmbedder) -> None:
    Memory.open(db_url, embedder=embedder).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(db_url, w, 40)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    mem = Memory.open(db_url, owner="shared", embedder=embedder)
    assert mem.stats().memories == 80
    assert len(mem.recent_messages("log", limit=100)) == 80
    # the in-memory vector index of a reader sees writes made by other processes
    assert mem.search("worker 1 note 39", mode="vector", limit=1)[0].memory.id.startswith("w1-")
    _writer(db_url, 2, 1)
    assert any(h.memory.id == "w2-0" for h in mem.search("worker 2 note 0", mode="vector", limit=3))


def test_rows_read_before_are_not_served_after_another_connection_changes_them(db_url: str,
                                                                                 embedder: CachedEmbedder) -> None:
    """The store keeps the rows and vectors it read between calls (stores/row_cache.py); a write through another
    connection to the file (another worker process) must show in the next read, and an unchanged row must read
    the same from the cache as from the table."""
    reader = Memory.open(db_url, owner="o", embedder=embedder)
    writer = Memory.open(db_url, owner="o", embedder=embedder)
    item = writer.remember("the spare key is under the blue flowerpot")
    kept = writer.remember("the car is parked on level three")
    before = reader.store.get_vectors([kept.id, item.id], "o")
    assert reader.get(item.id).text == item.text
    assert reader.get(item.id) is reader.get(item.id)  # the second read came from the cache
    writer.update(item.id, text="the spare key is now with the neighbour")
    assert reader.get(item.id).text == "the spare key is now with the neighbour"
    moved = reader.store.get_vectors([kept.id, item.id], "o")
    assert list(moved) == list(before) == sorted([kept.id, item.id])  # the order the query gives, cached or not
    assert np.array_equal(moved[kept.id], before[kept.id])
    assert not np.array_equal(moved[item.id], before[item.id])
    writer.forget(item.id)
    assert reader.store.get([item.id, kept.id], "o") == [reader.get(kept.id)]
    assert list(reader.store.get_vectors([item.id, kept.id], "o")) == [kept.id]
    reader.close()
    writer.close()


def test_locked_database_is_clear_error(tmp_path: Path, embedder: CachedEmbedder) -> None:
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    mem = Memory.open(url, embedder=embedder)
    mem.store._conn.execute("PRAGMA busy_timeout = 100")  # type: ignore[attr-defined]
    other = sqlite3.connect(tmp_path / "locked.db")
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreLockedError, match="locked"):
            mem.remember("blocked write")
    finally:
        other.rollback()
        other.close()
    assert mem.remember("after unlock").text == "after unlock"


def test_read_only_store_is_clear_error(tmp_path: Path, embedder: CachedEmbedder) -> None:
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    item = Memory.open(url, embedder=embedder).remember("kept safe")
    ro = Memory.open(url + "?mode=ro", embedder=embedder)
    assert ro.get(item.id).text == "kept safe"
    assert ro.search("kept safe", limit=1)[0].memory.id == item.id
    with pytest.raises(StoreReadOnlyError, match="read-only"):
        ro.remember("x")
    with pytest.raises(StoreReadOnlyError):
        ro.forget(item.id)
    assert ro.get(item.id).text == "kept safe"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions; the ?mode=ro test covers this path")
def test_read_only_file_permissions_are_clear_error(tmp_path: Path, embedder: CachedEmbedder) -> None:
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    Memory.open(url, embedder=embedder).close()
    for f in tmp_path.iterdir():
        f.chmod(stat.S_IRUSR)
    with pytest.raises(StoreReadOnlyError):
        Memory.open(url, embedder=embedder).remember("x")


async def test_async_memory(db_url: str, embedder: CachedEmbedder) -> None:
    mem = AsyncMemory(Memory.open(db_url, owner="alice", embedder=embedder))
    item = await mem.remember("async hello world")
    assert (await mem.get(item.id)).text == "async hello world"
    assert (await mem.search("hello", mode="bm25"))[0].memory.id == item.id
    assert await mem.forget(item.id) == 1
    await mem.close()


def test_embed_text_is_what_gets_embedded(memory: Memory) -> None:
    plain = memory.remember("Sounds good, see you then!")
    framed = memory.remember("Sounds good, see you then!", embed_text="Dinner at the sushi place in Osaka on Friday? "
                             "Sounds good, see you then!")
    hits = memory.search("sushi dinner in Osaka", mode="vector", limit=2)
    assert hits[0].memory.id == framed.id and hits[1].memory.id == plain.id
    assert memory.get(framed.id).text == "Sounds good, see you then!"  # the stored text is unchanged
    with pytest.raises(InputError):
        memory.remember("x", embed_text="   ")
