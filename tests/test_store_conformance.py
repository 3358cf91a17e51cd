"""The store contract, run unchanged against every backend: SQLite (file and in memory) and PostgreSQL, the
latter through the sync store and through the asyncio store (``postgres-async``: each call awaited on an
event loop of its own, see ``tests.pg_server.SyncOverAsync``).

These tests talk to the Store protocol directly with hand-made vectors: the store never embeds, so the
contract is independent of any model.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memroute.errors import InputError, ModelMismatchError
from memroute.stores import MemoryRecord, StateEntry, Store, open_store
from memroute.types import MemoryItem, MemoryKind, Message, SearchFilter, Sensitivity
from tests.pg_server import SyncOverAsync

DIM = 8
NOW = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres", "postgres-async"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param.startswith("postgres"):
        url = request.getfixturevalue("pg_server").new_database()
    else:
        url = f"sqlite:///{tmp_path / 'c.db'}" if request.param == "sqlite-file" else "sqlite://:memory:"
    st: Store = SyncOverAsync(url) if request.param == "postgres-async" else open_store(url)  # type: ignore[assignment]
    st.bind_model("test-model", DIM)
    yield st
    st.close()


def vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def rec(mid: str, tokens: str, seed: int, owner: str = "a", **kw: object) -> MemoryRecord:
    item = MemoryItem(id=mid, owner=owner, text=tokens, created_at=NOW, **kw)  # type: ignore[arg-type]
    return MemoryRecord(item, tokens.split(), vec(seed))


def ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.id for h in hits]


def test_upsert_get_roundtrip(store: Store) -> None:
    r = rec("m1", "alpha beta", 1, session_id="s", kind=MemoryKind.EPISODE, reply="gamma",
            occurred_at=NOW, metadata={"k": [1, "二"]}, sensitivity=Sensitivity.PRIVATE, language="en")
    store.upsert([r])
    assert store.get(["m1"], "a") == [r.memory]
    assert store.get(["m1"], "b") == []
    np.testing.assert_array_equal(store.get_vectors(["m1"], "a")["m1"], r.vector)


def test_bm25_finds_and_ranks(store: Store) -> None:
    store.upsert([rec("m1", "apple banana", 1), rec("m2", "banana cherry cherry", 2), rec("m3", "durian", 3)])
    flt = SearchFilter(owner="a")
    assert ids(store.search_bm25(["cherry"], flt, 10)) == ["m2"]
    assert set(ids(store.search_bm25(["banana"], flt, 10))) == {"m1", "m2"}
    assert store.search_bm25(["nothing"], flt, 10) == []
    assert all(h.score > 0 for h in store.search_bm25(["banana"], flt, 10))


def test_hyphenated_words_are_found_whole_and_by_their_parts(store: Store) -> None:
    # the tokens as memroute.text.tokenize keeps them; the store indexes the parts (memroute.text.index_terms)
    store.upsert([rec("m1", "send follow-up front-end team", 1), rec("m2", "jira-123 open", 2),
                  rec("m3", "kiwi lime", 3), rec("m4", "follow-up lime", 4),
                  MemoryRecord(MemoryItem(id="m5", owner="a", text="x", created_at=NOW), ["durian"], vec(5),
                               ["e-mail", "durian"])])
    flt = SearchFilter(owner="a")
    for query in (["follow", "followup"], ["followup"], ["follow-up"], ["front", "end", "frontend"]):
        assert "m1" in ids(store.search_bm25(query, flt, 10)), query
    assert ids(store.search_bm25(["front-end"], flt, 10)) == ["m1"]
    assert ids(store.search_bm25(["jira-123"], flt, 10)) == ["m2"]  # still found whole
    assert ids(store.search_bm25(["jira123"], flt, 10)) == ["m2"]
    assert ids(store.search_bm25(["email"], flt, 10, weights=(1.0, 0.5))) == ["m5"]  # the context field too
    # the parts are not counted in a memory's length: "follow-up lime" is as long as "kiwi lime"
    lime = {h.id: h.score for h in store.search_bm25(["lime"], flt, 10)}
    assert lime["m3"] == pytest.approx(lime["m4"])
    assert [(list(r.tokens), list(r.context_tokens)) for r in store.iter_records() if r.memory.id == "m5"] == [
        (["durian"], ["e-mail", "durian"])]  # what is stored is the tokens, whole


def test_ties_at_the_cut_go_to_the_first_written(store: Store) -> None:
    # Short rows tie exactly above long ones; the top 5 must be the first five short rows written, on every
    # backend (a partial sort that cuts through a tie may keep any of them).
    short = np.random.default_rng(1).random(300) < 0.5
    store.upsert([rec(f"t{i:03d}", "kiwi" if short[i] else "kiwi mango papaya", 100 + i) for i in range(300)])
    top = ids(store.search_bm25(["kiwi"], SearchFilter(owner="a"), 5))
    assert top == [f"t{i:03d}" for i in np.flatnonzero(short)[:5]]


def test_bm25_query_syntax_is_plain_text(store: Store) -> None:
    store.upsert([rec("m1", "near and or not", 1)])
    flt = SearchFilter(owner="a")
    for hostile in (['"'], ["*"], ["NEAR"], ["AND"], ["-"], [":"], ['a"b'], ["col:x"], ["(", ")"]):
        store.search_bm25(hostile, flt, 10)  # must not raise
    # Operator words are plain terms, matched exactly (the tokenizer lower-cases upstream).
    assert ids(store.search_bm25(["near"], flt, 10)) == ["m1"]
    assert ids(store.search_bm25(["and", "zzz"], flt, 10)) == ["m1"]
    assert store.search_bm25(["NEAR"], flt, 10) == []


def reference_bm25(docs: dict[str, list[str]], query: list[str], k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """Okapi BM25 written out plainly, with Lucene's IDF log(1 + (N - n + 0.5) / (n + 0.5))."""
    import math

    n_docs = len(docs)
    avgdl = sum(len(d) for d in docs.values()) / n_docs
    scores: dict[str, float] = {}
    for term in set(query):
        df = sum(term in d for d in docs.values())
        if df == 0:
            continue
        idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
        for mid, d in docs.items():
            tf = d.count(term)
            if tf:
                scores[mid] = scores.get(mid, 0.0) + idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
    return scores


def test_bm25_scores_match_reference_and_rank_bm25(store: Store) -> None:
    from rank_bm25 import BM25Okapi

    docs = {f"d{i}": text.split() for i, text in enumerate([
        "red apple pie", "green apple", "apple apple apple banana", "banana split with cherry", "cherry pie",
        "plain water", "sparkling water with lemon", "lemon pie with apple", "kiwi", "kiwi kiwi smoothie"])}
    store.upsert([MemoryRecord(MemoryItem(id=k, owner="a", text=" ".join(v), created_at=NOW), v, vec(i))
                  for i, (k, v) in enumerate(docs.items())])
    flt = SearchFilter(owner="a")
    for query in (["apple"], ["pie", "cherry"], ["water", "lemon", "kiwi"], ["banana", "apple", "smoothie"]):
        got = {h.id: h.score for h in store.search_bm25(query, flt, 20)}
        want = reference_bm25(docs, query)
        assert got.keys() == want.keys()
        for k in want:
            assert got[k] == pytest.approx(want[k], rel=1e-5)
    # Single-term rankings agree with rank_bm25 (its IDF differs only by a constant per term).
    ref = BM25Okapi(list(docs.values()))
    for term in ("apple", "pie", "kiwi", "water"):
        ours = ids(store.search_bm25([term], flt, 20))
        theirs = [k for k, s in sorted(zip(docs, ref.get_scores([term]), strict=True), key=lambda x: (-x[1], x[0]))
                  if term in docs[k]]
        assert ours == theirs, term


def test_context_tokens_weighted(store: Store) -> None:
    own = rec("own", "zebra", 1)
    ctx = MemoryRecord(MemoryItem(id="ctx", owner="a", text="x", created_at=NOW), ["other"], vec(2), ["zebra"])
    store.upsert([own, ctx])
    flt = SearchFilter(owner="a")
    assert ids(store.search_bm25(["zebra"], flt, 10)) == ["own"]  # context excluded by default
    both = store.search_bm25(["zebra"], flt, 10, weights=(1.0, 0.3))
    assert ids(both) == ["own", "ctx"]


def test_vector_search_exact(store: Store) -> None:
    recs = [rec(f"m{i}", f"t{i}", i) for i in range(50)]
    store.upsert(recs)
    q = vec(7)
    hits = store.search_vector(q, SearchFilter(owner="a"), 5)
    sims = sorted(((float(r.vector @ q), r.memory.id) for r in recs), reverse=True)[:5]
    assert ids(hits) == [m for _, m in sims]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_filters_honoured_everywhere(store: Store) -> None:
    store.upsert([
        rec("ok", "word", 1, occurred_at=NOW - timedelta(days=1), session_id="s1"),
        rec("other-owner", "word", 1, owner="b", occurred_at=NOW - timedelta(days=1)),
        rec("expired", "word", 1, expires_at=NOW - timedelta(hours=1), occurred_at=NOW - timedelta(days=1)),
        rec("archived", "word", 1, archived=True, occurred_at=NOW - timedelta(days=1)),
        rec("secret", "word", 1, sensitivity=Sensitivity.SECRET, occurred_at=NOW - timedelta(days=1)),
        rec("old", "word", 1, occurred_at=NOW - timedelta(days=400)),
        rec("fact", "word", 1, kind=MemoryKind.FACT, occurred_at=NOW - timedelta(days=1), session_id="s2"),
    ])
    base = SearchFilter(owner="a", now=NOW)
    searches = {
        "bm25": lambda f: ids(store.search_bm25(["word"], f, 50)),
        "vector": lambda f: ids(store.search_vector(vec(1), f, 50)),
        "list": lambda f: [m.id for m in store.list_memories(f, 50)],
    }
    for name, search in searches.items():
        assert set(search(base)) == {"ok", "old", "fact"}, name
        assert "secret" in search(SearchFilter(owner="a", now=NOW, max_sensitivity=Sensitivity.SECRET)), name
        assert "expired" in search(SearchFilter(owner="a", now=NOW, include_expired=True)), name
        assert "archived" in search(SearchFilter(owner="a", now=NOW, include_archived=True)), name
        assert set(search(SearchFilter(owner="a", now=NOW, session_id="s1"))) == {"ok"}, name
        assert set(search(SearchFilter(owner="a", now=NOW, kinds=(MemoryKind.FACT,)))) == {"fact"}, name
        recent = SearchFilter(owner="a", now=NOW, start=NOW - timedelta(days=30), end=NOW)
        assert set(search(recent)) == {"ok", "fact"}, name
        assert search(SearchFilter(owner="nobody", now=NOW)) == [], name
    tflt = SearchFilter(owner="a", now=NOW, start=NOW - timedelta(days=30), end=NOW)
    assert set(ids(store.search_time(tflt, 50))) == {"ok", "fact"}


def test_delete_removes_from_every_index(store: Store) -> None:
    store.upsert([rec("m1", "kiwi", 1), rec("m2", "kiwi", 2)])
    flt = SearchFilter(owner="a")
    assert store.delete(["m1"], "b") == 0  # another owner cannot delete it
    assert store.delete(["m1"], "a") == 1
    assert ids(store.search_bm25(["kiwi"], flt, 10)) == ["m2"]
    assert "m1" not in ids(store.search_vector(vec(1), flt, 10))
    assert store.get(["m1"], "a") == []


def test_upsert_replaces_in_every_index(store: Store) -> None:
    store.upsert([rec("m1", "lemon", 1)])
    store.upsert([rec("m1", "mango", 2)])
    flt = SearchFilter(owner="a")
    assert store.search_bm25(["lemon"], flt, 10) == []
    assert ids(store.search_bm25(["mango"], flt, 10)) == ["m1"]
    assert store.search_vector(vec(2), flt, 1)[0].score == pytest.approx(1.0, abs=1e-5)
    assert store.count("a") == 1


def test_same_id_for_two_owners_is_two_memories(store: Store) -> None:
    store.upsert([rec("same", "one", 1, owner="a"), rec("same", "two", 2, owner="b")])
    assert store.get(["same"], "a")[0].text == "one"
    assert store.get(["same"], "b")[0].text == "two"


def test_delete_where_session_and_owner(store: Store) -> None:
    store.upsert([rec("m1", "x", 1, session_id="s1"), rec("m2", "x", 2, session_id="s2"), rec("m3", "x", 3, owner="b")])
    store.add_messages([Message("s1", "user", "hi", NOW, "a"), Message("s2", "user", "yo", NOW, "a")])
    assert store.delete_where("a", "s1") == 1
    assert store.recent_messages("s1", "a") == []
    assert len(store.recent_messages("s2", "a")) == 1
    assert store.delete_where("a") == 1
    assert store.count() == 1


def test_bad_vectors_rejected_without_partial_write(store: Store) -> None:
    good = rec("good", "x", 1)
    bad_dim = MemoryRecord(MemoryItem(id="bad", owner="a", text="x"), ["x"], np.ones(DIM + 1, np.float32))
    nan = MemoryRecord(MemoryItem(id="nan", owner="a", text="x"), ["x"], np.full(DIM, np.nan, np.float32))
    for bad in (bad_dim, nan):
        with pytest.raises(InputError):
            store.upsert([good, bad])
        assert store.count() == 0
    with pytest.raises(InputError):
        store.search_vector(np.ones(DIM + 2, np.float32), SearchFilter(owner="a"), 3)


def test_write_batch_is_one_transaction(store: Store) -> None:
    """Memories, messages and a resume point are written together, or (one bad record) none of them."""
    turns = [Message("s", "user", f"t{i}", NOW, "a") for i in range(3)]
    store.write_batch([rec("m1", "x", 1)], turns, StateEntry("import", "k", {"next_line": 2}, "a"))
    assert (store.count(), len(store.recent_messages("s", "a")), store.get_state("import", "k", "a")) == (
        1, 3, {"next_line": 2})
    bad = MemoryRecord(MemoryItem(id="bad", owner="a", text="x"), ["x"], np.ones(DIM + 1, np.float32))
    with pytest.raises(InputError):
        store.write_batch([rec("m2", "y", 2), bad], turns, StateEntry("import", "k", {"next_line": 9}, "a"))
    assert (store.count(), len(store.recent_messages("s", "a")), store.get_state("import", "k", "a")) == (
        1, 3, {"next_line": 2})
    late = Message("s", "user", "late", datetime(1000, 1, 1, tzinfo=UTC), "a")  # outside the accepted range
    with pytest.raises(InputError):
        store.write_batch([rec("m3", "z", 3)], [late], StateEntry("import", "k", {"next_line": 9}, "a"))
    assert (store.count(), store.get_state("import", "k", "a")) == (1, {"next_line": 2})
    store.write_batch([], [], StateEntry("import", "k", {"done": True}, "a"))  # state alone
    assert store.get_state("import", "k", "a") == {"done": True}


def test_model_binding(store: Store) -> None:
    store.bind_model("test-model", DIM)
    with pytest.raises(ModelMismatchError, match="test-model"):
        store.bind_model("other-model", DIM)


def test_messages_last_n_in_order(store: Store) -> None:
    store.add_messages([Message("s", "user" if i % 2 == 0 else "assistant", f"m{i}", NOW, "a") for i in range(30)])
    last = store.recent_messages("s", "a", limit=5)
    assert [m.text for m in last] == ["m25", "m26", "m27", "m28", "m29"]
    assert store.recent_messages("s", "b") == []


def test_state(store: Store) -> None:
    assert store.get_state("route", "s1", "a") is None
    store.put_state("route", "s1", {"agent": "x"}, "a")
    store.put_state("route", "s1", {"agent": "y"}, "a")
    assert store.get_state("route", "s1", "a") == {"agent": "y"}
    assert store.get_state("route", "s1", "b") is None
    assert store.list_state("route", "a") == [("s1", {"agent": "y"})]


def test_index_compaction_after_mass_delete(store: Store) -> None:
    store.upsert([rec(f"m{i}", f"common w{i % 7}", i) for i in range(3000)])
    flt = SearchFilter(owner="a")
    store.search_vector(vec(1), flt, 1)  # build the in-memory index before deleting
    assert store.delete([f"m{i}" for i in range(2500)], "a") == 2500  # enough to trigger compaction
    survivors = {f"m{i}" for i in range(2500, 3000)}
    assert set(ids(store.search_bm25(["common"], flt, 1000))) == survivors
    assert set(ids(store.search_vector(vec(2999), flt, 1000))) == survivors
    assert ids(store.search_vector(vec(2999), flt, 1)) == ["m2999"]
    store.upsert([rec("new", "common fresh", 5)])
    assert ids(store.search_bm25(["fresh"], flt, 5)) == ["new"]


def test_filtered_vector_search_is_exact(store: Store) -> None:
    rng = np.random.default_rng(3)
    recs = []
    for i in range(1500):
        owner = "a" if i % 10 < 8 else "b"
        v = rng.standard_normal(DIM).astype(np.float32)
        item = MemoryItem(id=f"m{i}", owner=owner, text="t", created_at=NOW, archived=i % 7 == 0,
                          session_id=f"s{i % 3}")
        recs.append(MemoryRecord(item, ["t"], v / np.linalg.norm(v)))
    store.upsert(recs)
    for owner, session in (("a", None), ("b", None), ("a", "s1")):
        flt = SearchFilter(owner=owner, session_id=session)
        for seed in range(5):
            q = vec(100 + seed)
            want = sorted(((float(r.vector @ q), r.memory.id) for r in recs
                           if r.memory.owner == owner and not r.memory.archived
                           and (session is None or r.memory.session_id == session)), reverse=True)[:10]
            got = store.search_vector(q, flt, 10)
            if "postgres" in store.url:  # HNSW is approximate: most of the exact top 10 must be there
                assert len(set(ids(got)) & {m for _, m in want}) >= 8
            else:
                assert ids(got) == [m for _, m in want]
