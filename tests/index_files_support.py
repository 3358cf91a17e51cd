"""Records and a store with small index-file thresholds, for tests/test_index_files.py and its subprocesses."""

from __future__ import annotations

import numpy as np

from memroute.stores import index_files
from memroute.stores.base import MemoryRecord
from memroute.stores.sqlite import SQLiteStore
from memroute.types import MemoryItem

DIM = 32
MODEL = "test-model"


def small_thresholds() -> None:
    """Files from 200 rows, a graph from 300, extended every 100 (instead of 50k / 100k / 20k)."""
    index_files.GRAPH_MIN_ROWS, index_files.GRAPH_EXTEND_ROWS = 300, 100


def records(start: int, n: int, seed: int) -> list[MemoryRecord]:
    out = []
    for i in range(start, start + n):  # a memory's vector depends on its number and the seed only
        v = np.random.default_rng([seed, i]).standard_normal(DIM).astype(np.float32)
        v /= np.linalg.norm(v)
        words = [f"w{i % 97}", f"v{i % 13}", f"m{i}"]
        out.append(MemoryRecord(MemoryItem(id=f"m{i}", owner="o", text=" ".join(words)), words, v))
    return out


def open_store(path: str) -> SQLiteStore:
    store = SQLiteStore(path, index_files_min_rows=200)
    store.bind_model(MODEL, DIM)
    return store
