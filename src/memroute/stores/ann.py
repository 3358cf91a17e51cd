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

import ctypes
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
from usearch.index import Index

log = logging.getLogger(__name__)

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
        self.mapping_in: threading.Thread | None = None
        """A viewed graph's pages being mapped into the process in the background (:func:`map_in`)."""

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
        graph = cls(index, path)
        graph.mapping_in = threading.Thread(target=map_in, args=(path,), name="memroute-graph-map-in", daemon=True)
        graph.mapping_in.start()
        return graph

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


_MADV_POPULATE_READ = 22
"""Linux 5.14+: map a range's pages now, reading those not in the page cache."""


def map_in(path: Path) -> int:
    """Map every page of this process's mappings of ``path`` at once (``madvise(MADV_POPULATE_READ)``); the bytes
    asked for. A viewed graph's pages are otherwise mapped one fault at a time by the searches that touch them: at 1M
    rows the first 20 recalls of a new process spent 2.4-2.9 ms a search in the graph against 1.5 ms once it was
    mapped (single searches up to 17 ms), and after ~65 recalls the graph is resident anyway (630 of its 661 MB):
    mapping its 661 MB at once took 20-30 ms of one thread (docs/benchmarks.md, "branch sq17"). Run on a thread of
    its own (:meth:`AnnGraph.view`) so that opening a store never waits for it, also when the file must be read from
    disk first. Elsewhere than on Linux, or on an older kernel, nothing is done (the faults map the pages as
    before)."""
    try:
        maps = Path("/proc/self/maps").read_text()
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    name, asked = os.path.realpath(path), 0
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == name:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            # an error (an old kernel; the graph unmapped meanwhile) only leaves the pages to the faults
            if madvise(start, end - start, _MADV_POPULATE_READ) != 0:
                log.debug("could not map %s in at once: errno %d", name, ctypes.get_errno())
                return asked
            asked += end - start
    return asked
