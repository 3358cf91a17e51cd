"""The in-memory 8-bit first pass of mid-sized exact KNN searches (``quantized.ByteCopy``) returns exactly what
faiss's full float32 scan returns: the same rows in the same order with the same score bits."""

from __future__ import annotations

import numpy as np
import pytest

from memroute.stores import quantized, time_copy
from memroute.stores.memory_index import MemoryIndex, RowMeta
from memroute.stores.quantized import ByteCopy
from memroute.types import MemoryItem, ScoredId, SearchFilter

DIM = 64


def clustered(n: int, seed: int, noise: float = 0.02) -> np.ndarray:
    """Near-duplicate neighbourhoods, as real message embeddings have: the hard case for the bound."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n // 50, 1), DIM)).astype(np.float32)
    m = centres[rng.integers(0, len(centres), n)] + rng.normal(0, noise, (n, DIM)).astype(np.float32)
    unit: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return unit


def build(m: np.ndarray) -> MemoryIndex:
    index = MemoryIndex(DIM)
    for i, v in enumerate(m):
        item = MemoryItem(id=f"m{i}", owner="a" if i % 4 else "b", text="x", session_id=f"s{i % 7}")
        index.put(i, RowMeta.of(item), v)
    return index


def full_scan(index: MemoryIndex, query: np.ndarray, flt: SearchFilter, limit: int,
              monkeypatch: pytest.MonkeyPatch) -> list[ScoredId]:
    """The search as it is below ``BYTES_MIN_ROWS``: faiss's scan of every row."""
    with monkeypatch.context() as m:
        m.setattr(quantized, "BYTES_MIN_ROWS", 1 << 40)
        return index.search_vector(query, flt, limit)


FILTERS = [SearchFilter(owner="a"), SearchFilter(owner="b"), SearchFilter(owner="a", session_id="s3")]


def test_every_approximate_score_is_within_the_bound() -> None:
    m = clustered(3000, 1)
    copy = ByteCopy(DIM)
    copy.sync(lambda start, stop: m[start:stop], len(m))
    for q in clustered(20, 2, noise=0.2):
        err = np.abs(copy.approximate(q) - (m @ q).astype(np.float64))
        bound = copy.bound(q)
        assert err.max() <= bound
        assert bound < 0.05  # not vacuous: the scores of unit vectors span [-1, 1]


@pytest.mark.parametrize("first_k", [4, quantized.BYTES_FIRST_K])
@pytest.mark.parametrize("limit", [1, 10, 50])
@pytest.mark.parametrize("noise", [0.02, 0.001])
def test_the_first_pass_answers_as_the_full_scan(first_k: int, limit: int, noise: float,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Near-duplicates within the bound of each other (noise 0.001) make the first rescoring too short: the
    rows grow until the bound holds."""
    monkeypatch.setattr(quantized, "BYTES_MIN_ROWS", 1000)
    monkeypatch.setattr(quantized, "BYTES_FIRST_K", first_k)
    m = clustered(3000, 3, noise)
    index = build(m)
    for q in clustered(15, 4, noise=0.05):
        for flt in FILTERS:
            got = index.search_vector(q, flt, limit)
            assert got == full_scan(index, q, flt, limit, monkeypatch)
            assert len(got) == limit
    assert index._bytes.rows == 3000


def test_puts_outside_the_grid_deletes_and_compaction_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantized, "BYTES_MIN_ROWS", 1000)
    monkeypatch.setattr(quantized, "BYTES_FIRST_K", 8)
    m = clustered(2500, 5)
    index = build(m)
    queries = clustered(6, 6, noise=0.05)
    flt = SearchFilter(owner="a")
    for q in queries:
        assert index.search_vector(q, flt, 10) == full_scan(index, q, flt, 10, monkeypatch)
    lo_before = index._bytes._lo.copy()
    # a row far outside every component's range: appending it as is would clip it and break the bound
    spike = np.zeros(DIM, dtype=np.float32)
    spike[0] = 1.0
    index.put(5000, RowMeta.of(MemoryItem(id="spike", owner="a", text="x")), spike)
    for q in [*queries, spike]:
        assert index.search_vector(q, flt, 10) == full_scan(index, q, flt, 10, monkeypatch)
    assert index._bytes._lo[0] < lo_before[0] or index._bytes._lo[0] + 255 * index._bytes._step[0] >= 1.0
    assert index.search_vector(spike, flt, 1)[0].id == "spike"
    # rows put inside the grid are appended; deleted rows are filtered; many deletes compact the matrix (rows move),
    # and the rows put after it take the index past the copy's old row count before the next search
    for i, v in enumerate(clustered(300, 7)):
        index.put(6000 + i, RowMeta.of(MemoryItem(id=f"n{i}", owner="a", text="x")), v)
    for q in queries:
        assert index.search_vector(q, flt, 10) == full_scan(index, q, flt, 10, monkeypatch)
    rows_before = index._bytes.rows
    for row in range(0, 2500, 2):
        index.remove(row)
    assert index._n < 2500  # compacted
    for i, v in enumerate(m[::-1][:1400]):  # inside the grid: appended to the copy, no rebuild
        index.put(9000 + i, RowMeta.of(MemoryItem(id=f"c{i}", owner="a" if i % 3 else "b", text="x")), v)
    assert index._n > rows_before
    for q in clustered(6, 8, noise=0.05):
        for f in FILTERS:
            assert index.search_vector(q, f, 10) == full_scan(index, q, f, 10, monkeypatch)
    copy = index._bytes
    assert copy.rows == index._n
    # the codes are those of the rows as they are now (the first rescoring would mostly hide stale ones)
    assert np.array_equal(copy._codes[: copy.rows], time_copy.quantize(index._matrix[: index._n], copy._lo, copy._step))
