"""PostgreSQL-specific behaviour on a real server: copy, bad input, failures, concurrency.

The store contract itself runs against PostgreSQL in test_store_conformance.py.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
import pytest

from memroute import Memory, StoreError
from memroute.cli import main
from memroute.embed import CachedEmbedder
from memroute.stores import MemoryRecord, open_store
from memroute.stores.copy import store_checksum
from memroute.stores.pg_sql import SEARCH_INDEXES
from memroute.types import MemoryItem, SearchFilter, utcnow
from tests.locomo_files import QUESTIONS, write_locomo
from tests.pg_server import PgServer


def _db_name(url: str) -> str:
    return url.split("?")[0].rsplit("/", 1)[1]


def test_copy_sqlite_to_postgres_and_back(pg_server: PgServer, tmp_path: Path, embedder: CachedEmbedder,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    sqlite_url = f"sqlite:///{tmp_path / 'src.db'}"
    with Memory.open(sqlite_url, owner="alice", embedder=embedder) as mem:
        mem.remember_many([{"text": f"note {i} about プロジェクト{i % 3} and 회의 {i % 5}", "session": f"s{i % 4}"}
                           for i in range(120)])
        mem.remember("bob's only memory", owner="bob", sensitivity="private")
        mem.add_message("s1", "user", "hello")
        mem.store.put_state("route", "s1", {"agent": "travel"}, "alice")
    pg_url = pg_server.new_database()
    assert main(["copy", "--from", sqlite_url, "--to", pg_url, "--batch-size", "50", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"memories": 121' in out and '"verified": true' in out
    back = f"sqlite:///{tmp_path / 'back.db'}"
    assert main(["copy", "--from", pg_url, "--to", back]) == 0
    src, pg, dst = open_store(sqlite_url), open_store(pg_url), open_store(back)
    assert store_checksum(src) == store_checksum(pg) == store_checksum(dst)
    assert pg.get_state("route", "s1", "alice") == {"agent": "travel"}
    assert [m.text for m in pg.recent_messages("s1", "alice")] == ["hello"]
    # The same search answers the same on both backends (a hybrid one runs its two searches at once on
    # PostgreSQL, one after the other on SQLite).
    with Memory.open(sqlite_url, owner="alice", embedder=embedder) as a, \
            Memory.open(pg_url, owner="alice", embedder=embedder) as b:
        assert b.parallel_searches and not a.parallel_searches
        for q in ("プロジェクト1", "회의 3", "note 7"):
            for mode in ("bm25", "vector", "hybrid"):
                ra = [(h.memory.id, round(h.score, 4)) for h in a.search(q, mode=mode, limit=5)]
                rb = [(h.memory.id, round(h.score, 4)) for h in b.search(q, mode=mode, limit=5)]
                assert ra == rb, (q, mode)
    for st in (src, pg, dst):
        st.close()


def test_copy_resumes(pg_server: PgServer, tmp_path: Path) -> None:
    src = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    src.bind_model("m", 4)
    src.upsert([MemoryRecord(MemoryItem(id=f"m{i}", owner="o", text=f"t{i}"), [f"t{i}"],
                             np.array([1, i, 0, 1], np.float32) / np.sqrt(2 + i * i)) for i in range(30)])
    pg_url = pg_server.new_database()
    dst = open_store(pg_url)
    dst.bind_model("m", 4)
    dst.upsert(list(src.iter_records())[:20])  # as a copy interrupted after 20 leaves it
    dst.put_state("copy", src.url, {"memories": 20})
    from memroute.stores.copy import copy_store

    report = copy_store(src, dst, batch_size=7)
    assert report.resumed_from == 20 and report.memories == 30
    assert dst.count() == 30
    dst.close()  # its background indexer with it
    src.close()


def test_missing_pgvector_is_explained(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    name = _db_name(url)
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'limited') THEN "
                     "CREATE ROLE limited LOGIN; END IF; END$$")
        conn.execute(f"REVOKE CREATE ON DATABASE {name} FROM PUBLIC")
    limited = url.replace("postgres:@", "limited:@", 1)
    with pytest.raises(StoreError, match="pgvector"):
        open_store(limited)


def test_unknown_role_is_clear(pg_server: PgServer) -> None:
    url = pg_server.new_database().replace("postgres:@", "nobody_here:@", 1)
    with pytest.raises(StoreError, match="nobody_here"):
        open_store(url)


def test_statement_timeout_and_reconnect(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    store.upsert([MemoryRecord(MemoryItem(id="a", owner="o", text="x"), ["x"], np.ones(4, np.float32) / 2)])
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        # the server drops every connection of the store, as a restart or failover would
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                     (_db_name(url),))
    assert [h.id for h in store.search_bm25(["x"], SearchFilter(owner="o"), 5)] == ["a"]  # reconnected
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {_db_name(url)} SET statement_timeout = 300")
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                     (_db_name(url),))
    # Another session holds the table, so the store's next statements wait until the server cancels them.
    with psycopg.connect(url) as blocker:
        blocker.execute("LOCK TABLE memroute_memories IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(StoreError, match="statement_timeout"):
            store.upsert([MemoryRecord(MemoryItem(id="b", owner="o", text="y"), ["y"], np.ones(4, np.float32) / 2)])
        blocker.rollback()
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {_db_name(url)} RESET statement_timeout")
    assert store.get(["a"], "o")[0].text == "x"  # nothing half-written
    assert store.get(["b"], "o") == []
    store.close()


def test_read_only_replica_serves_searches_and_refuses_writes(pg_server: PgServer) -> None:
    # default_transaction_read_only refuses writes with the same error (SQLSTATE 25006) as a hot standby
    url = pg_server.new_database() + "&schema=tenant_a"
    read_only = url + "&options=-c%20default_transaction_read_only%3Don"
    with pytest.raises(StoreError, match="read-only"):
        open_store(read_only)  # nothing to read yet: the primary must be migrated first
    store = open_store(url)
    store.bind_model("m", 4)
    store.upsert([MemoryRecord(MemoryItem(id="a", owner="o", text="x"), ["x"], np.ones(4, np.float32) / 2)])
    store.close()
    replica = open_store(read_only)
    replica.bind_model("m", 4)
    flt = SearchFilter(owner="o")
    assert [h.id for h in replica.search_bm25(["x"], flt, 5)] == ["a"]
    assert [h.id for h in replica.search_vector(np.ones(4, np.float32) / 2, flt, 5)] == ["a"]
    with pytest.raises(StoreError, match="send writes to the primary"):
        replica.upsert([MemoryRecord(MemoryItem(id="b", owner="o", text="y"), ["y"], np.ones(4, np.float32) / 2)])
    assert replica.count("o") == 1
    replica.close()


def test_eval_recall_gives_the_same_figures_on_both_backends(pg_server: PgServer, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_locomo(data, [*QUESTIONS[:3], ("conv-b", "What can you climb on the island?", ["D1:3", "D1:1"], 1)])
    url = pg_server.new_database()
    base = ["eval", "recall", "--data", str(data), "--json"]
    assert main([*base, "--workdir", str(tmp_path / "work")]) == 0
    on_sqlite = json.loads(capsys.readouterr().out)
    for _ in range(2):  # the second run reuses the schemas the first one filled
        assert main([*base, "--store", url]) == 0
        on_postgres = json.loads(capsys.readouterr().out)
        assert on_postgres["config"].pop("store").startswith("postgresql")
        on_sqlite["config"].pop("store", None)
        for result in (on_sqlite, on_postgres):
            result.pop("latency_ms", None)
        assert on_postgres == on_sqlite and on_sqlite["questions"] == 4
    with psycopg.connect(url) as conn:
        schemas = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'locomo%'")}
        assert schemas == {"locomo_conv_a_use_m3", "locomo_conv_b_use_m3"}
        assert conn.execute("SELECT count(*) FROM locomo_conv_a_use_m3.memroute_memories").fetchone() == (4,)
    assert main([*base, "--store", "sqlite:///elsewhere.db"]) == 1
    assert "postgresql://" in capsys.readouterr().err


def _worker(url: str, worker: int, seconds: float, result: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    store = open_store(url)
    store.bind_model("m", 8)
    rng = np.random.default_rng(worker)
    written, misses = 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        vec = rng.standard_normal(8).astype(np.float32)
        vec /= np.linalg.norm(vec)
        mid = f"w{worker}-{written}"
        store.upsert([MemoryRecord(MemoryItem(id=mid, owner=f"o{worker % 2}", text=mid), [mid.replace("-", "_")],
                                   vec)])
        written += 1
        flt = SearchFilter(owner=f"o{worker % 2}")
        if [h.id for h in store.search_bm25([mid.replace("-", "_")], flt, 1)] != [mid]:
            misses += 1
        if mid not in [h.id for h in store.search_vector(vec, flt, 5)]:
            misses += 1
    store.close()
    result.put((written, misses))


@pytest.mark.slow
def test_eight_processes_for_a_minute(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    open_store(url).close()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, w, 60.0, queue)) for w in range(8)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    written = sum(r[0] for r in results)
    assert sum(r[1] for r in results) == 0  # every process saw its own writes, in BM25 and vector search
    store = open_store(url)
    assert store.count() == written  # nothing lost
    store.close()


def test_migration_3_moves_lexical_data_of_an_existing_store(pg_server: PgServer) -> None:
    from memroute.stores.migrations.postgres import MIGRATIONS

    url = pg_server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:  # a store as memroute left it at schema version 2
        for _number, _name, ddl in MIGRATIONS[:2]:
            conn.execute(ddl)
        conn.execute("INSERT INTO memroute_meta VALUES ('schema_version', '2'), ('model_id', 'm'), ('dimension', '4')")
        conn.execute("ALTER TABLE memroute_memories ALTER COLUMN embedding TYPE vector(4)")
        for i, (tokens, ctx) in enumerate([("kiwi mango", ""), ("mango", "kiwi papaya"), ("lime", "")]):
            conn.execute("INSERT INTO memroute_memories (owner, id, kind, text, created_at, tokens, context_tokens, "
                         "len_own, len_ctx, tsv_own, tsv_ctx, embedding, archived) VALUES ('o', %s, 'note', %s, "
                         "now(), %s, %s, %s, %s, array_to_tsvector(string_to_array(%s, ' ', '')), "
                         "array_to_tsvector(string_to_array(%s, ' ', '')), %s, %s)",
                         (f"m{i}", tokens, tokens, ctx, len(tokens.split()), len(ctx.split()), tokens, ctx,
                          f"[1,{i},0,1]", i == 2))
    store = open_store(url)
    store.bind_model("m", 4)
    flt = SearchFilter(owner="o")
    assert [h.id for h in store.search_bm25(["mango"], flt, 5)] == ["m1", "m0"]  # the shorter row first
    assert [h.id for h in store.search_bm25(["kiwi"], flt, 5, weights=(1.0, 0.5))] == ["m0", "m1"]
    assert store.search_bm25(["lime"], flt, 5) == []  # the archived flag came along
    assert [h.id for h in store.search_bm25(["lime"], SearchFilter(owner="o", include_archived=True), 5)] == ["m2"]
    assert {r.memory.id: (list(r.tokens), list(r.context_tokens)) for r in store.iter_records()} == {
        "m0": (["kiwi", "mango"], []), "m1": (["mango"], ["kiwi", "papaya"]), "m2": (["lime"], [])}
    assert store.stats().schema_version == MIGRATIONS[-1][0]
    assert store.delete(["m0"], "o") == 1
    with psycopg.connect(url) as conn:
        columns = {r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE "
                                              "table_name = 'memroute_memories'")}
        assert not columns & {"tokens", "tsv_own", "len_own"}
        lexical = conn.execute("SELECT id FROM memroute_lexical ORDER BY id").fetchall()
        assert [r[0] for r in lexical] == ["m1", "m2"]  # the deleted memory's lexical row went with it
    store.close()


def test_migration_4_indexes_the_parts_of_hyphenated_words_of_an_existing_store(pg_server: PgServer) -> None:
    from memroute.stores.migrations.postgres import MIGRATIONS

    url = pg_server.new_database()
    rows = [("follow-up lime", ""), ("kiwi lime", "front-end"), ("jira-123", ""), ("durian", "")]
    with psycopg.connect(url, autocommit=True) as conn:  # a store as memroute left it at schema version 3
        for _number, _name, ddl in MIGRATIONS[:3]:
            assert isinstance(ddl, str)
            conn.execute(ddl)
        conn.execute("INSERT INTO memroute_meta VALUES ('schema_version', '3'), ('model_id', 'm'), ('dimension', '4')")
        conn.execute("ALTER TABLE memroute_memories ALTER COLUMN embedding TYPE vector(4)")
        for i, (tokens, ctx) in enumerate(rows):
            conn.execute("WITH m AS (INSERT INTO memroute_memories (owner, id, kind, text, created_at, embedding, "
                         "archived) VALUES ('o', %s, 'note', %s, now(), %s, false) RETURNING row_id) "
                         "INSERT INTO memroute_lexical SELECT row_id, 'o', %s, NULL, 'note', NULL, NULL, false, 0, "
                         "%s, %s, %s, %s, array_to_tsvector(string_to_array(%s, ' ', '')), "
                         "array_to_tsvector(string_to_array(%s, ' ', '')) FROM m",
                         (f"m{i}", tokens, f"[1,{i},0,1]", f"m{i}", tokens, ctx, len(tokens.split()),
                          len(ctx.split()), tokens, ctx))
    flt = SearchFilter(owner="o")
    store = open_store(url)
    store.bind_model("m", 4)
    assert store.stats().schema_version == MIGRATIONS[-1][0]
    assert [h.id for h in store.search_bm25(["follow", "followup"], flt, 5)] == ["m0"]
    assert [h.id for h in store.search_bm25(["frontend"], flt, 5, weights=(1.0, 0.5))] == ["m1"]
    assert [h.id for h in store.search_bm25(["jira-123"], flt, 5)] == ["m2"]
    lime = {h.id: h.score for h in store.search_bm25(["lime"], flt, 5)}
    assert lime["m0"] == pytest.approx(lime["m1"])  # the lengths stay the tokens' counts
    assert {r.memory.id: (list(r.tokens), list(r.context_tokens)) for r in store.iter_records()} == {
        f"m{i}": (tokens.split(), ctx.split()) for i, (tokens, ctx) in enumerate(rows)}
    store.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT tsv_own::text FROM memroute_lexical WHERE id = 'm3'").fetchone() == ("'durian'",)
        assert conn.execute("SELECT len_own FROM memroute_lexical WHERE id = 'm0'").fetchone() == (2,)


def test_memories_with_hyphenated_words_are_found_on_both_backends(pg_server: PgServer, tmp_path: Path,
                                                                 embedder: CachedEmbedder) -> None:
    for url in (f"sqlite:///{tmp_path / 'h.db'}", pg_server.new_database()):
        mem = Memory.open(url, owner="alice", embedder=embedder)
        mem.remember("Send the follow-up to the front-end team about JIRA-123", id="h")
        mem.remember("Lunch with the team on Friday", id="l")
        for query in ("follow up", "front end", "followup", "follow-up", "JIRA-123"):
            assert [h.memory.id for h in mem.search(query, mode="bm25")] == ["h"], (url, query)
        mem.close()


def _search_indexes(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE ANY "
                                           "(ARRAY['%embedding', '%tsv_own', '%tsv_ctx', '%postings_term'])")}


def test_copy_into_postgres_bulk_loads_resumably(pg_server: PgServer, tmp_path: Path) -> None:
    from memroute.stores.copy import copy_store

    src = open_store(f"sqlite:///{tmp_path / 'bulk.db'}")
    src.bind_model("m", 4)
    rng = np.random.default_rng(5)
    src.upsert([MemoryRecord(MemoryItem(id=f"m{i}", owner=f"o{i % 3}", text=f"t{i}"), [f"t{i}", "common"],
                             rng.standard_normal(4).astype(np.float32), ["ctx"] if i % 2 else [])
                for i in range(95)])
    pg_url = pg_server.new_database()
    dst = open_store(pg_url)
    assert _search_indexes(pg_url) == {"memroute_lexical_tsv_own", "memroute_lexical_tsv_ctx",
                                      "memroute_postings_term"}  # no model yet
    batches: list[int] = []

    def interrupt(n: int) -> None:
        batches.append(n)
        if len(batches) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_store(src, dst, batch_size=20, progress=interrupt)
    # the two batches and their progress committed together; the indexes wait for the end of the copy
    assert dst.count() == 40 and dst.get_state("copy", src.url) == {"memories": 40}
    assert _search_indexes(pg_url) == set()
    report = copy_store(src, dst, batch_size=20)
    assert (report.resumed_from, report.memories) == (40, 95)
    assert _search_indexes(pg_url) == {name for name, _, _ in SEARCH_INDEXES}
    assert store_checksum(dst) == store_checksum(src)
    assert [h.id for h in dst.search_bm25(["t7"], SearchFilter(owner="o1"), 5)] == ["m7"]
    assert len(dst.search_bm25(["ctx"], SearchFilter(owner="o1"), 50, weights=(1.0, 0.5))) == 16
    src.close()
    dst.close()


def _records(n: int, prefix: str = "m", owner: str = "o", **fields: object) -> list[MemoryRecord]:
    rng = np.random.default_rng(n)
    return [MemoryRecord(MemoryItem(id=f"{prefix}{i}", owner=owner, text=f"note {i} about the plan", **fields),
                         ["note", str(i), "plan"], rng.normal(size=4).astype(np.float32)) for i in range(n)]


def _statements(store: object, write: Callable[[], None], tmp_path: Path) -> list[str]:
    """The first word of each statement the client ran for ``write`` (a Query or an Execute message, the pool's
    empty connection check left out), read from libpq's protocol trace of the pool's only connection."""
    trace = tmp_path / "libpq.trace"
    with trace.open("w") as out:
        with store._pool.connection() as conn:  # type: ignore[attr-defined]
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
        write()
        with store._pool.connection() as conn:  # type: ignore[attr-defined]
            conn.pgconn.untrace()
    heads: list[str] = []
    parsed = ""
    for line in trace.read_text().splitlines():
        direction, _, message, rest = ([*line.split("\t", 3), "", ""])[:4]
        text = rest.strip().partition('" "')[2] if message == "Parse" else rest.strip().strip('"')  # "name" "query"
        if direction == "F" and message == "Parse":
            parsed = text
        elif direction == "F" and (message == "Execute" or (message == "Query" and text)):
            heads.extend((parsed if message == "Execute" else text).split()[:1])
    return heads


def test_a_batch_of_upserts_is_one_statement_whatever_its_size(pg_server: PgServer, tmp_path: Path) -> None:
    from memroute.stores.postgres import PostgresStore
    from memroute.types import Message

    store = PostgresStore(pg_server.new_database(), min_connections=1, max_connections=1)
    store.bind_model("m", 4)
    small = _statements(store, lambda: store.upsert(_records(3, "a")), tmp_path)
    large = _statements(store, lambda: store.upsert(_records(600, "b")), tmp_path)
    again = _statements(store, lambda: store.upsert(_records(600, "b")), tmp_path)  # all of them updates
    turns = [Message("s", "user", f"turn {i}", utcnow(), "o") for i in range(200)]
    with_log = _statements(store, lambda: store.write_batch(_records(300, "c"), turns), tmp_path)
    # one statement writes a batch of memories with their lexical rows, another the messages
    assert small == large == ["BEGIN", "WITH", "COMMIT"]
    assert again[:3] == large and again[3:] in ([], ["BEGIN", "ANALYZE", "COMMIT"])  # every 1,000 rows
    assert with_log[:4] == ["BEGIN", "WITH", "INSERT", "COMMIT"]
    assert store.count("o") == 903
    # a batch larger than UPSERT_ROWS is a statement per UPSERT_ROWS rows, in one transaction
    many = [*_records(4500, "d"), MemoryRecord(MemoryItem(id="d0", owner="o", text="d0 again"), ["again"],
                                               np.ones(4, np.float32))]
    sent = _statements(store, lambda: store.upsert(many), tmp_path)
    assert sent[:5] == ["BEGIN", "WITH", "WITH", "WITH", "COMMIT"]  # then, past MERGE_ROWS, the BM25 blocks' fold
    assert store.count("o") == 5403 and store.get(["d0"], "o")[0].text == "d0 again"
    assert [m.text for m in store.recent_messages("s", "o", 3)] == ["turn 197", "turn 198", "turn 199"]
    store.close()


def test_a_batch_with_a_duplicate_id_or_a_bad_row_is_all_or_nothing(pg_server: PgServer) -> None:
    from memroute.stores.postgres import PostgresStore

    store = PostgresStore(pg_server.new_database())
    store.bind_model("m", 4)
    store.upsert(_records(5))
    # the same id twice in one batch: the last one wins, as writing them one by one would
    batch = _records(3, "n")
    twice = MemoryRecord(MemoryItem(id="n1", owner="o", text="the second n1"), ["second"], batch[1].vector)
    store.upsert([*batch, twice])
    assert [m.text for m in store.get(["n0", "n1", "n2"], "o")] == ["note 0 about the plan", "the second n1",
                                                                    "note 2 about the plan"]
    assert store.search_bm25(["second"], SearchFilter(owner="o"), 5)[0].id == "n1"
    assert store.search_bm25(["1"], SearchFilter(owner="o"), 5)[0].id == "m1"  # n1's first tokens are gone
    # a row the server refuses (a NUL character in JSON) fails the whole batch: updates and inserts alike
    changed = [MemoryRecord(MemoryItem(id="m0", owner="o", text="changed"), ["changed"], batch[0].vector),
               *_records(50, "x"),
               MemoryRecord(MemoryItem(id="bad", owner="o", text="bad", metadata={"k": "\x00"}), ["bad"],
                            batch[0].vector)]
    with pytest.raises(StoreError):
        store.upsert(changed)
    assert store.count("o") == 8
    assert store.get(["m0"], "o")[0].text == "note 0 about the plan"
    assert store.search_bm25(["changed"], SearchFilter(owner="o"), 5) == []
    # owners stay apart: the same id under another owner is another memory
    store.upsert(_records(2, owner="p"))
    assert store.count("o") == 8 and store.count("p") == 2
    store.close()


def test_remember_many_and_import_write_a_batch_in_one_statement(pg_server: PgServer, tmp_path: Path,
                                                                 embedder: CachedEmbedder) -> None:
    from memroute.importing import import_jsonl
    from memroute.stores.postgres import PostgresStore

    store = PostgresStore(pg_server.new_database(), min_connections=1, max_connections=1)
    mem = Memory(store, embedder, owner="o")
    items = [{"text": f"note {i} about the 회의 and the プロジェクト"} for i in range(600)]
    sent = _statements(store, lambda: mem.remember_many(items, batch_size=256), tmp_path)
    assert sent == ["BEGIN", "WITH", "COMMIT"] * 3  # 256 + 256 + 88
    lines = [json.dumps({"text": f"imported {i}"}) for i in range(300)]
    lines.append(json.dumps({"session": "s", "messages": [{"role": "user", "text": "hi"},
                                                          {"role": "assistant", "text": "hello"}]}))
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    sent = _statements(store, lambda: import_jsonl(mem, path, batch_size=200), tmp_path)
    writes = [i for i, head in enumerate(sent) if head == "WITH"]
    assert len(writes) == 2  # a batch of 200 memories, then 101 with the conversation's messages
    assert sent[writes[1]:writes[1] + 4] == ["WITH", "INSERT", "INSERT", "COMMIT"]  # messages, import state
    assert store.count("o") == 600 + 301
    mem.close()
