"""A first pass for exact KNN over large indexes: an 8-bit copy of the vectors, then exact rescoring.

An exact scan of 1M 512-d float32 vectors reads 2 GB and takes ~110-160 ms on one core here; the same
scan over a uniform 8-bit copy (faiss ``QT_8bit_uniform``, 512 MB, a quarter more memory for the index)
takes ~60-100 ms. The 8-bit scores are
only approximate, so the scan keeps its K best rows (K = 2048 by default), rescores them exactly from the
float32 matrix, and proves that nothing it skipped could belong in the exact top-k:

- every component is quantised to a uniform grid of step ``s`` over ``[lo, hi]``, so it is off by at most
  ``s / 2`` (checked in the tests against faiss's reconstruction), and an approximate score
  ``q·x̂`` is within ``B = ||q||₁ · s / 2`` of the exact ``q·x``;
- a row the scan skipped has ``q·x̂ <= a_K`` (the K-th approximate score), so ``q·x <= a_K + B``;
- if ``a_K + B`` is below the k-th best exact score among the rescored rows, the rescored top-k *is* the
  exact top-k; otherwise K grows fourfold and the scan runs again (rare: on 1M real-message vectors with
  50 near-duplicates each, K = 2048 sufficed for every query measured).

The grid's range is taken from the data with a 10 % margin; a vector outside it (which would be clipped
and break the bound) makes the copy rebuild over the new range, so the bound always holds.
"""

from __future__ import annotations

from collections.abc import Callable

import faiss
import numkong
import numpy as np
import numpy.typing as npt

from memroute.runtime import limit_openmp_here
from memroute.stores import time_copy

MIN_ROWS = 65_536
"""Below this the float32 scan is fast enough (a few ms) and the copy is not kept. At 100k rows the
8-bit pass answers in 11.5 ms instead of 15.9 (p50, 512-d, this project's 2-core machine)."""
FIRST_K = 2048
_MARGIN = 0.10
_CHUNK = 65_536
_FLOAT_SLACK = 1e-5
"""Float32 rounding in both scans' sums (512 products of numbers below 1)."""


class QuantizedCopy:
    """An 8-bit copy of rows ``[0, n)`` of an index's matrix, appended to lazily before each search."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._index: faiss.IndexScalarQuantizer | None = None
        self._rows = 0
        self._lo = 0.0
        self._hi = 0.0

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def nbytes(self) -> int:
        return self._rows * self.dimension

    def reset(self) -> None:
        """Forget every row (the matrix was compacted: rows moved)."""
        self._index, self._rows = None, 0

    def sync(self, rows: Callable[[int, int], npt.NDArray[np.float32]], n: int) -> None:
        """Make the copy hold the index's rows ``[0, n)``, read by ``rows(start, stop)``; rows below ``self.rows``
        must not have changed. Rows are read in chunks (at 1M rows the matrix is 2 GB of a saved file: read
        whole, it would be mapped whole)."""
        if n < self._rows:
            self.reset()
        new = rows(self._rows, n) if self._index is not None else None  # the rows put since the last search
        if new is not None and self._index is not None and (new.size == 0 or (new.min() >= self._lo
                                                                               and new.max() <= self._hi)):
            if new.size:
                self._index.add(np.ascontiguousarray(new))
            self._rows = n
            return
        lo, hi = np.inf, -np.inf
        for start in range(0, n, _CHUNK):
            chunk = rows(start, min(n, start + _CHUNK))
            lo, hi = min(lo, float(chunk.min())), max(hi, float(chunk.max()))
        pad = max((hi - lo) * _MARGIN, 1e-6)
        self._lo, self._hi = lo - pad, hi + pad
        index = faiss.IndexScalarQuantizer(self.dimension, faiss.ScalarQuantizer.QT_8bit_uniform,
                                           faiss.METRIC_INNER_PRODUCT)
        faiss.copy_array_to_vector(np.array([self._lo, self._hi - self._lo], dtype=np.float32), index.sq.trained)
        index.is_trained = True
        for start in range(0, n, _CHUNK):
            index.add(np.ascontiguousarray(rows(start, min(n, start + _CHUNK))))
        self._index, self._rows = index, n

    def error_bound(self, query: npt.NDArray[np.float32]) -> float:
        """The most an approximate score can differ from the exact one for this query."""
        step = (self._hi - self._lo) / 255.0
        return float(np.abs(query).sum()) * step / 2.0 + _FLOAT_SLACK

    def search(self, query: npt.NDArray[np.float32], k: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """The ``k`` best rows by approximate score (scores descending), as faiss returns them."""
        if self._index is None:
            raise RuntimeError("sync() the quantized copy before searching it")
        limit_openmp_here()
        scores, found = self._index.search(np.ascontiguousarray(query[None, :], dtype=np.float32), k)
        return scores[0], found[0]


BYTES_MIN_ROWS = 8192
"""From this many rows up to :data:`MIN_ROWS` an exact scan first reads the in-memory 8-bit copy
(:class:`ByteCopy`, a quarter of the matrix's bytes) and rescores its best rows with faiss's own kernel. At 10k rows
(20 MB of float32) faiss's scan took 1.1-2.1 ms of a recall's CPU, the copy and the rescoring 0.9-1.4 ms
(docs/benchmarks.md, branch cost3); below, the float32 matrix is small enough to stay in the caches."""
BYTES_FIRST_K = 64
"""Rows rescored at first (at least 2 x limit); fourfold more while the bound does not hold. The 330 vector searches
of 300 recalls at 10k (limit 50 or 15) needed 51-81 rows for the bound to hold (p50 59)."""
_BYTES_MARGIN = 0.10
_BYTES_CHUNK = 2048
"""Rows quantised at a time: the float32 temporaries of :func:`memroute.stores.time_copy.quantize` are 4 MB (512-d),
not the whole matrix several times over (+38 MB of peak resident memory at 10k rows)."""


class ByteCopy:
    """An 8-bit copy of rows ``[0, n)`` of an index's matrix in memory, each component on a grid of its own range
    (:func:`memroute.stores.time_copy.quantize`) widened by a tenth, appended to before each search. A row put
    later outside the grid makes it rebuild over the new range, so the bound of
    :func:`memroute.stores.time_copy.bound` always holds; its scores are the integer products of
    :func:`memroute.stores.time_copy.integer_weights` (numkong's unsigned 8-bit kernel)."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._codes = np.zeros((0, dimension), dtype=np.uint8)
        self._rows = 0
        self._lo = np.zeros(dimension, dtype=np.float32)
        self._step = np.ones(dimension, dtype=np.float32)

    @property
    def rows(self) -> int:
        return self._rows

    def reset(self) -> None:
        """Forget every row (the matrix was compacted: rows moved)."""
        self._codes, self._rows = self._codes[:0], 0

    def sync(self, rows: Callable[[int, int], npt.NDArray[np.float32]], n: int) -> None:
        """Make the copy hold the index's rows ``[0, n)``, read by ``rows(start, stop)``; rows below ``self.rows``
        must not have changed (a put takes a new slot)."""
        if n < self._rows:
            self.reset()
        if n == self._rows:
            return
        if self._rows and n - self._rows <= _BYTES_CHUNK:  # rows put since the last search: append them
            new = rows(self._rows, n)
            hi = self._lo + time_copy.STEPS * self._step
            if bool(np.all(new >= self._lo)) and bool(np.all(new <= hi)):
                self._append(time_copy.quantize(new, self._lo, self._step), n)
                return
        lo = np.full(self.dimension, np.inf, dtype=np.float32)
        hi = np.full(self.dimension, -np.inf, dtype=np.float32)
        for start in range(0, n, _BYTES_CHUNK):
            chunk = rows(start, min(n, start + _BYTES_CHUNK))
            lo, hi = np.minimum(lo, chunk.min(axis=0)), np.maximum(hi, chunk.max(axis=0))
        pad = np.maximum((hi - lo) * np.float32(_BYTES_MARGIN), np.float32(1e-6))
        self._lo = (lo - pad).astype(np.float32)
        self._step = ((hi + pad - self._lo) / np.float32(time_copy.STEPS)).astype(np.float32)
        self._rows = 0
        if len(self._codes) < n:  # room for the rows and an eighth more, not doubled chunk by chunk
            self._codes = np.empty((n + n // 8, self.dimension), dtype=np.uint8)
        for start in range(0, n, _BYTES_CHUNK):
            self._append(time_copy.quantize(rows(start, min(n, start + _BYTES_CHUNK)), self._lo, self._step),
                         min(n, start + _BYTES_CHUNK))

    def _append(self, codes: npt.NDArray[np.uint8], n: int) -> None:
        if n > len(self._codes):
            grown = np.empty((max(n, len(self._codes) * 2, 1024), self.dimension), dtype=np.uint8)
            grown[: self._rows] = self._codes[: self._rows]
            self._codes = grown
        self._codes[self._rows : n] = codes
        self._rows = n

    def bound(self, query: npt.NDArray[np.float32]) -> float:
        """The most an approximate score can differ from the exact one."""
        return time_copy.bound(query, self._lo, self._step)

    def approximate(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """Approximate scores of rows ``[0, rows)``."""
        packed, unit = time_copy.integer_weights(query, self._step)
        sums = np.asarray(numkong.dots_packed(self._codes[: self._rows], packed))
        return time_copy.approximate_scores(sums, unit, query, self._lo)
