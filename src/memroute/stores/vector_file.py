"""Rows of a saved vectors file read with ``pread``, not through a memory map.

Why: on this project's machines (Linux 6.18, ext4) the page cache holds the vectors file in 2 MB folios, and
reading one 2 kB row through a mapping of it maps the whole folio into the process. Rescoring 100 graph
candidates a search from the mapping grew a 1M-row store's resident memory by ~200 MB every five recalls,
to the whole 2 GB file after a few hundred (``madvise`` with ``MADV_RANDOM`` or ``MADV_NOHUGEPAGE`` changed
nothing; docs/benchmarks.md, "SQLite at scale"). Rows read with ``pread`` are copied out of the page cache,
which stays shared and reclaimable and is not the process's resident memory. A row costs ~3 µs that way
(0.3 ms for 100 rows, 7 ms for 2,048, measured on the 1M store); a large share of the file is read in
contiguous chunks instead (~0.6 µs a row).
"""

from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

_CHUNK_ROWS = 65_536
_ROW_READS_PER_CHUNK_ROW = 5
"""A row read costs about five times a row copied out of a contiguous chunk: past one read for every five rows
of the span, reading the span in chunks is cheaper."""


_MAP_BYTES = 8 << 20
""":meth:`VectorFile.each_mapped` maps at most this much at a time: what it adds to resident memory while it runs."""


class VectorFile:
    """The first ``rows`` rows of ``dimension`` components in ``path`` (float32, or the ``dtype`` given), which nothing
    writes while open."""

    def __init__(self, path: Path, dimension: int, rows: int, dtype: type[np.generic] = np.float32) -> None:
        self.path, self.dimension, self.rows = path, dimension, rows
        self.dtype = np.dtype(dtype)
        self._fd = os.open(path, os.O_RDONLY)
        self._closed = weakref.finalize(self, os.close, self._fd)  # the descriptor goes with the last user

    def read(self, start: int, stop: int) -> npt.NDArray[np.float32]:
        """Rows ``[start, stop)`` (of ``dtype``)."""
        if not 0 <= start <= stop <= self.rows:
            raise IndexError(f"rows {start}:{stop} are not in a file of {self.rows} rows")
        out = np.empty((stop - start, self.dimension), dtype=self.dtype)
        self.read_into(out, start)
        return out

    def take(self, slots: npt.NDArray[np.integer]) -> npt.NDArray[np.float32]:
        """The rows ``slots`` (any order, repeats allowed), in that order."""
        slots = np.asarray(slots, dtype=np.int64)
        out = np.empty((len(slots), self.dimension), dtype=self.dtype)
        if slots.size == 0:
            return out
        if int(slots.min()) < 0 or int(slots.max()) >= self.rows:
            raise IndexError(f"a row is not in a file of {self.rows} rows")
        in_order = bool(np.all(slots[1:] >= slots[:-1]))  # as the searches ask: then no second copy is made
        order = np.arange(len(slots)) if in_order else np.argsort(slots, kind="stable")
        ordered = slots if in_order else slots[order]
        starts = np.flatnonzero(np.diff(ordered, prepend=ordered[0] - 2) != 1)  # runs of consecutive rows
        span = int(ordered[-1] - ordered[0]) + 1
        rows = out if in_order else np.empty_like(out)
        if len(starts) * _ROW_READS_PER_CHUNK_ROW <= span:
            stops = np.append(starts[1:], len(ordered))
            # a tight loop (~2 µs a run): a time filter at 1M rows leaves tens of thousands of runs to read
            view, size, fd, pread = rows.data.cast("B"), self.dimension * self.dtype.itemsize, self._fd, os.preadv
            for a, b, first in zip(starts.tolist(), stops.tolist(), ordered[starts].tolist(), strict=True):
                if pread(fd, [view[a * size : b * size]], first * size) != (b - a) * size:
                    self.read_into(rows[a:b], first)  # a short read: read again in full, or raise
        else:
            for first in range(int(ordered[0]), int(ordered[-1]) + 1, _CHUNK_ROWS):
                a, b = np.searchsorted(ordered, [first, first + _CHUNK_ROWS])
                if a < b:
                    chunk = self.read(first, min(self.rows, first + _CHUNK_ROWS))
                    rows[a:b] = chunk[ordered[a:b] - first]
        if not in_order:
            out[order] = rows
        return out

    def read_into(self, rows: npt.NDArray[Any], start: int) -> None:
        """Rows ``[start, start + len(rows))`` into ``rows`` (C-contiguous, of ``dtype``)."""
        if not 0 <= start <= start + len(rows) <= self.rows:
            raise IndexError(f"rows {start}:{start + len(rows)} are not in a file of {self.rows} rows")
        view, offset = rows.data.cast("B"), start * self.dimension * self.dtype.itemsize  # rows: C-contiguous
        while view.nbytes:  # one call reads at most ~2 GB
            got = os.preadv(self._fd, [view], offset)
            if got <= 0:
                raise OSError(f"{self.path} ended before row {start + len(rows)} (truncated?)")
            view, offset = view[got:], offset + got

    def each_mapped(self, start: int, stop: int, use: Callable[[int, npt.NDArray[Any]], None]) -> None:
        """``use(first, rows)`` for rows ``[start, stop)`` in runs of at most ``_MAP_BYTES``, ``rows`` a read-only view
        of a memory map made for that call with ``MAP_POPULATE`` (its pages mapped in one system call, not one fault
        each) and unmapped after it, so that no page stays in the process's resident memory (the module's note):
        scanning a month of the 1M store's 8-bit copy (20 MB) this way took ~4 ms of CPU, against ~6.5 ms copying it
        out with ``pread``. ``use`` must keep no reference to ``rows``."""
        if not 0 <= start <= stop <= self.rows:
            raise IndexError(f"rows {start}:{stop} are not in a file of {self.rows} rows")
        size = self.dimension * self.dtype.itemsize
        if os.fstat(self._fd).st_size < stop * size:  # a mapped page past the end would kill the process (SIGBUS)
            raise OSError(f"{self.path} ended before row {stop} (truncated?)")
        step = max(1, _MAP_BYTES // size)
        for first in range(start, stop, step):
            last = min(stop, first + step)
            offset = first * size // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
            mapped = mmap.mmap(self._fd, last * size - offset, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE,
                               prot=mmap.PROT_READ, offset=offset)
            try:
                rows = np.frombuffer(mapped, dtype=self.dtype, count=(last - first) * self.dimension,
                                     offset=first * size - offset).reshape(last - first, self.dimension)
                use(first, rows)
                del rows
            finally:
                mapped.close()
