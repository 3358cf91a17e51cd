"""An exact top-k cut for the in-memory BM25 (MaxScore, Turtle & Flood 1995): a long message's frequent terms are
scored only for the rows that can still enter the answer.

At 1M rows a message of 20 tokens has 200k-460k postings, most of them of a few common words, and summing every
posting into every row's score (``np.bincount`` into a new 8 MB array) was two thirds of its first search
(docs/benchmarks.md, branch bm1). Here the terms are taken from the largest possible contribution down (the rare
ones first); their postings are summed in a kept buffer, and ``theta``, a score that ``limit`` passing rows reach
(the exact scores of the best rows by partial sum), decides which terms must be summed whole: those until what the
remaining terms can add together (each term's :meth:`Term.bound`) falls below ``theta``. No row outside the summed
terms' postings can then reach ``theta``, nor any of their rows whose partial sum plus that bound falls short of
it; the remaining terms are looked up (binary search in their ascending slots) for the rows left, which are pruned
term by term as what is left to add shrinks. The survivors that pass the filter are scored exactly by
:func:`exact_scores` (in the order the full sum adds the terms: the same float64 sums, bit for bit), and the caller
takes its top ``limit`` from them as from every row. If the terms to sum whole hold more than :data:`MAX_SHARE` of
the postings, :func:`cut` gives up (``None``) and the caller sums every posting as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memroute.stores import bm25

MAX_SHARE = 0.3
"""The cut gives up once the terms it must sum whole hold more than this share of the search's postings."""
_EXACT = 4
"""theta is the exact score of the best of this many times ``limit`` rows by their partial sums."""
_SLACK = 1e-9
"""Relative room for float64 rounding: sums in another order may differ in their last bits (``theta`` is lowered by
it, so a row is dropped only if it misses by more)."""
_ROUNDING = 1e-6
"""Relative room for float32 rounding of a posting's score (:func:`bm25.impacts`: three operations, each within
half a unit in the last place, 6e-8)."""


@dataclass(slots=True)
class Term:
    """One query term's postings (no deleted row, no zero frequency): ``impact`` is every posting's score if it is
    computed (or was kept: ``tf`` is ``None``), else ``None`` and :meth:`scores` computes it for the postings asked."""

    name: str
    slots: npt.NDArray[np.int32]
    tf: npt.NDArray[np.float32] | None
    idf: float
    impact: npt.NDArray[np.float32] | None = None

    def scores(self, norms: npt.NDArray[np.float32],
               at: npt.NDArray[np.intp] | None = None) -> npt.NDArray[np.float32]:
        """The scores of the postings ``at`` (every posting: ``None``), each the float32 number :func:`bm25.impacts`
        gives for it in the whole list (element-wise operations)."""
        if self.impact is not None:
            return self.impact if at is None else self.impact[at]
        assert self.tf is not None
        if at is None:
            self.impact = bm25.impacts(self.idf, self.tf, norms.take(self.slots))
            return self.impact
        return bm25.impacts(self.idf, self.tf[at], norms.take(self.slots[at]))

    def bound(self, min_norm: float) -> float:
        """No posting of the term scores above this: its largest score if computed, else ``idf · (k1 + 1) · tf /
        (tf + norm)`` at the largest frequency and the smallest length norm of any row (the score grows with the
        first and falls with the second), with room for float32 rounding."""
        if self.impact is not None:
            return float(self.impact.max())
        assert self.tf is not None
        tf = float(self.tf.max())
        return self.idf * (bm25.K1 + 1) * tf / (tf + min_norm) * (1 + _ROUNDING)


_scratch = threading.local()


def _buffers(rows: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """This thread's partial sums and row marks over every row, all zero / ``False`` between calls (9 bytes a row,
    kept for the thread's life: written once, no new pages at every search)."""
    acc: npt.NDArray[np.float64] | None = getattr(_scratch, "acc", None)
    if acc is None or len(acc) < rows:
        acc = _scratch.acc = np.zeros(rows * 5 // 4 + 1024, dtype=np.float64)
        _scratch.mark = np.zeros(len(acc), dtype=bool)
    mark: npt.NDArray[np.bool_] = _scratch.mark
    return acc, mark


def cut(terms: list[Term], norms: npt.NDArray[np.float32], min_norm: float, limit: int,
        passing: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]],
        ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
    """Rows that pass (``passing``: which of some distinct sorted rows do) and their exact scores, holding every
    passing row whose score reaches the ``limit``-th best passing row's (ties included); ``None`` if the bound does
    not prune (see the module). Each term's slots are ascending (as :class:`memroute.stores.postings.Postings` gives
    them: a put takes the next slot, compaction keeps their order)."""
    bounds = [t.bound(min_norm) for t in terms]
    order = sorted(range(len(terms)), key=lambda i: (-bounds[i], len(terms[i].slots)))
    rest = [*np.cumsum([bounds[i] for i in reversed(order)])[::-1].tolist(), 0.0]  # rest[j]: terms j.. can add
    held = np.cumsum([0] + [len(terms[i].slots) for i in order]).tolist()  # held[j]: postings of terms ..j-1
    most = MAX_SHARE * held[-1]
    acc, _ = _buffers(int(norms.shape[0]))
    summed: list[npt.NDArray[np.int32]] = []
    tried = 0
    try:
        for j, i in enumerate(order):
            if held[j + 1] > most:
                return None
            np.add.at(acc, terms[i].slots, terms[i].scores(norms).astype(np.float64))
            summed.append(terms[i].slots)
            if held[j + 1] < max(tried, limit):
                continue
            tried = 2 * held[j + 1]  # theta again once the summed postings have doubled
            theta = _theta(terms, np.concatenate(summed, dtype=np.intp), acc, limit, passing, norms) * (1 - _SLACK)
            need = next(k for k in range(j + 1, len(order) + 1) if rest[k] < theta or k == len(order))
            if held[need] > most:
                return None  # the terms whose bounds reach theta hold too many postings: give up early
            for k in order[j + 1 : need]:  # the terms whose bounds add up to theta or more, summed whole
                np.add.at(acc, terms[k].slots, terms[k].scores(norms).astype(np.float64))
                summed.append(terms[k].slots)
            rows = np.concatenate(summed, dtype=np.intp)
            cand = _distinct(rows[acc[rows] >= theta - rest[need]])
            cand = cand[passing(cand)]
            partial = acc[cand]
            for left, k in zip(rest[need + 1 :], order[need:], strict=True):  # the rest, pruned as it goes
                partial += _lookup(terms[k], cand, norms)
                keep = partial >= theta - left
                cand, partial = cand[keep], partial[keep]
            return cand, exact_scores(terms, cand, norms)
        return None
    finally:
        for slots in summed:
            acc[slots] = 0.0  # whatever happened: the next call starts from zeros


def _distinct(rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """The distinct ``rows``, sorted (``np.unique`` hashes first: 40-70 ms for 200k rows here)."""
    rows = np.sort(rows).astype(np.int64)
    if len(rows) < 2:
        return rows
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))]


def _lookup(term: Term, rows: npt.NDArray[np.int64], norms: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """``term``'s score for each of the distinct sorted ``rows`` (0 where it has no posting), by binary search in its
    sorted slots."""
    out = np.zeros(len(rows), dtype=np.float64)
    if len(rows) == 0 or len(term.slots) == 0:
        return out
    at = np.searchsorted(term.slots, rows.astype(term.slots.dtype))  # the slots' type: no converted copy of them
    found = at < len(term.slots)
    found[found] = term.slots[at[found]] == rows[found]
    out[found] = term.scores(norms, at[found])
    return out


def _theta(terms: list[Term], rows: npt.NDArray[np.intp], acc: npt.NDArray[np.float64], limit: int,
           passing: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]], norms: npt.NDArray[np.float32]) -> float:
    """A score that ``limit`` distinct passing rows reach: the ``limit``-th best exact score of the passing rows
    among those of the best partial sums ``acc`` (a row may repeat in ``rows``), 0 if fewer than ``limit`` pass; the
    best ``m`` are filtered first, ``m`` growing fourfold while fewer than ``limit`` of them pass."""
    sums = acc[rows]
    m = _EXACT * limit
    while True:
        if m < len(rows):
            kth = np.partition(sums, len(rows) - m)[len(rows) - m]
            best = rows[sums >= kth]
        else:
            best = rows
        distinct = _distinct(best)
        distinct = distinct[passing(distinct)]
        if len(distinct) >= limit:
            if len(distinct) > _EXACT * limit:  # the exact scores of a few suffice for a bound
                top = np.argpartition(acc[distinct], len(distinct) - _EXACT * limit)
                distinct = np.sort(distinct[top[len(distinct) - _EXACT * limit :]])
            exact = sum((_lookup(t, distinct, norms) for t in terms), np.zeros(len(distinct)))
            return float(np.partition(exact, len(exact) - limit)[len(exact) - limit])
        if len(best) == len(rows):
            return 0.0
        m *= 4


def exact_scores(terms: list[Term], rows: npt.NDArray[np.int64],
                 norms: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """The scores of the distinct sorted ``rows``: each row's terms' scores added to 0.0 in the order of ``terms``,
    in float64, as ``np.bincount`` over the concatenated postings adds them (the same bits). Each term's postings
    are looked up in this thread's row marks (one pass over its slots), its scores computed only where they hit."""
    scores = np.zeros(len(rows), dtype=np.float64)
    _, mark = _buffers(int(norms.shape[0]))
    mark[rows] = True
    try:
        for term in terms:
            at = np.flatnonzero(mark[term.slots])
            if len(at):
                scores[np.searchsorted(rows, term.slots[at].astype(rows.dtype))] += term.scores(norms, at)
    finally:
        mark[rows] = False
    return scores
