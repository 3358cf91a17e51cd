"""The exact top-k cut of the in-memory BM25 (:mod:`memroute.stores.bm25_cut`) answers as the full sum does: the same
ids, order and float scores (``==``) on random corpora with a few words in most rows, random owner / session filters,
deletes, limits and field weights; and the comparison catches a bound that is too small."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memroute.stores import bm25_cut, memory_index
from memroute.stores.memory_index import MemoryIndex, RowMeta
from memroute.types import MemoryItem, ScoredId, SearchFilter


def built(seed: int, n: int) -> MemoryIndex:
    """Rows of Zipf words: "c0".."c5" in most rows, "w<k>" from common to rare, owners o0-o2, sessions s0-s4."""
    rng = np.random.default_rng(seed)
    index = MemoryIndex(4)
    for i in range(n):
        own = [f"c{int(k)}" for k in rng.integers(0, 6, int(rng.integers(1, 5)))]
        own += [f"w{int(k)}" for k in rng.zipf(1.4, int(rng.integers(0, 8))) if k < 3000]
        ctx = [f"w{int(k)}" for k in rng.zipf(1.6, int(rng.integers(0, 4))) if k < 3000]
        meta = RowMeta.of(MemoryItem(id=f"m{i}", text="", owner=f"o{i % 3}", session_id=f"s{i % 5}"))
        index.put(i, meta, rng.standard_normal(4).astype(np.float32), own, ctx)
    for i in rng.choice(n, n // 20, replace=False).tolist() if seed % 2 else []:
        index.remove(i)  # half the corpora have deleted rows
    return index


def searches(seed: int, count: int) -> list[tuple[list[str], SearchFilter, int, tuple[float, float]]]:
    rng = np.random.default_rng(seed + 1000)
    out = []
    for _ in range(count):
        terms = [f"c{int(k)}" for k in rng.integers(0, 6, int(rng.integers(0, 4)))]
        terms += [f"w{int(k)}" for k in rng.zipf(1.3, int(rng.integers(1, 10))) if k < 3000]
        session = None if rng.random() < 0.6 else f"s{int(rng.integers(0, 5))}"
        flt = SearchFilter(owner=f"o{int(rng.integers(0, 3))}", session_id=session)
        limit = int(rng.choice([1, 3, 10, 15, 50]))
        weights = ((1.0, 0.5), (1.0, 0.0), (1.0, 1.0))[int(rng.integers(0, 3))]
        out.append((terms, flt, limit, weights))
    return out


def answers(index: MemoryIndex, asked: list[tuple[list[str], SearchFilter, int, tuple[float, float]]],
            cut: bool) -> list[list[ScoredId]]:
    if not cut:
        index._worth_a_cut = lambda *a: False  # type: ignore[method-assign]
    return [index.search_bm25(terms, flt, limit, weights) for terms, flt, limit, weights in asked]


@pytest.fixture
def always(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The cut tried at every search (whatever its postings) and never given up for the postings it sums whole;
    counts the searches it answered."""
    monkeypatch.setattr(memory_index, "_CUT_SHARE", 10**9)
    monkeypatch.setattr(bm25_cut, "MAX_SHARE", 1.0)
    counts = {"tried": 0, "cut": 0}
    real = bm25_cut.cut

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        counts["tried"] += 1
        counts["cut"] += found is not None
        return found

    monkeypatch.setattr(bm25_cut, "cut", counted)
    return counts


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_cut_answers_as_the_full_sum(seed: int, always: dict[str, int]) -> None:
    asked = searches(seed, 150)
    want = answers(built(seed, 3000), asked, cut=False)
    got = answers(built(seed, 3000), asked, cut=True)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert [(h.id, h.score) for h in g] == [(h.id, h.score) for h in w], asked[i]
    assert always["cut"] >= 30, always  # the cut answered many of them (not only the full sum compared with itself)


def test_a_bound_too_small_is_caught(always: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """With every term's bound halved the cut drops rows that belong in the answer, and the comparison above sees it
    (so it can fail)."""
    asked = searches(1, 150)
    want = answers(built(1, 3000), asked, cut=False)
    real = bm25_cut.Term.bound
    monkeypatch.setattr(bm25_cut.Term, "bound", lambda self, min_norm: real(self, min_norm) / 2)
    got = answers(built(1, 3000), asked, cut=True)
    assert sum([(h.id, h.score) for h in g] != [(h.id, h.score) for h in w] for g, w in zip(got, want, strict=True))


def test_exact_scores_are_the_sums_of_bincount() -> None:
    """A row's score is its terms' scores added to 0.0 in the terms' order, in float64, as ``np.bincount`` over the
    concatenated postings adds them: the same bits, for rows with one term and with many."""
    rng = np.random.default_rng(5)
    rows = 5000
    norms = rng.uniform(0.3, 3.0, rows).astype(np.float32)
    terms = []
    for t in range(12):
        slots = np.sort(rng.choice(rows, int(rng.integers(10, 4000)), replace=False)).astype(np.int32)
        tf = rng.integers(1, 4, len(slots)).astype(np.float32) * np.float32(0.5)
        terms.append(bm25_cut.Term(f"t{t}", slots, tf, float(rng.uniform(0.01, 9.0))))
    every = np.bincount(np.concatenate([t.slots for t in terms]).astype(np.intp),
                        weights=np.concatenate([t.scores(norms) for t in terms]).astype(np.float64), minlength=rows)
    for t in terms:
        t.impact = None  # computed again where looked up
    asked = np.sort(rng.choice(rows, 700, replace=False)).astype(np.int64)
    assert (bm25_cut.exact_scores(terms, asked, norms) == every[asked]).all()
