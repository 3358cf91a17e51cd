"""PostgreSQL BM25 from impact-ordered postings (migration 5, ``memroute.stores.pg_bm25``), on a real server.

The reference is exact BM25 over every row a query matches (the same scoring, no early stop): the search
must give the same top ``limit``, ties in insertion order, after writes, updates, deletes, bulk loads that
move the average length, and with filters.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest

from memroute.stores import MemoryRecord, bm25, open_store, pg_bm25, pg_ops
from memroute.stores.pg_bm25 import READ_BUDGET, SUM_BELOW, ImpactSearch
from memroute.stores.pg_sql import bm25_scores, tsquery, where_clause
from memroute.types import MemoryItem, MemoryKind, SearchFilter
from tests.pg_server import PgServer, drop_token_vectors

T0 = datetime(2025, 1, 1, tzinfo=UTC)
WORDS = [f"w{i}" for i in range(60)]


def _word(rng: random.Random) -> str:
    return WORDS[min(int(rng.paretovariate(0.9)) - 1, len(WORDS) - 1)]  # a few frequent words, a long tail


def _record(i: int, rng: random.Random, owner: str = "o", long: bool = False) -> MemoryRecord:
    n = rng.randint(8, 40) if long else rng.randint(1, 9)
    tokens = [_word(rng) for _ in range(n)]
    if rng.random() < 0.1:
        tokens.append(f"{_word(rng)}-{_word(rng)}")  # indexed under its parts too
    ctx = [_word(rng) for _ in range(rng.randint(1, 6))] if rng.random() < 0.4 else []
    kind = MemoryKind.NOTE if i % 3 else MemoryKind.EPISODE
    item = MemoryItem(id=f"m{i}", owner=owner, text=" ".join(tokens), kind=kind,
                      archived=rng.random() < 0.05, occurred_at=T0 + timedelta(days=rng.randrange(100)))
    return MemoryRecord(item, tokens, np.asarray([1.0, i % 7, 0.0, 1.0], dtype=np.float32), ctx)


def _exact(url: str, terms: list[str], flt: SearchFilter, limit: int, weights: tuple[float, float]) -> list[str]:
    """Exact BM25 over every matching row: statistics and frequencies over the whole table, as the store."""
    terms = sorted(set(terms))
    where, params = where_clause(flt)
    q = tsquery(terms)
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, tokens, context_tokens, len_own, len_ctx, row_id FROM memroute_lexical m "
                            f"WHERE {where} AND (tsv_own @@ %s::tsquery OR tsv_ctx @@ %s::tsquery)",
                            [*params, q, q]).fetchall()
        docs, s_own, s_ctx = conn.execute("SELECT count(*), sum(len_own), sum(len_ctx) FROM "
                                          "memroute_lexical").fetchone()
        dfs = {}
        for t in terms:
            own, any_field = conn.execute("SELECT count(*) FILTER (WHERE tsv_own @@ %s::tsquery), count(*) FROM "
                                          "memroute_lexical WHERE tsv_own @@ %s::tsquery OR tsv_ctx @@ %s::tsquery",
                                          (tsquery([t]),) * 3).fetchone()
            dfs[t] = max(any_field if weights[1] > 0 else own, 1)
    scored = bm25_scores(rows, terms, weights[0], max(weights[1], 0.0), (docs, float(s_own), float(s_ctx)), dfs)
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [mid for _, _, mid in scored[:limit]]


def _postings_match_the_rows(url: str) -> None:
    """The postings are exactly those the lexical rows give now (nothing missing, nothing left behind)."""
    with psycopg.connect(url) as conn:
        fresh = ("SELECT q.* FROM memroute_lexical r CROSS JOIN LATERAL memroute_postings_of(r.owner, r.row_id, "
                 "r.tokens, r.context_tokens, r.len_own, r.len_ctx, r.tsv_own, r.tsv_ctx, (SELECT value::float8 "
                 "FROM memroute_meta WHERE key = 'bm25_avgdl')) q")
        missing = conn.execute(f"{fresh} EXCEPT ALL SELECT * FROM memroute_postings").fetchall()
        extra = conn.execute(f"SELECT * FROM memroute_postings EXCEPT ALL {fresh}").fetchall()
    assert missing == [] and extra == []


def _check_queries(url: str, store: Any, rng: random.Random, owner: str = "o", n: int = 40) -> None:
    fresh = open_store(url)  # no cached statistics
    try:
        for k in range(n):
            terms = [_word(rng) for _ in range(rng.randint(1, 4))]
            weights = (1.0, 0.0) if k % 2 else (1.0, 0.5)
            flts = [SearchFilter(owner=owner),
                    SearchFilter(owner=owner, include_archived=True, kinds=(MemoryKind.NOTE,)),
                    SearchFilter(owner=owner, start=T0 + timedelta(days=20), end=T0 + timedelta(days=50))]
            flt = flts[k % 3]
            limit = (10, 3, 25)[k % 3]
            got = [h.id for h in fresh.search_bm25(terms, flt, limit, weights=weights)]
            assert got == _exact(url, terms, flt, limit, weights), (terms, flt, weights)
    finally:
        fresh.close()



def _avgdl(url: str) -> float:
    """The average memory length the stored impacts were computed with."""
    with psycopg.connect(url) as conn:
        return float(conn.execute("SELECT value FROM memroute_meta WHERE key = 'bm25_avgdl'").fetchone()[0])


def test_impacts_are_bm25s_term_frequency_part(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    rng = random.Random(1)
    store.upsert([_record(i, rng) for i in range(50)])
    avgdl = _avgdl(url)
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT l.tokens, l.len_own, p.term, p.impact FROM memroute_postings p JOIN "
                            "memroute_lexical l USING (row_id) WHERE p.field = 0 AND strpos(l.tokens, '-') = 0"
                            ).fetchall()
    assert len(rows) > 50
    for tokens, length, term, impact in rows:
        tf = tokens.split().count(term)
        assert impact == pytest.approx(bm25.term_score(1.0, float(tf), float(length), avgdl), rel=1e-6)
    store.close()


@pytest.mark.parametrize(("budget", "sum_below"), [(READ_BUDGET, SUM_BELOW), (10**9, 0), (0, 0), (READ_BUDGET, 0)])
def test_top_k_equals_exact_bm25_through_writes_updates_deletes_and_drift(pg_server: PgServer, budget: int,
                                                                          sum_below: int,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With the defaults, with impact-ordered reads only, with sums in the server only, and with both."""
    monkeypatch.setattr(pg_bm25, "READ_BUDGET", budget)
    monkeypatch.setattr(pg_bm25, "SUM_BELOW", sum_below)
    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    rng = random.Random(7)
    store.upsert([_record(i, rng) for i in range(1500)])
    store.upsert([_record(i, rng, owner="other") for i in range(300)])  # statistics count every owner
    _postings_match_the_rows(url)
    _check_queries(url, store, rng)
    # updates (same ids, new words), deletes, and long memories that move the average length far from the
    # impacts' reference without a refresh: the bound loosens, the answer stays exact
    store.upsert([_record(i, rng, long=True) for i in range(0, 1500, 2)])
    assert store.delete([f"m{i}" for i in range(1, 1500, 7)], "o") > 0
    store.delete_where("other")
    _postings_match_the_rows(url)
    _check_queries(url, store, rng)
    store.close()


def test_a_bulk_load_recomputes_impacts_when_the_average_length_moved(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    rng = random.Random(3)

    assert _avgdl(url) == 10.0  # an empty store's
    store.bulk_load([_record(i, rng, long=True) for i in range(800)], rebuild_indexes=True)
    with psycopg.connect(url) as conn:
        avg = float(conn.execute("SELECT avg(len_own) FROM memroute_lexical").fetchone()[0])
    assert _avgdl(url) == pytest.approx(avg) and avg > 12.5
    _postings_match_the_rows(url)
    _check_queries(url, store, rng, n=20)
    store.close()


def test_the_search_stops_before_reading_a_long_list() -> None:
    """Unit: a rare term's few memories outscore anything a frequent term's long list could give, so that list
    is never read; while the answer is open, lists with a share of the bound are read, then the rest."""
    search = ImpactSearch(["common", "rare"], 1.0, 0.0, (100_000, 1_000_000.0, 0.0), {"common": 50_000, "rare": 3},
                          limit=2, reference=10.0)
    reads = search.next_reads()
    assert reads is not None and [lst.term for _, lst in reads] == ["rare"]  # idf 10.3 against 0.7
    met = search.took(reads, [(1, 1.5, r) for r in (1, 2, 3)])
    assert met == [1, 2, 3] and reads[0][1].done  # fewer than asked: the list is read to its end
    search.scored([(12.0, 1, "a"), (11.0, 2, "b"), (10.5, 3, "c")])
    assert search.bound() < search.threshold()  # the common list cannot reach 11
    assert search.next_reads() is None
    assert search.answer() == [(12.0, "a"), (11.0, "b")]
    # with only one memory scored, the answer (limit 2) is open and the common list must be read
    open_search = ImpactSearch(["common", "rare"], 1.0, 0.0, (100_000, 1_000_000.0, 0.0),
                               {"common": 50_000, "rare": 1}, limit=2, reference=10.0)
    reads = open_search.next_reads()
    assert reads is not None
    open_search.took(reads, [(1, 1.5, 1)])
    open_search.scored([(12.0, 1, "a")])
    reads = open_search.next_reads()
    assert reads is not None and [lst.term for _, lst in reads] == ["common"]
    open_search.took(reads, [(1, 2.0 - k * 1e-3, 100 + k) for k in range(64)])
    assert reads[0][1].chunk == 128 and not reads[0][1].done  # the next read of it is twice as long


def _closed_store_of(url: str, rows: int, seed: int) -> random.Random:
    """Write ``rows`` random memories to a new store at ``url`` and close it (to be taken back to an older
    schema); the generator goes on making memories like them."""
    store = open_store(url)
    store.bind_model("m", 4)
    rng = random.Random(seed)
    store.upsert([_record(i, rng) for i in range(rows)])
    store.close()
    return rng


def _drop_version_7(conn: psycopg.Connection[Any]) -> None:
    """Remove what migration 7 added (the BM25 blocks), and what came after, as a store of version 6 had it."""
    drop_token_vectors(conn)
    conn.execute("DROP TABLE memroute_blocks, memroute_blocks_changed")
    conn.execute("DROP FUNCTION memroute_blocks_added, memroute_blocks_removed CASCADE")


def test_migration_5_builds_postings_for_an_existing_store(pg_server: PgServer) -> None:
    from memroute.stores.migrations.postgres import MIGRATIONS

    url = pg_server.new_database()
    rng = _closed_store_of(url, 400, seed=11)
    with psycopg.connect(url, autocommit=True) as conn:  # back to the store as memroute left it at version 4
        _drop_version_7(conn)
        conn.execute("DROP TABLE memroute_postings")
        conn.execute("DROP FUNCTION memroute_postings_added, memroute_postings_updated, memroute_postings_deleted "
                     "CASCADE")
        conn.execute("DROP FUNCTION memroute_postings_of")
        conn.execute("DELETE FROM memroute_meta WHERE key = 'bm25_avgdl'")
        conn.execute("DROP INDEX IF EXISTS memroute_memories_pending, memroute_memories_embedding")  # version 6's
        conn.execute("ALTER TABLE memroute_memories DROP COLUMN indexed")
        conn.execute("CREATE INDEX memroute_memories_embedding ON memroute_memories USING hnsw (embedding "
                     "vector_cosine_ops) WITH (m = 32, ef_construction = 128)")
        conn.execute("UPDATE memroute_meta SET value = '4' WHERE key = 'schema_version'")
        assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'memroute_postings%'").fetchone() == (0,)
    store = open_store(url)
    assert store.stats().schema_version == MIGRATIONS[-1][0]
    with psycopg.connect(url) as conn:
        avg = float(conn.execute("SELECT avg(len_own) FROM memroute_lexical").fetchone()[0])
    assert _avgdl(url) == pytest.approx(avg)
    _postings_match_the_rows(url)
    _check_queries(url, store, rng, n=20)
    store.upsert([_record(1000, rng)])  # the triggers are there
    _postings_match_the_rows(url)
    store.close()


def _blocks(url: str) -> list[tuple[str, int, str, float, int]]:
    """Every (owner, field, term, impact, row_id) the blocks hold, decoded as a search decodes them."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT owner, field, term, row_ids, impacts FROM memroute_blocks", binary=True).fetchall()
    out = []
    for owner, field, term, row_ids, impacts in rows:
        ids, imps = np.frombuffer(row_ids, ">i8"), np.frombuffer(impacts, ">f4")
        assert len(ids) == len(imps) and len(ids) <= pg_bm25.BLOCK_POSTINGS
        out += [(owner, int(field), term, float(i), int(r)) for r, i in zip(ids, imps, strict=True)]
    return sorted(out)


def _postings(url: str) -> list[tuple[str, int, str, float, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT owner, field, term, impact, row_id FROM memroute_postings").fetchall()
    return sorted((o, int(f), t, float(np.float32(i)), int(r)) for o, f, t, i, r in rows)


def _changed(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT count(*) FROM memroute_blocks_changed").fetchone()[0])


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every statement the sync store runs (run as before: only recorded)."""
    import memroute.stores.postgres as pg_store

    seen: list[str] = []
    run = pg_store.execute

    def recording(conn: Any, step: Any) -> Any:
        seen.extend(str(sql.query) for sql in getattr(step, "steps", [step]))  # a Batch: each of its statements
        return run(conn, step)

    monkeypatch.setattr(pg_store, "execute", recording)
    return seen


def test_blocks_hold_exactly_the_postings_after_a_bulk_load(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    rng = random.Random(5)
    store.bulk_load([_record(i, rng) for i in range(900)], rebuild_indexes=True)
    store.bulk_load([_record(i, rng, owner="other") for i in range(200)], rebuild_indexes=True)
    assert _changed(url) == 0
    assert _blocks(url) == _postings(url) and len(_postings(url)) > 1000
    store.close()


def _bulk_loaded(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, rows: int,
                 seed: int) -> tuple[str, Any, random.Random]:
    """A new database's store holding ``rows`` bulk-loaded memories in built blocks, with the fold after
    writes turned off (each test folds or rebuilds when it means to)."""
    monkeypatch.setattr(pg_ops, "MERGE_ROWS", 10**9)
    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    rng = random.Random(seed)
    store.bulk_load([_record(i, rng) for i in range(rows)], rebuild_indexes=True)
    return url, store, rng


def test_blocks_answer_exact_bm25_through_writes_updates_and_deletes_after_their_build(
        pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, statements: list[str]) -> None:
    """The blocks are built by a bulk load; then rows are added, changed and deleted: first listed as changed
    (scored exactly beside stale blocks), then folded into new blocks, then past ``DEAD_ROWS`` rebuilt."""
    url, store, rng = _bulk_loaded(pg_server, monkeypatch, 1500, 9)
    built = _blocks(url)
    assert built == _postings(url) and _changed(url) == 0
    statements.clear()
    _check_queries(url, store, rng)
    assert any("memroute_blocks b" in s for s in statements)  # the blocks answered (all but the narrow filters)
    assert not any("GROUP BY p.row_id" in s for s in statements if "memroute_lexical m ON" not in s)

    # updates with new words, new rows, deletes: listed as changed, not folded in (MERGE_ROWS is huge)
    store.upsert([_record(i, rng, long=True) for i in range(0, 1500, 3)])
    store.upsert([_record(i, rng) for i in range(1500, 1800)])
    assert store.delete([f"m{i}" for i in range(1, 1500, 5)], "o") > 0
    assert _blocks(url) == built and _changed(url) > 700
    _check_queries(url, store, rng)

    # folded into new blocks every 100 rows written or deleted; deleted rows stay listed
    monkeypatch.setattr(pg_ops, "MERGE_ROWS", 100)
    monkeypatch.setattr(pg_ops, "DEAD_ROWS", 10**9)
    store.upsert([_record(i, rng, long=True) for i in range(2, 1500, 4)])
    left = _changed(url)
    assert 0 < left < 1500 // 5 + 1  # only the deleted rows
    assert len(_blocks(url)) > len(built)
    _check_queries(url, store, rng)
    assert store.delete([f"m{i}" for i in range(1500, 1800, 2)], "o") == 150
    _check_queries(url, store, rng)

    # past DEAD_ROWS deleted rows, the next fold has the blocks rebuilt from the postings, by the background
    # indexer's thread: not in the write's call
    monkeypatch.setattr(pg_ops, "DEAD_ROWS", 50)
    statements.clear()
    store.upsert([_record(i, rng) for i in range(3000, 3100)])
    assert not any("INSERT INTO memroute_blocks SELECT owner, field, term, (n" in s for s in statements)
    assert store._indexer is not None and store._indexer.idle(60) and store._indexer.rebuilds == 1
    assert _changed(url) == 0 and _blocks(url) == _postings(url)
    _check_queries(url, store, rng)
    store.close()


def test_too_many_changed_rows_fall_back_to_the_sums_in_the_server(
        pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, statements: list[str]) -> None:
    monkeypatch.setattr(pg_ops, "CHANGED_ROWS", 50)
    url, store, rng = _bulk_loaded(pg_server, monkeypatch, 600, 13)
    store.upsert([_record(i, rng, long=True) for i in range(0, 600, 4)])  # 150 changed rows
    statements.clear()
    _check_queries(url, store, rng, n=20)
    # the blocks come in the search's first round trip, unused: the server's sums answered
    assert any("GROUP BY p.row_id" in s for s in statements if "memroute_lexical m ON" not in s)
    store.close()


def test_block_bounds_sum_each_rows_lists_and_rank_them() -> None:
    """Unit: both ways of summing (a dense array by row id, or sorted ids) give the same bounds, changed rows
    are left out, and the best come first, ties by row id."""
    def block(ord_: int, ids: list[int], impacts: list[float]) -> tuple[int, bytes, bytes]:
        return ord_, np.asarray(ids, ">i8").tobytes(), np.asarray(impacts, ">f4").tobytes()

    for far in (0, 10**12):  # row ids dense, or far apart
        blocks = [block(1, [1 + far, 2 + far, 5 + far], [1.0, 2.0, 0.5]), block(2, [2 + far, 7 + far], [1.0, 1.0]),
                  block(2, [1 + far], [2.0])]
        bounds = pg_bm25.BlockBounds(blocks, [1.0, 0.5], skip=[7 + far])
        assert len(bounds) == 3
        assert bounds.best(2) == [(2 + far, 2.5), (1 + far, 2.0)]
        assert bounds.best(10) == [(2 + far, 2.5), (1 + far, 2.0), (5 + far, 0.5)]
    tied = pg_bm25.BlockBounds([block(1, [9, 3, 6], [1.0, 1.0, 1.0])], [1.0], skip=[])
    assert tied.best(2) == [(3, 1.0), (6, 1.0)]
    assert len(pg_bm25.BlockBounds([], [1.0], skip=[])) == 0
    # against a plain sort, with flat impacts (many ties), dense and far-apart ids, several k
    rng = np.random.default_rng(3)
    for spread in (2_000, 10**9):
        lists = [(o, rng.choice(spread, size=700, replace=False)) for o in (1, 2, 3)]
        blocks = [block(o, ids.tolist(), rng.choice([1.0, 1.0, 1.0, 1.3], size=len(ids)).tolist()) for o, ids in lists]
        factors = [2.0, 1.0, 0.5]
        skip = rng.choice(spread, size=50).tolist()
        sums: dict[int, float] = {}
        for o, ids in lists:
            for row_id, impact in zip(ids.tolist(), np.frombuffer(blocks[o - 1][2], ">f4").tolist(), strict=True):
                sums[row_id] = sums.get(row_id, 0.0) + impact * factors[o - 1]
        expected = sorted(((r, b) for r, b in sums.items() if r not in set(skip)), key=lambda x: (-x[1], x[0]))
        bounds = pg_bm25.BlockBounds(blocks, factors, skip=skip)
        assert len(bounds) == len(expected)
        for k in (1, 10, 100, 1000, 5000):
            got = bounds.best(k)
            assert [r for r, _ in got] == [r for r, _ in expected[:k]]
            assert np.allclose([b for _, b in got], [b for _, b in expected[:k]])


def _blocks_cover_the_rows(url: str) -> None:
    """Every posting of every memory is in a block, or its memory is listed as changed (scored exactly)."""
    with psycopg.connect(url) as conn:
        changed = {int(r[0]) for r in conn.execute("SELECT row_id FROM memroute_blocks_changed").fetchall()}
    packed = set(_blocks(url))
    missing = [p for p in _postings(url) if p not in packed and p[4] not in changed]
    assert missing == []


def test_migration_7_packs_the_postings_of_an_existing_store(pg_server: PgServer) -> None:
    from memroute.stores.migrations.postgres import MIGRATIONS

    url = pg_server.new_database()
    rng = _closed_store_of(url, 500, seed=17)
    with psycopg.connect(url, autocommit=True) as conn:  # back to the store as memroute left it at version 6
        _drop_version_7(conn)
        conn.execute("UPDATE memroute_meta SET value = '6' WHERE key = 'schema_version'")
        assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'memroute_blocks%'").fetchone() == (0,)
    store = open_store(url)
    assert store.stats().schema_version == MIGRATIONS[-1][0]
    assert _changed(url) == 0 and _blocks(url) == _postings(url)
    _check_queries(url, store, rng, n=20)
    store.upsert([_record(1000, rng)])  # the triggers are there
    assert _changed(url) == 1
    _blocks_cover_the_rows(url)
    store.close()


def test_blocks_stay_exact_under_concurrent_writers(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three stores (as three processes) update, add and delete overlapping memories at once, each folding
    the changed rows into the blocks every 40 rows: no write is lost from the blocks or the changed list."""
    import threading

    monkeypatch.setattr(pg_ops, "MERGE_ROWS", 40)
    monkeypatch.setattr(pg_ops, "DEAD_ROWS", 120)
    url = pg_server.new_database()
    first = open_store(url)
    first.bind_model("m", 4)
    rng = random.Random(19)
    first.bulk_load([_record(i, rng) for i in range(600)], rebuild_indexes=True)
    first.close()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        wrng = random.Random(seed)
        store = open_store(url)
        try:
            for _ in range(12):
                ids = sorted(wrng.sample(range(900), 25))  # one lock order for all writers
                store.upsert([_record(i, wrng, long=wrng.random() < 0.5) for i in ids])
                store.delete([f"m{i}" for i in sorted(wrng.sample(range(900), 5))], "o")
        except BaseException as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _blocks_cover_the_rows(url)
    store = open_store(url)
    _check_queries(url, store, rng)
    store.close()


def test_document_frequencies_from_the_postings_equal_the_gin_counts(pg_server: PgServer) -> None:
    """On PostgreSQL 18+ a search counts document frequencies from the postings' index: the same two counts
    as the GIN index gives (own tokens; own or context), with context words, hyphenated words, updates and
    deletes, over every owner."""
    from memroute.stores.pg_sql import DF_POSTINGS_SQL, DF_SQL

    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    rng = random.Random(23)
    store.upsert([_record(i, rng) for i in range(700)])
    store.upsert([_record(i, rng, owner="other") for i in range(200)])
    store.upsert([_record(i, rng, long=True) for i in range(0, 700, 3)])
    store.delete([f"m{i}" for i in range(1, 700, 6)], "o")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_setting('server_version_num')::int").fetchone()[0] >= 180000
        counted = 0
        for word in [*WORDS, "nothing-here", "w1-w2"]:
            gin = conn.execute(DF_SQL, (tsquery([word]),) * 3).fetchone()
            assert conn.execute(DF_POSTINGS_SQL, (word, word)).fetchone() == gin, word
            counted += gin[1] > gin[0]  # a word some memories hold in their context only
    assert counted > 10
    store.close()


def test_migration_8_counts_the_same_term_frequencies_as_migration_5(pg_server: PgServer) -> None:
    """Migration 8 replaced the per-term scan of every token (minutes of server CPU for one memory of 20,000
    distinct words) with one grouping: the same postings for every row, hyphenated tokens and repeats included,
    and a memory of 20,000 distinct words is written."""
    import re

    from memroute.stores.migrations.postgres import M005_POSTINGS

    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    rng = random.Random(29)
    store.upsert([_record(i, rng, long=i % 2 == 0) for i in range(600)])
    many = MemoryItem(id="many", owner="o", text="many", occurred_at=T0)
    store.upsert([MemoryRecord(many, [f"tok{i}" for i in range(20_000)] + ["tok1-tok2", "tok1"],
                               np.asarray([1.0, 0.0, 0.0, 1.0], dtype=np.float32))])
    old = re.search(r"CREATE FUNCTION memroute_postings_of\(.*?\$\$;", M005_POSTINGS, re.S)
    assert old is not None
    args = ("r.owner, r.row_id, r.tokens, r.context_tokens, r.len_own, r.len_ctx, r.tsv_own, r.tsv_ctx, "
            "(SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl')")
    with psycopg.connect(url) as conn:
        conn.execute(old.group(0).replace("memroute_postings_of(", "old_postings_of(", 1))
        both = [f"SELECT q.* FROM memroute_lexical r CROSS JOIN LATERAL {name}({args}) q WHERE r.id <> 'many'"
                for name in ("memroute_postings_of", "old_postings_of")]
        assert conn.execute(f"{both[0]} EXCEPT ALL {both[1]}").fetchall() == []
        assert conn.execute(f"{both[1]} EXCEPT ALL {both[0]}").fetchall() == []
        hyphenated = conn.execute(f"SELECT count(*) FROM ({both[0]}) p WHERE p.term LIKE '%%-%%'").fetchone()
        assert hyphenated is not None and hyphenated[0] > 0  # the rows did hold hyphenated tokens
        tf = conn.execute("SELECT p.impact FROM memroute_postings p JOIN memroute_lexical r USING (row_id) "
                          "WHERE r.id = 'many' AND p.term IN ('tok1', 'tok3') AND p.field = 0 ORDER BY p.term"
                          ).fetchall()
    assert len(tf) == 2 and tf[0][0] > tf[1][0]  # tok1: twice and once per other hyphenated token; tok3: 1 + 1
    _postings_match_the_rows(url)
    store.close()


def test_migration_9_has_the_triggers_probe_the_postings_index(pg_server: PgServer) -> None:
    """The delete and update triggers join the changed rows' postings to ``memroute_postings``: with the
    default estimate of 1,000 rows a memory the planner hashed the whole table (10.6 s for a delete of 64
    memories at 1M, docs/benchmarks.md). Migration 9 sets the estimate to 10, on a new store and on one of
    version 8, and deletes still remove exactly the deleted rows' postings."""
    from memroute.stores.migrations.postgres import MIGRATIONS

    url = pg_server.new_database()
    store = open_store(url)
    store.bind_model("m", 4)
    store.close()
    rows_sql = "SELECT prorows FROM pg_proc WHERE proname = 'memroute_postings_of'"
    with psycopg.connect(url) as conn:
        assert conn.execute(rows_sql).fetchall() == [(10.0,)]
        conn.execute("ALTER FUNCTION memroute_postings_of(text, bigint, text, text, integer, integer, tsvector, "
                     "tsvector, float8) ROWS 1000")  # as migration 8 left it
        drop_token_vectors(conn)
        conn.execute("UPDATE memroute_meta SET value = '8' WHERE key = 'schema_version'")
    store = open_store(url)
    assert store.stats().schema_version == MIGRATIONS[-1][0] and MIGRATIONS[8][0] == 9
    with psycopg.connect(url) as conn:
        assert conn.execute(rows_sql).fetchall() == [(10.0,)]
    rng = random.Random(31)
    store.upsert([_record(i, rng) for i in range(300)])
    store.upsert([_record(i, rng, long=True) for i in range(0, 300, 3)])
    assert store.delete([f"m{i}" for i in range(1, 300, 4)], "o") == 75
    _postings_match_the_rows(url)
    store.close()


def test_a_rebuild_of_the_blocks_holds_no_writer_while_it_packs(pg_server: PgServer,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The rebuild past ``DEAD_ROWS`` packs the blocks while writes and searches go on: it is stopped just
    before its lock; meanwhile rows are updated (some of them listed before it started), added and deleted
    through another store without waiting, and searches stay exact. One more writer is inside its write when
    the rebuild reaches its lock: the rebuild waits for it. After it, a row written meanwhile is still listed
    (its new postings may be missing from the blocks), a row only noted is not, and every search is exact."""
    import threading

    from memroute.stores.pg_bm25 import BUILD_BLOCKS_SQL
    from memroute.stores.pg_ops import Done, resume
    from memroute.stores.postgres import execute

    url, store, rng = _bulk_loaded(pg_server, monkeypatch, 1200, 23)
    store.upsert([_record(i, rng, long=True) for i in range(0, 400, 2)])  # listed before the rebuild
    with psycopg.connect(url) as conn:
        row_of = dict(conn.execute("SELECT id, row_id FROM memroute_memories").fetchall())
    assert store.delete([f"m{i}" for i in range(1, 400, 4)], "o") == 100
    assert _changed(url) == 300

    build = psycopg.connect(url)
    op = store.op_build_blocks()
    step = resume(op)
    while not isinstance(step, Done) and step.query != BUILD_BLOCKS_SQL[-2]:  # up to its lock on the list
        step = resume(op, execute(build, step))
    assert not isinstance(step, Done)

    other = open_store(url)
    done: list[str] = []

    def write() -> None:
        other.upsert([_record(i, rng, long=True) for i in range(0, 100, 2)])  # listed before, written again
        other.upsert([_record(i, rng) for i in range(2000, 2050)])  # new rows
        other.delete([f"m{i}" for i in range(600, 700, 5)], "o")  # not listed before
        done.append("written")

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(timeout=60)
    assert done == ["written"]  # the writes did not wait for the rebuild
    _check_queries(url, other, rng, n=20)  # searches read the old blocks and list, exact

    inside = psycopg.connect(url)  # a writer inside its write (its trigger has run) when the rebuild locks
    inside.execute("UPDATE memroute_lexical SET tokens = tokens || ' w1', len_own = len_own + 1, tsv_own = "
                   "tsv_own || 'w1'::tsvector WHERE row_id = %s", (row_of["m150"],))
    finished: list[bool] = []

    def finish() -> None:
        s: Any = step
        while not isinstance(s, Done):
            s = resume(op, execute(build, s))
        build.commit()
        finished.append(True)

    builder = threading.Thread(target=finish)
    builder.start()
    builder.join(timeout=2)
    assert finished == []  # the rebuild's last statement waits for the writer inside its write
    inside.commit()
    builder.join(timeout=60)
    assert finished == [True]
    inside.close()
    build.close()

    with psycopg.connect(url) as conn:
        listed = {int(r[0]) for r in conn.execute("SELECT row_id FROM memroute_blocks_changed").fetchall()}
    written_again = {row_of[f"m{i}"] for i in range(0, 100, 2)} | {row_of["m150"]}
    assert written_again <= listed
    assert not listed & {row_of[f"m{i}"] for i in range(102, 400, 2) if i != 150}  # noted, unchanged: packed
    assert not listed & {row_of[f"m{i}"] for i in range(1, 400, 4)}  # deleted before: out of the blocks
    _blocks_cover_the_rows(url)
    _check_queries(url, other, rng, n=20)
    other.close()
    store.close()
