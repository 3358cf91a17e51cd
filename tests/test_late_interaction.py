"""Late interaction: token vectors kept at ingest (SQLite and PostgreSQL), the per-owner document frequencies, the
MaxSim column, and what happens with stores written before, memories without vectors and blobs that do not fit.

Most tests use a small deterministic embedder that gives token vectors through the same two methods the e5 pair
does (:class:`memroute.embed.tokens.TokenEmbedder`): the store and the reranker read nothing model-specific."""

from __future__ import annotations

import json
import logging
import sqlite3
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psycopg
import pytest

from memroute import Memory
from memroute.embed.tokens import (
    LATE_KEY,
    TokenVectors,
    centred,
    mean_of,
    mean_texts,
    ranking_id,
    token_mean,
    token_source,
)
from memroute.importing import import_jsonl
from memroute.retrieval import late
from memroute.retrieval.orchestrator import recall
from memroute.retrieval.rerank import FEATURES, LATE, RerankModel, reranker_for, small_names
from memroute.retrieval.rerank_fit import fit_reranker
from memroute.stores import open_store
from memroute.stores.copy import copy_store
from memroute.stores.token_blobs import BadTokenBlob, decoded, encoded
from tests.pg_server import PgServer, drop_token_vectors

TOKEN_DIM = 4


def _word(word: str, size: int) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(word.encode()))
    return rng.normal(size=size).astype(np.float32)


class WordTokens:
    """Pooled vectors and token vectors from words (one token a word, its id a hash): deterministic, instant."""

    model_id = "test/word-tokens"
    dimension = 6
    token_dimension = TOKEN_DIM

    def embed(self, texts: Sequence[str], side: str = "passage") -> np.ndarray:
        return self.embed_with_tokens(texts, side)[0]

    def embed_with_tokens(self, texts: Sequence[str], side: str = "passage") -> tuple[np.ndarray, list[TokenVectors]]:
        pooled, tokens = [], []
        for text in texts:
            words = text.casefold().split() or ["."]
            v = np.sum([_word(w, self.dimension) for w in words], axis=0)
            pooled.append(v / np.linalg.norm(v))
            tokens.append(centred([zlib.crc32(w.encode()) % 1000 for w in words],
                                  np.vstack([_word(w, TOKEN_DIM) for w in words]), np.zeros(TOKEN_DIM, np.float32)))
        return np.asarray(pooled, np.float32), tokens

    def embed_tokens(self, texts: Sequence[str], side: str = "passage") -> list[TokenVectors]:
        return self.embed_with_tokens(texts, side)[1]


def _ids(text: str) -> list[int]:
    return [zlib.crc32(w.encode()) % 1000 for w in text.casefold().split()]


def _expected_df(texts: Sequence[str]) -> dict[int, int]:
    df: Counter[int] = Counter()
    for t in texts:
        df.update(set(_ids(t)))
    return dict(df)


def _check_df(store: object, owner: str, texts: Sequence[str]) -> None:
    """The store's document frequencies are those of ``texts`` (its memories with token vectors), recounted."""
    want = _expected_df(texts)
    every = list(range(1000))
    n, df = store.token_df(every, owner)  # type: ignore[attr-defined]
    assert (n, df) == (len(texts), want)


def _late_model() -> RerankModel:
    """A reranker fitted with the late-interaction column (on rows made here)."""
    rng = np.random.default_rng(0)
    x = rng.random((200, len(FEATURES)))
    column = rng.random(200)
    y = (column + 0.3 * x[:, 0] > 0.8).astype(float)
    return fit_reranker(x, y, l2=1.0, late=column)


# ---------------------------------------------------------------------------------------------- pieces
def test_shipped_mean_is_the_mean_of_its_texts() -> None:
    from memroute.embed.e5_int8 import E5Int8, packaged_weights

    engine = E5Int8(packaged_weights())
    recomputed = mean_of([engine.embed_tokens(t, "passage")[2] for t in mean_texts()])
    assert token_mean().shape == (384,)
    assert np.abs(recomputed - token_mean()).max() < 1e-4


def test_token_blobs_round_trip_and_a_wrong_dimension_is_refused() -> None:
    rng = np.random.default_rng(1)
    tv = centred([5, 7, 5], rng.normal(size=(3, 8)), np.zeros(8, np.float32))
    ids, codes, scales = encoded(tv, "t")
    assert ids == "5 7 5" and len(codes) == 3 * 8 and len(scales) == 3 * 2
    back = decoded(ids, codes, scales, 8)
    assert back.ids.tolist() == [5, 7, 5]
    assert np.abs(back.vectors - tv.vectors).max() < 0.01
    with pytest.raises(BadTokenBlob):
        decoded(ids, codes, scales, 4)  # 24 bytes are not 3 tokens of 4
    with pytest.raises(BadTokenBlob):
        decoded(ids, codes[:-1], scales, 8)


def test_maxsim_is_the_idf_weighted_mean_of_each_query_tokens_best_cosine() -> None:
    rng = np.random.default_rng(2)
    zero = np.zeros(TOKEN_DIM, np.float32)
    q = centred([1, 2, 3], rng.normal(size=(3, TOKEN_DIM)), zero)
    docs = {"a": centred([1, 9], rng.normal(size=(2, TOKEN_DIM)), zero),
            "b": centred([2, 3, 4], rng.normal(size=(3, TOKEN_DIM)), zero)}
    df = {1: 1, 2: 2, 3: 1}
    got = late.maxsim(q, docs, ["b", "missing", "a"], 2, df)
    w = np.array([np.log(1 + (2 - df[t] + 0.5) / (df[t] + 0.5)) for t in (1, 2, 3)])
    for k, mid in ((0, "b"), (2, "a")):
        best = (q.vectors @ docs[mid].vectors.T).max(axis=1)
        assert got[k] == pytest.approx(float(w @ best / w.sum()), abs=1e-6)
    assert np.isnan(got[1])


def test_a_late_model_reads_a_missing_score_as_the_columns_mean_and_round_trips() -> None:
    model = _late_model()
    assert model.late and model.columns == (*FEATURES, LATE)
    x = np.random.default_rng(3).random((4, len(FEATURES)))
    mean = model.mean[len(FEATURES)]
    with_nan = model.score(x, False, np.array([0.2, np.nan, 0.9, np.nan]))
    filled = model.score(x, False, np.array([0.2, mean, 0.9, mean]))
    assert np.allclose(with_nan, filled)
    assert np.allclose(model.score(x), model.score(x, False, np.full(4, mean)))  # no column at all: every row average
    assert RerankModel.from_dict(model.to_dict()) == model
    small = fit_reranker(np.vstack([x] * 50), np.tile([1.0, 0, 0, 0], 50), late=np.tile([0.9, 0.1, 0.2, 0.3], 50),
                         small=np.tile([1.0, 1, 0, 0], 50))
    assert small.to_dict()["features"] == [*FEATURES, LATE, *small_names((*FEATURES, LATE))]
    assert RerankModel.from_dict(small.to_dict()) == small
    plain = fit_reranker(np.vstack([x] * 50), np.tile([1.0, 0, 0, 0], 50))
    assert not plain.late and np.allclose(plain.score(x), plain.score(x, False, np.ones(4)))  # it ignores the column


# ------------------------------------------------------------------------------------------- SQLite
def test_sqlite_keeps_token_vectors_and_frequencies_through_every_write(tmp_path: Path) -> None:
    emb = WordTokens()
    assert token_source(emb) is emb
    mem = Memory.open(f"sqlite:///{tmp_path / 'a.db'}", owner="o", embedder=emb)
    mem.remember("kiwi mango lime", id="m1", session="s1")
    mem.remember_many([{"id": "m2", "text": "mango papaya", "session": "s1"},
                       {"id": "m3", "text": "plum kiwi", "embed_text": "before plum kiwi after", "session": "s2"}])
    _check_df(mem.store, "o", ["kiwi mango lime", "mango papaya", "plum kiwi"])
    stored = mem.store.get_token_vectors(["m1", "m2", "m3", "nope"], "o", TOKEN_DIM)
    assert sorted(stored) == ["m1", "m2", "m3"]
    assert stored["m3"].ids.tolist() == _ids("plum kiwi")  # the memory's own text, not its embed_text
    mem.update("m1", text="kiwi fig")  # written again: its old tokens leave the frequencies
    _check_df(mem.store, "o", ["kiwi fig", "mango papaya", "plum kiwi"])
    assert mem.forget("m2") == 1
    _check_df(mem.store, "o", ["kiwi fig", "plum kiwi"])
    assert mem.store.get_token_vectors(["m2"], "o", TOKEN_DIM) == {}
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": "i1", "text": "grape kiwi"}) + "\n")
    import_jsonl(mem, path)
    _check_df(mem.store, "o", ["kiwi fig", "plum kiwi", "grape kiwi"])
    copy = open_store(f"sqlite:///{tmp_path / 'b.db'}")
    copy_store(mem.store, copy)
    _check_df(copy, "o", ["kiwi fig", "plum kiwi", "grape kiwi"])
    assert {k: v.ids.tolist() for k, v in copy.get_token_vectors(["m1", "i1"], "o", TOKEN_DIM).items()} == {
        "m1": _ids("kiwi fig"), "i1": _ids("grape kiwi")}
    copy.close()
    mem.forget(session="s2")
    _check_df(mem.store, "o", ["kiwi fig", "grape kiwi"])
    mem.forget(everything=True)
    _check_df(mem.store, "o", [])
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("SELECT count(*) FROM memory_tokens").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM token_df").fetchone()[0] == 0
    mem.close()


def _candidates(mem: Memory, text: str, model: RerankModel) -> dict[str, tuple[float | None, float | None]]:
    result = recall(mem.store, mem.embedder, text, owner="o", model=model)
    return {c.id: (c.features.get(LATE), c.rerank) for c in result.trace.candidates}


def _reads_only_the_first_candidates(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recall on ``mem`` (owner ``o``, more memories matching "kiwi" than :data:`late.CANDIDATES`, set to 3 here)
    asks the store for the first 3 candidates' token vectors alone, in the reranker's input order, scores them,
    and reads every later one as the column's mean."""
    monkeypatch.setattr(late, "CANDIDATES", 3)
    asked: list[list[str]] = []
    read = mem.store.get_token_vectors

    def spy(ids: Sequence[str], owner: str, dimension: int) -> dict[str, TokenVectors]:
        asked.append(list(ids))
        return read(ids, owner, dimension)

    monkeypatch.setattr(mem.store, "get_token_vectors", spy)
    model = _late_model()
    cands = recall(mem.store, mem.embedder, "kiwi", owner="o", model=model).trace.candidates
    assert len(cands) >= 5 and [c.fused_rank for c in cands] == list(range(len(cands)))  # the fused order
    assert asked == [[c.id for c in cands[:3]]]
    assert all(LATE in c.features for c in cands[:3]) and not any(LATE in c.features for c in cands[3:])
    stored = read([c.id for c in cands], "o", TOKEN_DIM)
    assert len(stored) == len(cands)  # every one has vectors: the later ones were not read, not missing
    query = mem.embedder.embed_with_tokens(["kiwi"], "query")[1][0]
    n_docs, df = mem.store.token_df([int(t) for t in query.ids], "o")
    full = late.maxsim(query, stored, [c.id for c in cands], n_docs, df)
    assert [c.features[LATE] for c in cands[:3]] == pytest.approx(full[:3].tolist())
    x = np.array([[c.features[f] for f in FEATURES] for c in cands])
    mean = model.mean[len(FEATURES)]
    expected = model.score(x, True, np.r_[full[:3], np.full(len(cands) - 3, mean)])
    assert [c.rerank for c in cands] == pytest.approx(expected.tolist())
    assert not np.allclose(expected, model.score(x, True, full))  # the mean, not the later ones' own MaxSim


_KIWI = ["kiwi mango lime", "mango kiwi papaya", "plum kiwi", "kiwi fig grape", "kiwi lemon", "kiwi kiwi melon",
         "banana kiwi"]


def test_sqlite_recall_reads_the_first_candidates_token_vectors_only(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    mem = Memory.open(f"sqlite:///{tmp_path / 'k.db'}", owner="o", embedder=WordTokens())
    mem.remember_many([{"id": f"m{i}", "text": t} for i, t in enumerate(_KIWI)])
    _reads_only_the_first_candidates(mem, monkeypatch)
    mem.close()


def test_a_sqlite_store_written_before_token_vectors_opens_and_recalls(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    mem = Memory.open(f"sqlite:///{path}", owner="o", embedder=WordTokens())
    mem.remember_many([{"id": f"m{i}", "text": t} for i, t in enumerate(
        ["kiwi mango lime", "mango papaya", "plum kiwi", "fig grape"])])
    mem.close()
    conn = sqlite3.connect(path)  # as memroute left it before migration 3
    conn.executescript("DROP TRIGGER memories_tokens_gone; DROP TABLE memory_tokens; DROP TABLE token_df; "
                       "PRAGMA user_version = 2;")
    conn.close()
    model = _late_model()
    mem = Memory.open(f"sqlite:///{path}", owner="o", embedder=WordTokens())
    found = _candidates(mem, "kiwi mango", model)
    assert found and all(score is None for score, _ in found.values())  # no token vectors: no column in the trace
    result = recall(mem.store, mem.embedder, "kiwi mango", owner="o", model=model)
    assert any("no token vectors" in n for n in result.trace.notes)
    mem.remember("kiwi mango banana", id="new")  # written after the migration: it has them
    found = _candidates(mem, "kiwi mango", model)
    assert found["new"][0] is not None and all(s is None for k, (s, _) in found.items() if k != "new")
    _check_df(mem.store, "o", ["kiwi mango banana"])
    mem.close()


def test_a_wrong_dimension_blob_is_detected_not_trusted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "bad.db"
    mem = Memory.open(f"sqlite:///{path}", owner="o", embedder=WordTokens())
    mem.remember_many([{"id": "m1", "text": "kiwi mango"}, {"id": "m2", "text": "mango papaya"}])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE memory_tokens SET codes = substr(codes, 1, 6) WHERE rowid = "
                 "(SELECT rowid FROM memories WHERE id = 'm1')")  # 2 tokens of 3 values: not 4-d
    conn.commit()
    conn.close()
    with caplog.at_level(logging.WARNING, logger="memroute.store"):
        assert sorted(mem.store.get_token_vectors(["m1", "m2"], "o", TOKEN_DIM)) == ["m2"]
    assert "token vectors not used" in caplog.text
    found = _candidates(mem, "kiwi mango", _late_model())
    assert found["m1"][0] is None and found["m2"][0] is not None and found["m1"][1] is not None
    # a reader expecting another dimension trusts none of them
    assert mem.store.get_token_vectors(["m1", "m2"], "o", 384) == {}
    mem.close()


def test_the_pair_gives_token_vectors_by_default_and_not_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from memroute.embed import models

    monkeypatch.setattr(models, "LATE_INTERACTION", None)  # MEMROUTE_LATE_INTERACTION unset
    on = models.EMBEDDERS["use-m3+e5-small"]()
    assert token_source(on) is on and ranking_id(on) == on.model_id + LATE_KEY
    alone = models.E5SmallEmbedder()  # e5-small has no reranker fitted on late interaction: off unless asked
    assert token_source(alone) is None and ranking_id(alone) == alone.model_id
    monkeypatch.setattr(models, "LATE_INTERACTION", False)  # MEMROUTE_LATE_INTERACTION=0
    off = models.EMBEDDERS["use-m3+e5-small"]()
    assert token_source(off) is None and ranking_id(off) == off.model_id
    assert reranker_for(ranking_id(on)).late and not reranker_for(ranking_id(off)).late
    monkeypatch.setattr(models, "LATE_INTERACTION", True)  # MEMROUTE_LATE_INTERACTION=1: e5-small alone too
    assert token_source(models.E5SmallEmbedder()) is not None


def test_the_late_interaction_setting() -> None:
    from memroute.embed.models import late_setting

    assert [late_setting(v) for v in (None, "", " ", "0", "off", "no", "1", "ON", "yes", "true")] == [
        None, None, None, False, False, False, True, True, True, True]


def test_the_pair_keeps_e5_token_vectors_and_recalls_with_late_interaction(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from memroute.embed import models

    monkeypatch.setattr(models, "LATE_INTERACTION", True)
    pair = models.PairEmbedder(models.UseM3Embedder(), models.E5SmallEmbedder())
    mem = Memory.open(f"sqlite:///{tmp_path / 'pair.db'}", owner="o", embedder=pair)
    mem.remember("My son Leo is allergic to shellfish", id="leo")
    mem.remember("We bought a flat in Kyoto last month", id="flat")
    stored = mem.store.get_token_vectors(["leo", "flat"], "o", 384)
    assert sorted(stored) == ["flat", "leo"]
    assert np.allclose(np.linalg.norm(stored["leo"].vectors, axis=1), 1.0, atol=0.02)
    result = mem.recall("Can we get paella for Leo's birthday dinner?")
    scores = {c.id: c.features[LATE] for c in result.trace.candidates}
    assert set(scores) == {"leo", "flat"} and scores["leo"] > scores["flat"]
    assert "late" in result.trace.stages_ms
    mem.close()


# --------------------------------------------------------------------------------------- PostgreSQL
def test_postgres_keeps_token_vectors_and_frequencies_through_every_write(pg_server: PgServer, tmp_path: Path) -> None:
    url = pg_server.new_database()
    mem = Memory.open(url, owner="o", embedder=WordTokens())
    mem.remember("kiwi mango lime", id="m1", session="s1")
    mem.remember_many([{"id": "m2", "text": "mango papaya", "session": "s1"},
                       {"id": "m3", "text": "plum kiwi", "embed_text": "before plum kiwi after", "session": "s2"}])
    _check_df(mem.store, "o", ["kiwi mango lime", "mango papaya", "plum kiwi"])
    assert mem.store.get_token_vectors(["m3"], "o", TOKEN_DIM)["m3"].ids.tolist() == _ids("plum kiwi")
    mem.update("m1", text="kiwi fig")
    _check_df(mem.store, "o", ["kiwi fig", "mango papaya", "plum kiwi"])
    assert mem.forget("m2") == 1
    _check_df(mem.store, "o", ["kiwi fig", "plum kiwi"])
    # SQLite -> PostgreSQL (the bulk load) and back keep them
    src = Memory.open(f"sqlite:///{tmp_path / 's.db'}", owner="p", embedder=WordTokens())
    src.remember_many([{"id": "a", "text": "grape kiwi"}, {"id": "b", "text": "lemon"}])
    target = open_store(pg_server.new_database())
    copy_store(src.store, target)
    _check_df(target, "p", ["grape kiwi", "lemon"])
    back = open_store(f"sqlite:///{tmp_path / 'back.db'}")
    copy_store(mem.store, back)
    _check_df(back, "o", ["kiwi fig", "plum kiwi"])
    for store in (back, target, src):
        store.close()
    # a wrong-dimension blob is left out (and the recall goes on)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE memroute_tokens SET codes = substring(codes from 1 for 5) WHERE row_id = "
                     "(SELECT row_id FROM memroute_memories WHERE owner = 'o' AND id = 'm1')")
    assert sorted(mem.store.get_token_vectors(["m1", "m3"], "o", TOKEN_DIM)) == ["m3"]
    found = _candidates(mem, "kiwi plum", _late_model())
    assert found["m1"][0] is None and found["m3"][0] is not None
    mem.forget(session="s2")
    _check_df(mem.store, "o", ["kiwi fig"])
    mem.forget(everything=True)
    _check_df(mem.store, "o", [])
    mem.close()


def test_postgres_recall_reads_the_first_candidates_token_vectors_only(pg_server: PgServer,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    mem = Memory.open(pg_server.new_database(), owner="o", embedder=WordTokens())
    mem.remember_many([{"id": f"m{i}", "text": t} for i, t in enumerate(_KIWI)])
    _reads_only_the_first_candidates(mem, monkeypatch)
    mem.close()


def test_a_postgres_store_written_before_token_vectors_opens_and_recalls(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    mem = Memory.open(url, owner="o", embedder=WordTokens())
    mem.remember_many([{"id": "m1", "text": "kiwi mango lime"}, {"id": "m2", "text": "mango papaya"}])
    mem.close()
    with psycopg.connect(url, autocommit=True) as conn:  # as memroute left it at schema version 9
        drop_token_vectors(conn)
        conn.execute("UPDATE memroute_meta SET value = '9' WHERE key = 'schema_version'")
    mem = Memory.open(url, owner="o", embedder=WordTokens())
    found = _candidates(mem, "kiwi mango", _late_model())
    assert set(found) == {"m1", "m2"} and all(s is None and p is not None for s, p in found.values())
    mem.remember("kiwi banana", id="m3")
    _check_df(mem.store, "o", ["kiwi banana"])
    assert _candidates(mem, "kiwi mango", _late_model())["m3"][0] is not None
    mem.close()


async def test_async_memory_on_postgres_reads_the_token_vectors_natively(pg_server: PgServer) -> None:
    from memroute.memory import AsyncMemory

    amem = await AsyncMemory.open(pg_server.new_database(), owner="o", embedder=WordTokens())
    await amem.remember_many([{"id": "m1", "text": "kiwi mango lime"}, {"id": "m2", "text": "fig grape"}])
    result = await amem.recall("kiwi mango")
    scores = {c.id: c.features.get(LATE, -1.0) for c in result.trace.candidates}
    assert scores["m1"] > scores.get("m2", -1.0) > -1.0 or "m2" not in scores
    assert amem.store is not None and await amem.store.token_df(_ids("kiwi"), "o") == (2, {_ids("kiwi")[0]: 1})
    await amem.close()
