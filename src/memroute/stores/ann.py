"""An approximate nearest-neighbour graph (usearch HNSW, 8-bit) kept in a file and memory-mapped on open.

Only a first pass: :class:`memroute.stores.memory_index.MemoryIndex` rescores its candidates exactly from the
float32 vectors, so a result's scores are always exact and only recall is approximate (recall@10 against the
exact search, measured by ``memroute bench recall``). Keys are the SQLite row ids, so compacting the
in-memory index does not invalidate the graph; a row that was deleted is dropped when its key is mapped back.

Why usearch (measured side by side with faiss ``IndexHNWSQ`` on 189k real use-m3 vectors and 1M, this
project's 2-core machine; docs/benchmarks.md "SQLite at 1M"): usearch opens a saved graph as a memory map
(``view``) in milliseconds where faiss reads its whole HNSW index into memory, and it looks keys up itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
from usearch.index import Index

CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 256
CANDIDATES = 100
"""Graph neighbours fetched per query, then rescored exactly (with EXPANSION_SEARCH 256: recall@10 0.981
against exact search on 100k distinct real texts; docs/benchmarks.md)."""


class AnnGraph:
    """A usearch HNSW graph over unit vectors, inner-product metric, 8-bit storage."""

    def __init__(self, index: Index, path: Path | None) -> None:
        self._index = index
        self.path = path

    @classmethod
    def new(cls, dimension: int) -> AnnGraph:
        return cls(Index(ndim=dimension, metric="ip", dtype="i8", connectivity=CONNECTIVITY,
                         expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH), None)

    @classmethod
    def view(cls, path: Path, dimension: int) -> AnnGraph:
        """Memory-map a saved graph; ``ValueError`` if the file is not a usable graph of this dimension."""
        try:
            index = Index.restore(str(path), view=True)
        except (RuntimeError, ValueError, OSError) as exc:
            raise ValueError(f"cannot read the graph: {exc}") from exc
        if index is None or index.ndim != dimension:
            raise ValueError(f"the graph is not a {dimension}-d usearch index")
        setattr(index, "expansion_search", EXPANSION_SEARCH)  # noqa: B010 (the stub types it read-only)
        return cls(index, path)

    @classmethod
    def load(cls, path: Path, dimension: int) -> AnnGraph:
        """Read a saved graph into memory, to add to it."""
        index = Index(ndim=dimension, metric="ip", dtype="i8", connectivity=CONNECTIVITY,
                      expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
        try:
            index.load(str(path))
        except (RuntimeError, ValueError, OSError) as exc:
            raise ValueError(f"cannot read the graph: {exc}") from exc
        return cls(index, None)

    def __len__(self) -> int:
        return len(self._index)

    def add(self, keys: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32],
            progress: Callable[[int], object] | None = None) -> None:
        """Add rows under ``keys``; a key the graph has already (a row put again unchanged) is skipped."""
        for start in range(0, len(keys), 256):  # about a second per batch at 1M rows: ``progress`` may stop it
            stop = min(len(keys), start + 256)
            batch = keys[start:stop].astype(np.uint64)
            new = ~np.asarray(self._index.contains(batch), dtype=bool) if len(self._index) else slice(None)
            if batch[new].size:
                self._index.add(batch[new], np.ascontiguousarray(vectors[start:stop][new]), threads=1)
            if progress is not None:
                progress(stop - start)

    def save(self, path: Path) -> None:
        self._index.save(str(path))
        with open(path, "rb+") as fh:
            os.fsync(fh.fileno())

    def search(self, query: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
        """Keys of about the ``k`` nearest rows (fewer if the graph is smaller)."""
        if len(self._index) == 0:
            return np.empty(0, dtype=np.int64)
        found = self._index.search(query, min(k, len(self._index)), threads=1)
        return np.asarray(found.keys, dtype=np.int64)
