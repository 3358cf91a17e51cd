"""Times are kept exactly and only in the stated range (:mod:`memroute.times`), on SQLite and PostgreSQL, and a
row that cannot be read never fails another owner's search (issue 19, defect 1).

Before schema version 2, SQLite kept times as float seconds: ``occurred_at="9999-12-31T23:59:59.999999Z"``
rounded into the year 10000 and from then on every owner's search and recall failed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memroute import Memory
from memroute.embed import CachedEmbedder
from memroute.errors import InputError
from memroute.stores import MemoryRecord, open_store
from memroute.stores.migrations.sqlite import M001_INITIAL, MIGRATIONS
from memroute.stores.sqlite import _split_sql
from memroute.text import tokenize
from memroute.times import EARLIEST, LATEST
from memroute.types import MemoryItem, Message, SearchFilter

OUT_OF_RANGE = ["9999-12-31T23:59:59.999999Z", datetime.max, datetime.max.replace(tzinfo=UTC),
                "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", datetime.min, "0001-01-01T00:00:00Z",
                LATEST + timedelta(microseconds=1), EARLIEST - timedelta(microseconds=1)]
EXACT = [EARLIEST, LATEST, datetime(2024, 5, 6, 7, 8, 9, 123457, tzinfo=UTC),
         datetime(1970, 1, 1, tzinfo=UTC) - timedelta(microseconds=1)]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_server").new_database())
    return f"sqlite:///{tmp_path / 'times.db'}"


@pytest.fixture
def mem(url: str, embedder: CachedEmbedder) -> Iterator[Memory]:
    m = Memory.open(url, owner="alice", embedder=embedder)
    m.remember("the quarterly budget review is on friday", id="budget")
    yield m
    m.close()


def assert_alice_unharmed(m: Memory) -> None:
    assert [h.memory.id for h in m.search("budget review", limit=3)] == ["budget"]
    assert [h.memory.id for h in m.recall("when is the budget review?").memories] == ["budget"]
    assert [x.id for x in m.list()] == ["budget"]


@pytest.mark.parametrize("field", ["occurred_at", "created_at", "expires_at"])
def test_a_time_outside_the_range_is_refused_and_other_owners_search_on(mem: Memory, field: str) -> None:
    for bad in OUT_OF_RANGE:
        with pytest.raises(InputError, match="outside the times memroute accepts"):
            if field == "created_at":
                mem.remember_many([{"text": "x", "created_at": bad}], owner="mallory")
            else:
                mem.remember("x", owner="mallory", **{field: bad})
    assert mem.list(owner="mallory", include_expired=True) == []  # nothing written
    assert_alice_unharmed(mem)


def test_message_times_and_filters_at_the_calendar_edges_are_input_errors(mem: Memory) -> None:
    for bad in OUT_OF_RANGE:
        with pytest.raises(InputError):
            mem.add_message("s", "user", "hello", owner="mallory", at=bad)
        with pytest.raises(InputError):
            mem.search("budget", start=bad)
        with pytest.raises(InputError):
            mem.list(end=bad)
        with pytest.raises(InputError):
            mem.recall("budget", now=bad)
    assert mem.recent_messages("s", owner="mallory") == []
    assert_alice_unharmed(mem)


def test_times_are_read_back_exactly(mem: Memory) -> None:
    for i, t in enumerate(EXACT):
        mem.remember_many([{"text": "a note on the edge of time", "id": f"t{i}", "occurred_at": t, "created_at": t,
                            "expires_at": LATEST}], owner="mallory")
        mem.add_message("s", "user", f"turn {i}", owner="mallory", at=t)
    for i, t in enumerate(EXACT):
        got = mem.get(f"t{i}", owner="mallory")
        assert (got.occurred_at, got.created_at, got.expires_at) == (t, t, LATEST)
    assert [m.created_at for m in mem.recent_messages("s", owner="mallory")] == EXACT
    # the range filters compare exact times: one microsecond either side decides
    t = EXACT[2]
    assert [x.id for x in mem.list(owner="mallory", start=t, end=t)] == ["t2"]
    assert mem.list(owner="mallory", start=t + timedelta(microseconds=1), end=t + timedelta(days=1)) == []
    assert [h.memory.id for h in mem.search("edge of time", owner="mallory", mode="bm25", start=t, end=t)] == ["t2"]
    assert mem.search("edge of time", owner="mallory", mode="bm25", end=t - timedelta(microseconds=1),
                      start=t - timedelta(days=1)) == []
    assert_alice_unharmed(mem)


def test_the_store_itself_refuses_a_time_it_cannot_keep(url: str) -> None:
    """Below the facade too (a copy between stores, a caller of the Store protocol): nothing is written."""
    store = open_store(url)
    store.bind_model("m", 4)
    good = MemoryItem(id="ok", owner="o", text="x", created_at=datetime(2025, 1, 1, tzinfo=UTC))
    bad = MemoryItem(id="bad", owner="o", text="x", occurred_at=datetime.max)
    vec = np.ones(4, np.float32) / 2
    with pytest.raises(InputError, match="occurred_at of memory bad"):
        store.upsert([MemoryRecord(good, ["x"], vec), MemoryRecord(bad, ["x"], vec)])
    with pytest.raises(InputError):
        store.add_messages([Message("s", "user", "x", datetime.min.replace(tzinfo=UTC), "o")])
    assert store.count() == 0 and store.recent_messages("s", "o") == []
    store.close()


def make_v1_store(path: Path, embedder: CachedEmbedder) -> None:
    """A store as memroute left it at SQLite schema version 1, times as float seconds, with one memory an older
    memroute accepted: 9999-12-31T23:59:59.999999Z, which rounded to 253402300800.0 (the year 10000)."""
    conn = sqlite3.connect(path)
    for statement in _split_sql(M001_INITIAL):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [("model_id", embedder.model_id),
                                                          ("dimension", str(embedder.dimension))])
    rows = [("alice", "budget", "the quarterly budget review is on friday", 1714979289.123457, None),
            ("alice", "old", "the budget of the old project", -0.000001, 1e11),
            ("mallory", "poison", "x", 253402300800.0, None)]
    for rowid, (owner, mid, text, ts, expires) in enumerate(rows, 1):
        conn.execute("INSERT INTO memories (rowid, owner, id, kind, text, occurred_at, created_at, expires_at, "
                     "language, tokens) VALUES (?, ?, ?, 'note', ?, ?, ?, ?, 'en', ?)",
                     (rowid, owner, mid, text, ts, ts, expires, " ".join(tokenize(text))))
        conn.execute("INSERT INTO memory_vectors VALUES (?, ?)",
                     (rowid, embedder.embed([text], side="passage")[0].tobytes()))
        conn.execute("INSERT INTO index_changes (row, op) VALUES (?, 'c')", (rowid,))
    conn.execute("INSERT INTO messages (owner, session_id, role, text, created_at) VALUES "
                 "('alice', 's', 'user', 'hi', 1714979289.123457)")
    conn.commit()
    conn.close()


def test_an_older_store_is_upgraded_and_its_poisoned_row_no_longer_breaks_search(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    path = tmp_path / "v1.db"
    make_v1_store(path, embedder)
    with Memory.open(f"sqlite:///{path}", owner="alice", embedder=embedder) as mem:
        assert mem.stats().schema_version == MIGRATIONS[-1][0]  # 2 and every later one
        when = datetime(2024, 5, 6, 7, 8, 9, 123457, tzinfo=UTC)
        assert mem.get("budget").occurred_at == when  # float seconds became exact microseconds
        old = mem.get("old")
        assert old.occurred_at == datetime(1970, 1, 1, tzinfo=UTC) - timedelta(microseconds=1)
        assert old.expires_at == datetime(5138, 11, 16, 9, 46, 40, tzinfo=UTC)
        assert [m.created_at for m in mem.recent_messages("s")] == [when]
        assert [h.memory.id for h in mem.search("budget review", limit=3)] == ["budget", "old"]
        assert [h.memory.id for h in mem.recall("when is the budget review?", now=when).memories][:1] == ["budget"]
        # the poisoned row reads (at the calendar's last microsecond) and can be forgotten by its owner
        assert mem.get("poison", owner="mallory").occurred_at == datetime.max.replace(tzinfo=UTC)
        assert mem.forget("poison", owner="mallory") == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        types = {r[0] for r in conn.execute("SELECT DISTINCT typeof(occurred_at) FROM memories")}
        assert types == {"integer"}


def test_a_row_that_cannot_be_read_is_left_out_of_other_owners_searches(tmp_path: Path,
                                                                        embedder: CachedEmbedder) -> None:
    url = f"sqlite:///{tmp_path / 'bad-row.db'}"
    with Memory.open(url, owner="alice", embedder=embedder) as mem:
        mem.remember("the quarterly budget review is on friday", id="budget")
        mem.remember("a budget note written by hand", id="good", owner="mallory")
        for i, change in enumerate(["kind = 'bogus'", "occurred_at = 1.5e300", "sensitivity = 'x'",
                                    "occurred_at = 'soon'"]):
            mem.remember("a budget note written by hand", id=f"bad{i}", owner="mallory")
            with sqlite3.connect(tmp_path / "bad-row.db") as conn:  # e.g. edited by hand
                conn.execute(f"UPDATE memories SET {change} WHERE id = ?", (f"bad{i}",))
                conn.execute("INSERT INTO index_changes (row, op) SELECT rowid, 'c' FROM memories WHERE id = ?",
                             (f"bad{i}",))
            assert_alice_unharmed(mem)  # the index catches up with the change
            assert [h.memory.id for h in mem.search("budget note", owner="mallory")] == ["good"]
    with Memory.open(url, owner="alice", embedder=embedder) as mem:  # and a fresh index, built from the file
        assert_alice_unharmed(mem)


def test_postgres_reads_times_in_utc_whatever_the_server_zone(pg_server: object) -> None:
    """A row an older memroute wrote at 9999-12-31T23:59:59.999999Z is past the year 9999 in a zone east of UTC;
    read in that zone it cannot be loaded, and a copy of the store (which reads every owner's rows) failed."""
    import psycopg

    url = pg_server.new_database()  # type: ignore[attr-defined]
    store = open_store(url)
    store.bind_model("m", 4)
    vec = np.ones(4, np.float32) / 2
    store.upsert([MemoryRecord(MemoryItem(id="ok", owner="alice", text="kiwi", created_at=EXACT[2]), ["kiwi"], vec),
                  MemoryRecord(MemoryItem(id="late", owner="mallory", text="kiwi", created_at=EXACT[2]), ["kiwi"],
                               vec)])
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE memroute_memories SET occurred_at = '9999-12-31T23:59:59.999999Z' WHERE id = 'late'")
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET timezone = 'Pacific/Kiritimati'")  # UTC+14
    store = open_store(url)
    try:
        assert {r.memory.id for r in store.iter_records()} == {"ok", "late"}
        assert store.get(["late"], "mallory")[0].occurred_at == datetime.max.replace(tzinfo=UTC)
        assert [h.id for h in store.search_bm25(["kiwi"], SearchFilter(owner="alice"), 5)] == ["ok"]
    finally:
        store.close()


def test_a_range_that_ends_before_it_starts_is_an_input_error(mem: Memory) -> None:
    """``start`` after ``end`` matches nothing by construction: a caller's mistake, said so, not an empty answer."""
    start, end = "2025-01-02T00:00:00Z", "2025-01-01T23:59:59.999999Z"
    with pytest.raises(InputError, match=r"start .* is after end"):
        mem.search("budget", start=start, end=end)
    with pytest.raises(InputError, match=r"start .* is after end"):
        mem.list(start=start, end=end)
    # one instant is a range: start == end is allowed
    assert mem.list(start=end, end=end) == []
