"""The 8-bit first pass of large exact KNN searches returns exactly what a full float32 scan returns."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from memroute.memory import Memory
from memroute.stores import memory_index, quantized
from memroute.stores.memory_index import MemoryIndex, RowMeta
from memroute.stores.quantized import QuantizedCopy
from memroute.types import MemoryItem, SearchFilter

DIM = 64
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def clustered(n: int, seed: int, noise: float = 0.02) -> np.ndarray:
    """Near-duplicate neighbourhoods, as real message embeddings have: the hard case for the bound."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n // 50, 1), DIM)).astype(np.float32)
    m = centres[rng.integers(0, len(centres), n)] + rng.normal(0, noise, (n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def exact(index: MemoryIndex, query: np.ndarray, flt: SearchFilter, limit: int) -> list[str]:
    """A plain float32 scan over every row that passes the filters."""
    slots = np.arange(index._n)
    ok = index._mask(slots, flt) & (index._owner[: index._n] == index._codes["o:" + flt.owner])
    rows = slots[ok]
    scores = index._matrix[rows] @ query
    order = np.lexsort((rows, -scores))[:limit]
    return [index._ids[int(rows[i])] for i in order]


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantized, "MIN_ROWS", 1000)
    monkeypatch.setattr(quantized, "FIRST_K", 16)


def build(n: int, seed: int = 0, noise: float = 0.02) -> tuple[MemoryIndex, np.ndarray]:
    m = clustered(n, seed, noise)
    index = MemoryIndex(DIM)
    for i, v in enumerate(m):
        item = MemoryItem(id=f"m{i}", owner="a" if i % 4 else "b", text="x", session_id=f"s{i % 7}")
        index.put(i, RowMeta.of(item), v)
    return index, m


def test_reconstruction_error_is_within_half_a_step() -> None:
    m = clustered(5000, 1)
    copy = QuantizedCopy(DIM)
    copy.sync(lambda start, stop: m[start:stop], len(m))
    rec = copy._index.reconstruct_n(0, len(m))  # type: ignore[union-attr]
    step = (copy._hi - copy._lo) / 255
    assert np.abs(rec - m).max() <= step / 2 * 1.0001
    q = m[3]
    approx = rec @ q
    assert np.abs(approx - m @ q).max() <= copy.error_bound(q)


@pytest.mark.usefixtures("small_threshold")
@pytest.mark.parametrize("limit", [1, 10, 50])
@pytest.mark.parametrize("noise", [0.02, 0.002])
def test_quantized_search_equals_a_full_scan(limit: int, noise: float) -> None:
    """With noise 0.002 a neighbourhood's 50 rows differ by less than the 8-bit error: the first pass
    alone would order them wrongly, so only the bound (and a larger K) can make the answer exact."""
    index, m = build(4000, noise=noise)
    assert index._n >= quantized.MIN_ROWS
    rng = np.random.default_rng(7)
    for _ in range(30):
        q = m[rng.integers(0, len(m))] + rng.normal(0, 0.05, DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        for flt in (SearchFilter(owner="a"), SearchFilter(owner="b"), SearchFilter(owner="a", session_id="s3")):
            got = [h.id for h in index.search_vector(q.astype(np.float32), flt, limit)]
            assert got == exact(index, q, flt, limit)
    assert index._quantized.rows == index._n


@pytest.mark.usefixtures("small_threshold")
def test_writes_deletes_compaction_and_out_of_range_vectors_stay_exact() -> None:
    index, m = build(3000)
    q = m[10].copy()
    flt = SearchFilter(owner="a")
    index.search_vector(q, flt, 10)
    lo_before = index._quantized._lo
    # a vector far outside the grid's range: the copy must rebuild, not clip
    spike = np.zeros(DIM, dtype=np.float32)
    spike[0] = 1.0
    index.put(10_000, RowMeta.of(MemoryItem(id="spike", owner="a", text="x")), spike)
    got = [h.id for h in index.search_vector(spike, flt, 5)]
    assert got[0] == "spike" and got == exact(index, spike, flt, 5)
    assert index._quantized._lo != lo_before
    # deletes: masked at once; enough of them compact the matrix and reset the copy
    for row in range(0, 2000):
        index.remove(row)
    assert index._n < 3000  # compacted
    got = [h.id for h in index.search_vector(q, flt, 10)]
    assert got == exact(index, q, flt, 10)
    assert not set(got) & {f"m{i}" for i in range(2000)}


def test_small_indexes_do_not_keep_a_copy() -> None:
    assert memory_index.quantized.MIN_ROWS > 2000
    index, m = build(2000)
    index.search_vector(m[0], SearchFilter(owner="a"), 5)
    assert index._quantized.rows == 0



def test_a_search_on_another_thread_runs_one_openmp_thread(memory: Memory) -> None:
    """OpenMP's thread count is per thread: a service's request threads searched with one faiss thread per
    core (spinning between searches) although the policy is one."""
    import threading

    import faiss

    memory.remember_many([{"text": t} for t in ("The dentist is on Tuesday.", "Leo is allergic to shellfish.")])
    seen: list[int] = []

    def request() -> None:
        assert memory.search("when is the dentist?", limit=2)
        seen.append(faiss.omp_get_max_threads())

    worker = threading.Thread(target=request)
    worker.start()
    worker.join()
    assert seen == [1]
