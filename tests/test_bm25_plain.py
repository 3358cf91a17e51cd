"""The in-memory index's BM25 (numpy over CSR postings) ranks as a plain BM25 written out here does, on a corpus
where a few terms are in most rows, with deletes, owner and session filters and small and large limits (the
check a faster BM25 must pass; a MaxScore cut was tried against it and measured no faster at 1M rows)."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memroute.stores import bm25, memory_index
from memroute.stores.memory_index import MemoryIndex, RowMeta
from memroute.types import MemoryItem, SearchFilter

WEIGHTS = (1.0, 0.5)


@pytest.fixture(autouse=True, params=["computed", "kept"])
def impacts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test twice: as the production thresholds have it here (no posting list long enough to keep its
    scores), and with every term's scores kept between searches, few enough that older ones are evicted."""
    if request.param == "kept":
        monkeypatch.setattr(memory_index._Impacts, "MIN_POSTINGS", 1)
        monkeypatch.setattr(memory_index._Impacts, "MAX_POSTINGS", 3000)


@pytest.fixture(autouse=True, params=["as set", "every row's score", "every row's score, by groups",
                                      "the postings' scores", "the postings' own sums"])
def cut(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test also with the best rows always cut from every row's score (``_top_scored``; its rows at the cut
    found by a pass over every row, as these small indexes have it, or from their groups), always from the
    postings' own scores (``_top_passing``) taken from every row's sums, and always from the postings' sums made in
    the thread's kept buffer without every row's (``_sum_few``)."""
    if request.param.startswith("every row's score"):
        monkeypatch.setattr(memory_index, "_DENSE_SHARE", 10**9)
    if request.param == "every row's score, by groups":
        monkeypatch.setattr(memory_index, "_GROUP_SHARE", 0)
    elif request.param == "the postings' scores":
        monkeypatch.setattr(memory_index, "_DENSE_SHARE", 0)
        monkeypatch.setattr(memory_index, "_FEW_SHARE", 10**9)
    elif request.param == "the postings' own sums":
        monkeypatch.setattr(memory_index, "_DENSE_SHARE", 0)
        monkeypatch.setattr(memory_index, "_FEW_SHARE", 0)


def corpus(n: int, seed: int) -> list[tuple[str, str, list[str], list[str]]]:
    """(owner, session, own tokens, context tokens): Zipf-like words, so "c0".."c3" are in most rows and
    "r<i>" in a handful."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        own = [f"c{int(k)}" for k in rng.integers(0, 4, int(rng.integers(1, 6)))]
        own += [f"w{int(k)}" for k in rng.zipf(1.3, int(rng.integers(0, 6))) if k < 5000]
        own += [f"r{i // 3}"] if i % 7 == 0 else []
        ctx = [f"c{int(k)}" for k in rng.integers(0, 4, int(rng.integers(0, 3)))]
        rows.append((f"o{i % 3}", f"s{i % 5}", own, ctx))
    return rows


def plain_bm25(rows: dict[int, tuple[str, str, list[str], list[str]]], terms: list[str], owner: str,
               session: str | None, limit: int) -> list[tuple[str, float]]:
    """Every row's score, the long way (the rows in insertion order break ties)."""
    w_own, w_ctx = WEIGHTS
    length = {r: w_own * len(o) + w_ctx * len(c) for r, (_, _, o, c) in rows.items()}
    avgdl = sum(length.values()) / len(rows)
    counts = {r: (Counter(o), Counter(c)) for r, (_, _, o, c) in rows.items()}
    tfs = {r: {t: w_own * co[t] + w_ctx * cc[t] for t in set(terms)} for r, (co, cc) in counts.items()}
    df = {t: sum(1 for x in tfs.values() if x[t] > 0) for t in set(terms)}
    out = []
    for r, (own_by, sess, _, _) in rows.items():
        if own_by != owner or (session is not None and sess != session):
            continue
        score = 0.0
        for t in set(terms):
            if tfs[r][t] > 0:
                score += math.log(1 + (len(rows) - df[t] + 0.5) / (df[t] + 0.5)) * tfs[r][t] * (bm25.K1 + 1) / (
                    tfs[r][t] + bm25.K1 * (1 - bm25.B + bm25.B * length[r] / avgdl))
        if score > 0:
            out.append((f"m{r}", score))
    out.sort(key=lambda x: -x[1])  # stable: insertion order among ties
    return out[:limit]


def put(index: MemoryIndex, r: int, row: tuple[str, str, list[str], list[str]]) -> None:
    """Row ``r`` of a :func:`corpus` into the index (a constant vector: only BM25 is read here)."""
    owner, session, own, ctx = row
    index.put(r, RowMeta.of(MemoryItem(id=f"m{r}", owner=owner, text="x", session_id=session)),
              np.ones(4, dtype=np.float32) / 2, own, ctx)


def filled(rows: dict[int, tuple[str, str, list[str], list[str]]]) -> MemoryIndex:
    index = MemoryIndex(4)
    for r, row in rows.items():
        put(index, r, row)
    return index


@pytest.mark.parametrize("seed", [1, 2])
def test_bm25_ranks_as_a_plain_bm25(seed: int) -> None:
    rows = dict(enumerate(corpus(3000, seed), start=1))
    index = filled(rows)
    for r in range(5, 3000, 11):  # some deleted rows: not counted in df, N or the average length
        index.remove(r)
        del rows[r]
    rng = np.random.default_rng(seed + 10)
    queries = [["r5", "c0", "c1"], ["r100", "r101", "c2", "c3", "c0"], ["w1", "c0"], ["c0", "c1", "c2", "c3"],
               ["r7", "w2", "w3", "c1"], ["nothing", "c3"]]
    queries += [[f"r{int(rng.integers(0, 1000))}", *[f"c{int(k)}" for k in rng.integers(0, 4, 3)],
                 f"w{int(rng.zipf(1.5))}"] for _ in range(12)]
    for terms in queries:
        for owner, session, limit in (("o0", None, 3), ("o1", None, 10), ("o2", "s2", 2), ("o0", None, 50)):
            got = index.search_bm25(terms, SearchFilter(owner=owner, session_id=session), limit, WEIGHTS)
            want = plain_bm25(rows, terms, owner, session, limit)
            assert [h.id for h in got] == [w[0] for w in want], (terms, owner, session, limit)
            assert np.allclose([h.score for h in got], [w[1] for w in want], rtol=1e-5)


def test_bm25_stays_plain_while_rows_come_and_go() -> None:
    """Without deleted rows the index scores every posting as it is, and it keeps each row's length norm between
    searches: after each put and delete the scores must be the plain ones again (a stale norm or average length
    would change them). An owner with few rows among the best makes the filter look past them (the best rows are
    filtered first)."""
    rows = dict(enumerate(corpus(2000, 3), start=1))
    index = filled(rows)
    queries = [["r5", "c0", "c1"], ["c0", "c1", "c2", "c3"], ["w1", "c0", "r300"], ["c2"]]

    def check() -> None:
        for terms in queries:
            for owner, session, limit in (("o0", None, 5), ("o1", "s3", 40), ("o2", None, 200)):
                got = index.search_bm25(terms, SearchFilter(owner=owner, session_id=session), limit, WEIGHTS)
                want = plain_bm25(rows, terms, owner, session, limit)
                assert [h.id for h in got] == [w[0] for w in want], (terms, owner, session, limit)
                assert np.allclose([h.score for h in got], [w[1] for w in want], rtol=1e-5)

    check()
    more = corpus(2300, 4)[2000:]
    for r, row in enumerate(more, start=2001):  # longer rows: the average length moves
        row = (row[0], row[1], row[2] * 3, row[3])
        rows[r] = row
        put(index, r, row)
    check()
    for r in (7, 8, 2001):
        index.remove(r)
        del rows[r]
    check()
    rows[9] = ("o0", "s3", ["r5", "r5", "c0"], [])  # put again: a new slot, the old one deleted
    put(index, 9, rows[9])
    check()
    assert index.search_bm25(["c0"], SearchFilter(owner="nobody"), 5, WEIGHTS) == []
    assert index.search_bm25(["c0", "c1"], SearchFilter(owner="o0", session_id="none"), 5, WEIGHTS) == []


def test_bm25_searches_at_once_from_several_threads() -> None:
    """The index keeps one array of row scores for its searches; a search made while another uses it gets an
    array of its own: threads searching at once get what one thread gets."""
    import threading

    index = filled(dict(enumerate(corpus(3000, 5), start=1)))
    queries = [[f"r{k}", "c0", f"c{k % 4}", f"w{k % 9}"] for k in range(60)]
    want = [index.search_bm25(q, SearchFilter(owner="o1"), 10, WEIGHTS) for q in queries]
    got: dict[int, list[object]] = {}

    def run(t: int) -> None:
        got[t] = [index.search_bm25(q, SearchFilter(owner="o1"), 10, WEIGHTS) for q in queries[t % 3 :] * 3]

    threads = [threading.Thread(target=run, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for t, lists in got.items():
        assert lists == (want[t % 3 :] * 3)


def test_bm25_inside_a_time_range_is_its_search_without_the_range_filtered_by_time() -> None:
    """Rows with and without a time, some deleted; ranges of a day to most of the rows, an end that is a row's own
    time (inclusive), and a range that holds none of an owner's rows, at limits that make the cut grow."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = corpus(3000, 6)
    index = MemoryIndex(4)
    when: dict[str, datetime | None] = {}
    for r, (owner, session, own, ctx) in enumerate(rows, start=1):
        at = None if r % 13 == 0 else t0 + timedelta(minutes=int(np.random.default_rng([6, r]).integers(0, 90_000)))
        when[f"m{r}"] = at
        index.put(r, RowMeta.of(MemoryItem(id=f"m{r}", owner=owner, text="x", session_id=session, occurred_at=at)),
                  np.ones(4, dtype=np.float32) / 2, own, ctx)
    for r in range(3, 3000, 17):
        index.remove(r)
    ranges = [(t0, t0 + timedelta(days=1)), (t0 + timedelta(days=10), t0 + timedelta(days=40)),
              (None, t0 + timedelta(days=55)), (t0 + timedelta(days=5), None), (t0 - timedelta(days=9), t0),
              (t0, when["m100"])]
    for terms in (["c0", "c1", "c2", "c3"], ["r5", "c0", "w1"], ["w2", "w3", "c1"], ["c2"]):
        for start, end in ranges:
            for owner, limit in (("o0", 3), ("o1", 40), ("o2", 400)):
                got = index.search_bm25(terms, SearchFilter(owner=owner, start=start, end=end), limit, WEIGHTS)
                every = index.search_bm25(terms, SearchFilter(owner=owner), 3000, WEIGHTS)
                want = [h for h in every if (at := when[h.id]) is not None and (start is None or at >= start)
                        and (end is None or at <= end)][:limit]
                assert got == want, (terms, start, end, owner, limit)


def test_bm25_terms_asked_again_are_answered_from_their_kept_sums_until_a_change() -> None:
    """A set of terms searched a second time is kept (the rows that have a term and their sums) and later searches
    answer from it, with any filter and limit, as the plain BM25 does; a put or a delete drops it (the scores must
    be the plain ones of the new rows). Other terms are searched between them (the last search's sums are kept
    anyway)."""
    rows = dict(enumerate(corpus(2000, 7), start=1))
    index = filled(rows)
    terms = ["r5", "w1", "w2", "w7", "c2"]
    computed = 0
    scores = index._bm25_scores

    def counted(tokens: list[str], *args: object) -> object:
        nonlocal computed
        computed += set(tokens) == set(terms)
        return scores(tokens, *args)  # type: ignore[arg-type]

    index._bm25_scores = counted  # type: ignore[assignment,method-assign]

    def check(owner: str, session: str | None, limit: int) -> None:
        index.search_bm25([f"w{owner}{limit}", "c1", "r8"], SearchFilter(owner="o0"), 5, WEIGHTS)  # asked once
        got = index.search_bm25(terms, SearchFilter(owner=owner, session_id=session), limit, WEIGHTS)
        want = plain_bm25(rows, terms, owner, session, limit)
        assert [h.id for h in got] == [w[0] for w in want], (owner, session, limit)
        assert np.allclose([h.score for h in got], [w[1] for w in want], rtol=1e-5)

    for owner, session, limit in (("o0", None, 5), ("o1", "s3", 40), ("o2", None, 200), ("o0", "s1", 3)):
        check(owner, session, limit)
    assert computed == 2  # the first two searches computed the sums (the second kept them), the later ones did not
    for r in (7, 8, 9):
        index.remove(r)
        del rows[r]
    rows[2001] = ("o1", "s3", ["r5", "w1", "w1", "c2"], [])
    put(index, 2001, rows[2001])
    for owner, session, limit in (("o1", "s3", 40), ("o0", None, 5), ("o1", "s3", 40)):
        check(owner, session, limit)
    assert computed == 4


def test_bm25_kept_term_sets_are_evicted_beyond_their_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for one kept set: two sets asked in turn evict each other and are computed again, with the plain
    answers; a set larger than the room is never kept."""
    rows = dict(enumerate(corpus(1500, 8), start=1))
    index = filled(rows)
    sets = [["r5", "w3", "w9"], ["r9", "w2", "w5"], ["c0", "c1", "c2", "c3"]]
    sizes = []
    for terms in sets:  # what each set keeps, by the path its search takes here
        for _ in range(2):
            index.search_bm25(terms, SearchFilter(owner="o1"), 20, WEIGHTS)
            index.search_bm25(["nothing", "r1"], SearchFilter(owner="o1"), 20, WEIGHTS)  # not the last search
        sizes.append(memory_index._Repeated.size(index._repeated._kept[(frozenset(terms), *WEIGHTS, index._changes)]))
    room = max(sizes[:2])
    monkeypatch.setattr(memory_index._Repeated, "KEEP_BYTES", room)
    index._repeated = memory_index._Repeated()  # nothing kept or seen
    was_kept = 0
    for _ in range(4):
        for terms in sets:
            got = index.search_bm25(terms, SearchFilter(owner="o1"), 20, WEIGHTS)
            want = plain_bm25(rows, terms, "o1", None, 20)
            assert [h.id for h in got] == [w[0] for w in want], terms
            assert np.allclose([h.score for h in got], [w[1] for w in want], rtol=1e-5)
            kept = index._repeated._kept
            assert len(kept) <= 1 and index._repeated._held == sum(map(memory_index._Repeated.size, kept.values()))
            assert index._repeated._held <= room
            if sizes[2] > room:
                assert (frozenset(sets[2]), *WEIGHTS, index._changes) not in kept
            was_kept += len(kept)
    assert was_kept


@pytest.mark.parametrize(("w_own", "w_ctx"), [(1.0, 0.5), (1.0, 0.0), (0.7, 0.3), (2.0, 1.0)])
def test_posting_scores_are_bit_for_bit_the_formulas(w_own: float, w_ctx: float) -> None:
    """The index computes a term's posting scores with fewer new arrays (:func:`bm25.weighted_frequencies`,
    :func:`bm25.impacts`); they must be the very float32 numbers of the expressions they replace, or a ranking
    could change between versions (checked: scaling by ``idf * (k1 + 1)`` at once changes most of them)."""
    rng = np.random.default_rng(7)
    own = rng.integers(0, 7, 50_000).astype(np.float32)
    ctx = rng.integers(0, 4, 50_000).astype(np.float32)
    dl = w_own * rng.integers(1, 300, 50_000).astype(np.float32) + w_ctx * rng.integers(0, 90, 50_000).astype(
        np.float32)
    norm = bm25.length_norm(dl, 41.37)
    tf = bm25.weighted_frequencies(own, ctx, w_own, w_ctx)
    want_tf = w_own * own + w_ctx * ctx
    assert tf.dtype == want_tf.dtype == np.float32
    assert tf.tobytes() == want_tf.tobytes()
    for df in (1, 77, 30_000, 999_999):
        term_idf = bm25.idf(1_000_000, df)
        got = bm25.impacts(term_idf, tf, norm.copy())
        want = bm25.normed_term_score(term_idf, want_tf, norm)
        assert got.dtype == want.dtype == np.float32
        assert got.tobytes() == want.tobytes()


def test_bm25_threads_computing_at_once_get_the_scores_of_one_thread() -> None:
    """Each search sums its posting scores in its thread's own buffer: threads each computing new term sets at once
    get, bit for bit, what one thread gets from an index built the same way."""
    import threading

    rows = dict(enumerate(corpus(3000, 6), start=1))
    alone, shared = filled(rows), filled(rows)
    queries = [[f"r{k}", f"r{k + 1}", "c0", f"c{k % 4}", f"w{k % 13}", f"w{k % 7 + 20}"][: 2 + k % 5]
               for k in range(300)]
    want = [alone.search_bm25(q, SearchFilter(owner="o2"), 20, WEIGHTS) for q in queries]
    got: dict[int, list[object]] = {}

    def run(t: int) -> None:
        got[t] = [shared.search_bm25(q, SearchFilter(owner="o2"), 20, WEIGHTS) for q in queries[t::6]]

    threads = [threading.Thread(target=run, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(1 for w in want if w) >= 200  # most find rows
    for t, lists in got.items():
        assert lists == want[t::6]
