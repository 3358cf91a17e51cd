"""An 8-bit copy of the saved vectors in time order, so that a vector search inside a time range reads one slice.

Why: a recall with a time range ("last month", "Saturday") runs a second vector search restricted to the range.
At 1M memories a month of two years leaves ~38,000 rows, scattered over the 2 GB vectors file: reading them one
by one with ``pread`` took ~80 ms, the p95 of a recall (docs/benchmarks.md, "SQLite at scale"). Here the rows that
have an ``occurred_at`` are kept sorted by it, each component quantised to 8 bits on a grid of its own range
(512 bytes a row at 512-d), in ``g<N>-bytime.u8`` beside the vectors (:mod:`memroute.stores.index_files`). A range
is then one contiguous read (38,000 rows: 19 MB), scored approximately, and the best rows are rescored exactly from
the float32 vectors, with the bound of :mod:`memroute.stores.quantized` proving that no row left out could be in
the exact top ``limit``:

- component ``i`` is quantised to the nearest point of a grid of step ``s_i`` over ``[lo_i, hi_i]`` (the data's own
  range), so it is off by at most ``s_i / 2`` and an approximate score is within ``B = Σ |q_i| s_i / 2`` (plus the
  float32 rounding of both sums) of the exact one; the weights ``q_i s_i`` are rounded to whole units ``w`` so that
  the codes' products are integers (:meth:`TimeCopy.approximate`), which adds at most ``d · 255 · w / 2``;
- a row not rescored scores at most ``a_K + B`` (``a_K`` the lowest approximate score rescored); if that is below
  the ``limit``-th best exact score, the exact top ``limit`` is among the rescored rows; else ``K`` grows fourfold.

So the answers are those of the exact scan. The copy covers the rows of the files it was written with; rows put
later are scored exactly (few), and rows deleted since are left out by the filter.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numkong
import numpy as np
import numpy.typing as npt

from memroute.stores.vector_file import VectorFile

FIRST_K = 64
"""Rows rescored exactly at first (at least 4 x limit); fourfold more while the bound does not hold. At 1M rows the
bound held at the first rescoring in each of 500 searches at limit 15 (100 of the bench's queries in the last month and
a week, 100 others in three other ranges: a day to two months), and reading 64 rows instead of 256 took 0.3-0.7 ms off
each (docs/benchmarks.md, "branch sq17")."""
OVERHEAD_ROWS = 256
"""What a search through the copy costs beyond its rows' share, in rows read with ``pread`` (its maps, the weights,
the first rescoring): a range whose rows that pass number less than its rows / ``ROW_COST`` + this is scored one by
one. Kept at the first rescoring's former size when that went down to 64 rows: at 100k rows a day's range (~130 rows)
then went through the copy, and the p95 of those searches rose from ~0.5 to ~0.8 ms."""
ROW_COST = 8
"""A row read with ``pread`` and scored exactly costs about eight rows of the copy read in a slice and scored
approximately (~2 µs against ~0.25 µs, 512-d): the copy is used when the slice's rows / 8 plus ``OVERHEAD_ROWS`` cost
fewer row reads than the rows the filter leaves."""
_WEIGHT_UNITS = 65535
"""A weight's magnitude in whole units (16 bits: a high and a low byte)."""
_CHUNK = 65_536
STEPS = 255


@dataclass(frozen=True, slots=True)
class TimeCopy:
    """The 8-bit rows of ``codes`` are the slots ``order`` (sorted by ``times``, their ``occurred_at``): the slots
    below ``rows`` that had a time and were not deleted when it was written."""

    rows: int
    codes: VectorFile
    order: npt.NDArray[np.int64]
    times: npt.NDArray[np.int64]
    lo: npt.NDArray[np.float32]
    step: npt.NDArray[np.float32]

    def span(self, start: int | None, end: int | None) -> tuple[int, int]:
        """Rows ``[a, b)`` of the copy whose time is within ``[start, end]`` (microseconds; ``None``: open)."""
        a = 0 if start is None else int(np.searchsorted(self.times, start, side="left"))
        b = len(self.times) if end is None else int(np.searchsorted(self.times, end, side="right"))
        return a, max(a, b)

    def bound(self, query: npt.NDArray[np.float32]) -> float:
        """The most an approximate score can differ from the exact one (:func:`bound`)."""
        return bound(query, self.lo, self.step)

    def approximate(self, query: npt.NDArray[np.float32], a: int, b: int) -> npt.NDArray[np.float64]:
        """Approximate scores of rows ``[a, b)``, mapped a run at a time (:meth:`VectorFile.each_mapped`):
        ``q . lo + sum_i u_i (q_i s_i)`` with the weights ``q_i s_i`` rounded to whole multiples of a unit (16 bits of
        magnitude, split into a high and a low byte of a positive and a negative part), so that the products of the
        8-bit codes are integers summed exactly by numkong's unsigned 8-bit kernels (``dots_packed``: AVX-512 VNNI
        here): ~1.5 ms for a month of the 1M store (40k rows), against ~5 ms for numpy, which converts each code to
        float32 first."""
        packed, unit = integer_weights(query, self.step)
        sums = np.empty((b - a, 4), dtype=np.uint32)

        def score(first: int, codes: npt.NDArray[np.uint8]) -> None:
            sums[first - a : first - a + len(codes)] = numkong.dots_packed(codes, packed)

        self.codes.each_mapped(a, b, score)
        return approximate_scores(sums, unit, query, self.lo)

    def search(self, query: npt.NDArray[np.float32], a: int, b: int, keep: npt.NDArray[np.bool_], limit: int,
               exact: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float32]],
               extra: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]) -> tuple[npt.NDArray[np.int64],
                                                                                       npt.NDArray[np.float32]]:
        """Slots and exact scores holding the exact top ``limit`` of the rows ``[a, b)`` that ``keep`` (a mask over
        them) lets through and of ``extra`` (slots scored exactly already). ``exact(slots)`` scores sorted slots."""
        slots = self.order[a:b][keep]
        return exact_top(self.approximate(query, a, b)[keep], slots, self.bound(query), limit,
                         min(len(slots), max(FIRST_K, 4 * limit)), exact, extra)


def bound(query: npt.NDArray[np.float32], lo: npt.NDArray[np.float32], step: npt.NDArray[np.float32]) -> float:
    """The most an approximate score (:func:`approximate_scores`) of a row quantised on the grid ``lo``, ``step``
    (:func:`quantize`, every component inside it) can differ from the exact one: half a step per component, the
    weights' rounding to integers (half a weight unit per component, times at most 255 a code), and the float32
    rounding of the exact sum and of the grid (``d`` terms each, at most ``|q_i| max(|lo_i|, |hi_i|)``)."""
    q = np.abs(query.astype(np.float64))
    largest = np.maximum(np.abs(lo), np.abs(lo + STEPS * step.astype(np.float64)))
    rounding = 4 * len(q) * 2.0**-24 * float(q @ largest)
    weights = _unit(query, step) * STEPS * len(q) / 2.0
    return float(q @ step) / 2.0 + weights + rounding + 1e-6


def exact_top(approx: npt.NDArray[np.float64], slots: npt.NDArray[np.integer], bound: float, limit: int, k: int,
              exact: Callable[[npt.NDArray[Any]], npt.NDArray[np.float32]],
              extra: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None = None) -> tuple[
                  npt.NDArray[Any], npt.NDArray[np.float32]]:
    """Slots and exact scores holding the exact top ``limit`` of ``slots`` and of ``extra`` (slots scored exactly
    already): the ``k`` best of ``slots`` by their approximate scores ``approx`` (each within ``bound`` of the exact
    one) scored by ``exact(sorted slots)``, fourfold more while a row left out could still be in the top ``limit``."""
    while True:
        if k < len(slots):
            best = np.argpartition(approx, len(slots) - k)[len(slots) - k :]
        else:
            best = np.arange(len(slots))
        cand = np.sort(slots[best])
        scores = exact(cand)
        if extra is not None:
            cand, scores = np.concatenate([cand, extra[0]]), np.concatenate([scores, extra[1]])
        if k >= len(slots) or (len(cand) >= limit
                               and float(approx[best].min()) + bound < float(np.partition(scores, -limit)[-limit])):
            return cand, scores
        k = min(len(slots), 4 * k)


def integer_weights(query: npt.NDArray[np.float32], step: npt.NDArray[np.float32]) -> tuple[Any, float]:
    """The weights ``q_i s_i`` in whole units (the largest is ``_WEIGHT_UNITS`` of them), split into a high and a low
    byte of a positive and a negative part and packed for ``numkong.dots_packed``; and the unit."""
    unit = _unit(query, step)
    whole = np.rint(query.astype(np.float64) * step / unit).astype(np.int64)
    pos, neg = np.maximum(whole, 0), np.maximum(-whole, 0)
    return numkong.dots_pack(np.stack([pos >> 8, pos & 255, neg >> 8, neg & 255]).astype(np.uint8)), unit


def approximate_scores(sums: npt.NDArray[np.uint32], unit: float, query: npt.NDArray[np.float32],
                       lo: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Approximate scores from the codes' integer products with the :func:`integer_weights` (a row of four sums
    per row): ``q . lo + sum_i u_i (q_i s_i)``."""
    wide = sums.astype(np.int64)
    out: npt.NDArray[np.float64] = (256 * (wide[:, 0] - wide[:, 2]) + (wide[:, 1] - wide[:, 3])) * unit
    out += float(query.astype(np.float64) @ lo.astype(np.float64))
    return out


def _unit(query: npt.NDArray[np.float32], step: npt.NDArray[np.float32]) -> float:
    """The unit the weights ``q_i s_i`` are rounded to: the largest is ``_WEIGHT_UNITS`` of them."""
    top = float(np.max(np.abs(query.astype(np.float64) * step), initial=0.0))
    return top / _WEIGHT_UNITS if top > 0 else 1.0


def write(path: Path, slots: npt.NDArray[np.int64], vectors: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float32]],
          rows: int, dimension: int, stop: threading.Event) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Write the 8-bit rows of ``slots`` (in that order) to ``path`` and fsync it; ``vectors(sorted slots)`` reads
    float32 rows. The grid spans every component's range over rows ``[0, rows)``. Returns ``(lo, step)``; raises
    ``InterruptedError`` when ``stop`` is set."""
    lo = np.full(dimension, np.inf, dtype=np.float32)
    hi = np.full(dimension, -np.inf, dtype=np.float32)
    for start in range(0, rows, _CHUNK):
        chunk = vectors(np.arange(start, min(rows, start + _CHUNK)))
        lo, hi = np.minimum(lo, chunk.min(axis=0)), np.maximum(hi, chunk.max(axis=0))
        if stop.is_set():
            raise InterruptedError
    if rows == 0:
        lo, hi = np.zeros(dimension, dtype=np.float32), np.zeros(dimension, dtype=np.float32)
    step = np.maximum((hi - lo) / STEPS, np.float32(1e-12)).astype(np.float32)
    with open(path, "wb") as fh:
        for start in range(0, len(slots), _CHUNK):
            part = slots[start : start + _CHUNK]
            order = np.argsort(part, kind="stable")
            block = np.empty((len(part), dimension), dtype=np.float32)
            block[order] = vectors(part[order])
            fh.write(quantize(block, lo, step).tobytes())
            if stop.is_set():
                raise InterruptedError
        fh.flush()
        os.fsync(fh.fileno())
    return lo, step


def quantize(vectors: npt.NDArray[np.float32], lo: npt.NDArray[np.float32],
             step: npt.NDArray[np.float32]) -> npt.NDArray[np.uint8]:
    """Each component to the nearest point of its grid (within ``[lo, lo + 255 step]``)."""
    codes: npt.NDArray[np.uint8] = np.clip(np.rint((vectors - lo) / step), 0, STEPS).astype(np.uint8)
    return codes
