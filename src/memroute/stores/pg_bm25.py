"""PostgreSQL BM25 without reading every row a query term matches: impact-ordered postings, a proven stop.

Since migration 5 every (owner, field, term, memory) has a row in ``memroute_postings`` with an *impact*:
BM25's term-frequency part ``tf (k1 + 1) / (tf + k1 (1 - b + b dl / A))`` (:mod:`memroute.stores.bm25`)
computed with the memory's length and a reference average length ``A`` kept in ``memroute_meta`` under
``bm25_avgdl``. The index ``(owner, field, term, impact DESC, row_id)`` reads a term's memories best first.
IDF is not in the impact: it is multiplied in at query time, so document frequencies may drift without a
rewrite. Triggers on ``memroute_lexical`` keep the postings in step with every write, update and delete.

A search reads the terms' lists in impact order a chunk at a time (the threshold algorithm: Fagin, Lotem &
Naor, "Optimal aggregation algorithms for middleware", 2003; the impact-ordered form of Anh & Moffat,
"Pruned query evaluation using pre-computed impacts", SIGIR 2006), fetches the lexical rows of the memories
it meets (with the search's filters) and scores them with exact BM25, the same code as before
(:func:`memroute.stores.pg_sql.bm25_scores`). It stops when no memory it has not met can reach the current
``limit``-th score: such a memory's impact in each list is at most the last impact read there, so its score is
at most :meth:`ImpactSearch.bound`. A query of many frequent terms (a long utterance) cannot be proven early
that way; once the reads pass ``READ_BUDGET`` postings (at once for short lists or under a narrow filter),
the server sums each memory's bound over the lists in one aggregate over the index entries
(:func:`bounds_sql`), and memories are scored exactly in the order of their bounds until the ``limit``-th
score beats the next bound. What is returned is therefore the exact BM25 top ``limit`` over every matching
memory, ties in insertion order, as the SQLite store gives it.

The bound holds for any field weights and any drift of the average length (``memroute_meta`` keeps the ``A``
the impacts were computed with):

- the average length ``A'`` of the search differs from ``A``: ``f(tf, dl, A') <= max(1, A' / A) f(tf, dl, A)``
  (the length term of the denominator scales by ``A / A'``);
- two weighted fields (BM25F: frequencies and lengths summed before saturation): the saturation is concave in
  the frequency, so the joint part is at most the sum of each field's part with its own length alone, and a
  field weight ``w`` scales that part by at most ``max(1, w)``.

So drift loosens the bound (more is read) but never breaks it; ``refresh_postings`` recomputes the impacts
with the current average when a bulk load has moved it by more than ``DRIFT`` (:func:`needs_refresh`).

Summing the bounds in the server costs ~1 µs a posting (scan and hash aggregate): a long utterance of
frequent words touches ~460,000 postings at 1M memories, and with impacts this flat (tf is almost always 1)
no exact cut removes them. Since migration 7 each list is also kept packed in ``memroute_blocks`` (row ids
and impacts as raw bytes, up to ``BLOCK_POSTINGS`` a row): a search of long lists fetches them in one
statement and sums the bounds in numpy (:class:`BlockBounds`), then scores the best bounds exactly as above.
The blocks come in the search's first round trip, with the snapshot, the statistics and document frequencies
not cached, the impacts' reference and the changed rows (:class:`memroute.stores.pg_ops.Batch`): a search
at 1M is 3-6 round trips (7-10 before).
Rows written, updated or deleted since the blocks were built are in ``memroute_blocks_changed`` (triggers):
every such search scores them exactly and leaves them out of the blocks' bounds, so a stale block never
decides anything. Writers fold the changed rows into new blocks every ``MERGE_ROWS`` rows
(:data:`MERGE_BLOCKS_SQL`: an updated row's old postings stay in the old blocks, which only loosens its
bound); deleted rows stay listed until the blocks are rebuilt from the postings (:data:`BUILD_BLOCKS_SQL`,
with every refresh of the impacts and bulk load, or once ``DEAD_ROWS`` are listed), which holds writers only
for its last statement.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.stores import bm25

FIRST_CHUNK = 64
"""Postings read from a list the first time; each further read of the same list doubles it."""
READ_BUDGET = 300
"""Postings the impact-ordered reads may take before the search switches to summing bounds in the server:
a query of many frequent terms (a long utterance) cannot be proven early, as a memory holding all of its
terms once could still win, and then one aggregate over the lists is cheaper than reading them in chunks."""
SUM_BELOW = 30_000
"""A query whose terms' document frequencies add up to at most this many postings sums the bounds in the
server at once: one aggregate over that many index entries cost no more than the impact-ordered reads (a few
statements and the rows met scored in Python) at 100k memories on the benchmark machine."""
SLACK = 1e-6
"""Impacts are stored as ``real`` (24-bit mantissa): the bound is raised by this much so rounding never cuts."""
DRIFT = 1.25
"""The factor by which the average length may move away from the impacts' reference before a bulk load
recomputes the impacts (searches stay exact at any drift; they read more)."""
DEFAULT_AVGDL = 10.0
"""The reference average length of a store created empty (any positive value keeps searches exact)."""

_OF = ("memroute_postings_of(r.owner, r.row_id, r.tokens, r.context_tokens, r.len_own, r.len_ctx, r.tsv_own, "
       "r.tsv_ctx, (SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl'))")
"""A lexical row ``r``'s postings, by the function of migration 5 (the triggers use the same)."""

AVGDL_SQL = ("SELECT coalesce(sum(len_own)::float8 / nullif(count(*), 0), %s), "
             "(SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl') FROM memroute_lexical")
"""(the average own length now, the reference of the impacts)."""
REFRESH_SQL = (
    "TRUNCATE memroute_postings",
    "INSERT INTO memroute_meta (key, value) VALUES ('bm25_avgdl', %s) ON CONFLICT (key) DO UPDATE SET "
    "value = excluded.value",
    f"INSERT INTO memroute_postings SELECT q.* FROM memroute_lexical r CROSS JOIN LATERAL {_OF} q",
)
"""Recompute every impact with a new reference average length (its one parameter goes to the second)."""

POSTINGS_SQL = (
    "SELECT l.ord, p.impact, p.row_id FROM unnest(%s::text[], %s::int2[], %s::real[], %s::int8[], %s::int4[]) "
    "WITH ORDINALITY AS l(term, field, below, after, n, ord) CROSS JOIN LATERAL (SELECT impact, row_id FROM "
    "memroute_postings p WHERE p.owner = %s AND p.field = l.field AND p.term = l.term AND p.impact <= l.below AND "
    "(p.impact < l.below OR p.row_id > l.after) ORDER BY p.impact DESC, p.row_id LIMIT l.n) p")
"""The next postings of several lists in one statement: list ``ord`` after its last (impact, row_id) read."""


BLOCK_POSTINGS = 65_536
"""Postings per row of ``memroute_blocks`` (768 kB): no value nears PostgreSQL's 1 GB limit."""
CHANGED_ROWS = 10_000
"""The most changed rows (not in the blocks yet) a search scores beside the blocks; past it, the sums in
the server (a writer that went past ``MERGE_ROWS`` folds them in after its write)."""
MERGE_ROWS = 2_000
"""Rows a process writes or deletes before it folds the changed rows into the blocks."""
DEAD_ROWS = 5_000
"""Deleted rows listed as changed past which the blocks are rebuilt from the postings."""
BLOCKS_LOCK_ID = 0x6D656D726F757466
"""The advisory lock of a build or merge of the blocks (one at a time)."""
_PACK = ("string_agg(int8send(row_id), ''::bytea ORDER BY row_id), "
         "string_agg(float4send(impact), ''::bytea ORDER BY row_id)")
_LOCK_CHANGED = "LOCK TABLE memroute_blocks_changed IN EXCLUSIVE MODE"
"""Writers wait (at their trigger) while the blocks take the changed rows: a row changed after the read is
listed again once the merge commits, a row changed before it is read as changed; searches read on."""
BUILD_BLOCKS_SQL = (
    "SELECT pg_advisory_xact_lock(%s)",
    "CREATE TEMP TABLE memroute_blocks_seen ON COMMIT DROP AS SELECT c.owner, c.row_id, r.xmin::text AS version "
    "FROM memroute_blocks_changed c LEFT JOIN memroute_lexical r ON r.row_id = c.row_id",
    "DELETE FROM memroute_blocks",
    f"INSERT INTO memroute_blocks SELECT owner, field, term, (n / {BLOCK_POSTINGS})::int, {_PACK} FROM (SELECT p.*, "
    "row_number() OVER (PARTITION BY owner, field, term ORDER BY row_id) - 1 AS n FROM memroute_postings p) p "
    f"GROUP BY owner, field, term, n / {BLOCK_POSTINGS}",
    _LOCK_CHANGED,
    "DELETE FROM memroute_blocks_changed c USING memroute_blocks_seen s WHERE c.owner = s.owner AND c.row_id = "
    "s.row_id AND s.version IS NOT DISTINCT FROM (SELECT r.xmin::text FROM memroute_lexical r WHERE r.row_id = "
    "s.row_id)",
)
"""Rebuild every block from ``memroute_postings`` without holding writers while it packs (22-37 s at 1M):
the changed rows are noted first with their lexical row's version (``xmin``, none if deleted), the blocks are
packed from the postings as they are then or later, and only at the end, under :data:`_LOCK_CHANGED` (which
waits for the writers inside their write and holds new ones for one short statement), a noted row is taken
off the list if its lexical row is still the version noted: its postings are in the new blocks. A row written
again in the meantime (committed, or waiting at its trigger for the lock) stays listed and is scored exactly.
Searches read the old blocks and list until the build commits (one transaction), then the new ones. The first
statement takes :data:`BLOCKS_LOCK_ID` (a merge meanwhile is skipped)."""
DEAD_SQL = ("SELECT count(*) FROM memroute_blocks_changed c WHERE NOT EXISTS (SELECT 1 FROM memroute_lexical r "
            "WHERE r.row_id = c.row_id)")
"""The deleted rows listed as changed (their postings stay in the blocks until a rebuild)."""
MERGE_BLOCKS_SQL = (
    "SELECT pg_try_advisory_xact_lock(%s)",
    _LOCK_CHANGED,
    "WITH r AS (DELETE FROM memroute_blocks_changed c USING memroute_lexical r WHERE r.row_id = c.row_id "
    "RETURNING r.*), p AS (SELECT q.* FROM r CROSS JOIN LATERAL " + _OF + " q) INSERT INTO memroute_blocks "
    "SELECT owner, field, term, coalesce((SELECT max(b.block) + 1 FROM memroute_blocks b WHERE b.owner = p.owner "
    f"AND b.field = p.field AND b.term = p.term), 0), {_PACK} FROM p GROUP BY owner, field, term",
)
"""Fold the changed rows that still exist into one new block per list (skipped while another build or merge
runs: the first statement tries :data:`BLOCKS_LOCK_ID`)."""
BLOCKS_SQL = ("SELECT l.ord, b.row_ids, b.impacts FROM unnest(%s::text[], %s::int2[]) WITH ORDINALITY AS "
              "l(term, field, ord) JOIN memroute_blocks b ON b.owner = %s AND b.field = l.field AND b.term = l.term")
"""Every block of the search's lists (list ``ord``); read in binary."""
CHANGED_SQL = "SELECT row_id FROM memroute_blocks_changed WHERE owner = %s LIMIT %s"


class BlockBounds:
    """Every memory's score bound from the blocks of a search's lists, summed in numpy: row ids (int8) and
    impacts (float4) decoded from the raw bytes, each list's impacts times its factor, added up per row id:
    in a dense array by row id when the ids are dense enough (the best are found by halving a cut until
    enough bounds pass it: no pass over every memory's index), else by sorting the ids."""

    def __init__(self, blocks: Sequence[Sequence[Any]], factors: Sequence[float], skip: Sequence[int]) -> None:
        ids: list[npt.NDArray[np.int64]] = []
        weights: list[npt.NDArray[np.float64]] = []
        for ord_, row_ids, impacts in blocks:
            ids.append(np.frombuffer(row_ids, dtype=">i8"))  # swapped once, when concatenated
            weights.append(np.multiply(np.frombuffer(impacts, dtype=">f4"), factors[int(ord_) - 1], dtype=np.float64))
        self._dense: npt.NDArray[np.float64] | None = None
        self._ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._bounds: npt.NDArray[np.float64] = np.zeros(0, dtype=np.float64)
        self._count = 0
        if not ids:
            return
        all_ids, all_weights = np.concatenate(ids, dtype=np.int64), np.concatenate(weights)
        left_out = np.asarray(skip, dtype=np.int64)
        top = int(all_ids.max()) + 1
        if top <= 8 * len(all_ids):
            self._dense = np.asarray(np.bincount(all_ids, all_weights, minlength=top), dtype=np.float64)
            self._dense[left_out[left_out < top]] = 0.0
            self._count = int(np.count_nonzero(self._dense))
        else:
            unique, inverse = np.unique(all_ids, return_inverse=True)
            summed = np.asarray(np.bincount(inverse, all_weights), dtype=np.float64)
            keep = ~np.isin(unique, left_out) & (summed > 0)
            self._ids, self._bounds = unique[keep], summed[keep]
            self._count = len(self._ids)

    def __len__(self) -> int:
        return self._count

    def _candidates(self, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Row ids and bounds of a set holding the ``k`` highest bounds (and maybe more)."""
        if self._dense is None:
            return self._ids, self._bounds
        dense = self._dense
        if k >= self._count:
            ids = np.flatnonzero(dense).astype(np.int64)
            return ids, dense[ids]
        cut = float(dense.max()) / 2
        while True:  # ends: past the smallest positive bound every one of the count > k passes
            ids = np.flatnonzero(dense > cut).astype(np.int64)
            if len(ids) >= k:
                return ids, dense[ids]
            cut /= 2

    def best(self, k: int) -> list[tuple[int, float]]:
        """The ``k`` highest bounds (row id, bound), best first, ties by row id."""
        ids, bounds = self._candidates(k)
        if len(ids) > k:  # keep the k highest and every bound equal to the k-th, then sort those
            kth = bounds[np.argpartition(-bounds, k - 1)[k - 1]]
            keep = bounds >= kth
            ids, bounds = ids[keep], bounds[keep]
        order = np.lexsort((ids, -bounds))[:k]
        return list(zip(ids[order].tolist(), bounds[order].tolist(), strict=True))


def bounds_sql(where: str | None) -> str:
    """Every memory of the owner that holds a query term, with its score bound (each list's share summed), best
    first: one pass over the lists' index entries in the server. A memory's exact score is at most its bound,
    so once the ``limit``-th exact score beats the bound of the next page, the answer is final. ``where`` (of
    ``where_clause``, its parameters after the owner) keeps only the memories a narrow filter (a session, a
    time range) lets through, reading their lexical rows: else most pages would hold none of them."""
    lexical = f"JOIN memroute_lexical m ON m.row_id = p.row_id AND {where} " if where else ""
    return ("SELECT p.row_id, sum(l.factor * p.impact) AS bound FROM unnest(%s::text[], %s::int2[], %s::float8[]) "
            "AS l(term, field, factor) JOIN memroute_postings p ON p.owner = %s AND p.field = l.field AND "
            f"p.term = l.term {lexical}GROUP BY p.row_id ORDER BY bound DESC, p.row_id LIMIT %s OFFSET %s")


REFERENCE_SQL = "SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl'"
WORK_MEM = "64MB"
"""The search's ``work_mem``: summing a long utterance's lists at 1M memories groups ~460,000 postings into
~300,000 memories, which spilled the hash aggregate to disk in five batches with the default 4 MB (the same
statement ran 514-574 ms with 64 MB against 660-726 ms, back to back at load 9; docs/benchmarks.md)."""
SNAPSHOT_SQL = ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", f"SET LOCAL work_mem = '{WORK_MEM}'")
"""A search's reads see one snapshot (a list read in several statements is read as of one moment), with room
to sum the lists in memory (two statements: a pipeline sends each with its own message)."""


def lexical_rows_sql(where: str) -> str:
    """The lexical rows of the given row ids that pass the filters (``where`` of ``where_clause``); its
    parameters are the row ids, then the filter's."""
    return ("SELECT id, tokens, context_tokens, len_own, len_ctx, row_id FROM memroute_lexical m "
            f"WHERE m.row_id = ANY(%s) AND {where}")


def changed_rows_sql(where: str) -> str:
    """The lexical rows of the changed rows listed for the owner (up to a limit: :data:`CHANGED_SQL`'s, by a
    subquery, so that they come in the same round trip as the list) that hold a query term and pass the filters
    (``where`` of ``where_clause``): the changed rows a search scores beside the blocks, most of them without
    the query's terms. The parameters are the owner and the limit, the filter's, then the query's ``tsquery``
    twice."""
    return ("SELECT id, tokens, context_tokens, len_own, len_ctx, row_id FROM memroute_lexical m WHERE m.row_id IN "
            "(SELECT c.row_id FROM memroute_blocks_changed c WHERE c.owner = %s LIMIT %s) "
            f"AND {where} AND (m.tsv_own @@ %s::tsquery OR m.tsv_ctx @@ %s::tsquery)")


def search_lists(terms: Sequence[str], w_own: float, w_ctx: float) -> list[tuple[str, int, float]]:
    """(term, field, weight) of every list a search reads, in the order of :attr:`ImpactSearch.lists` (the
    ``ord`` of :data:`BLOCKS_SQL` and :data:`POSTINGS_SQL` counts in it)."""
    fields = ((0, w_own),) + (((1, w_ctx),) if w_ctx > 0 else ())
    return [(t, f, w) for t in terms for f, w in fields if w > 0]


def needs_refresh(avgdl_now: float, reference: float | None) -> bool:
    if reference is None or reference <= 0:
        return True
    return max(avgdl_now / reference, reference / avgdl_now) > DRIFT if avgdl_now > 0 else False


@dataclass
class _List:
    term: str
    field: int
    idf: float
    weight: float
    below: float = math.inf
    after: int = -1
    chunk: int = FIRST_CHUNK
    done: bool = False


@dataclass
class ImpactSearch:
    """The state of one search between reads; no I/O. ``collection`` is (N, sum of own lengths, sum of
    context lengths), ``dfs`` the document frequencies of ``terms`` as BM25 counts them."""

    terms: Sequence[str]
    w_own: float
    w_ctx: float
    collection: tuple[int, float, float]
    dfs: dict[str, int]
    limit: int
    reference: float = DEFAULT_AVGDL
    lists: list[_List] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    best: list[tuple[float, int, str]] = field(default_factory=list)
    """A min-heap of the ``limit`` best (score, -row_id, id): its root is the one to beat."""
    postings_read: int = 0
    rounds: int = 0

    def __post_init__(self) -> None:
        docs = self.collection[0]
        self.lists = [_List(t, f, bm25.idf(docs, self.dfs[t]), max(1.0, w))
                      for t, f, w in search_lists(self.terms, self.w_own, self.w_ctx)]

    @property
    def avgdl(self) -> float:
        docs, sum_own, sum_ctx = self.collection
        return (self.w_own * sum_own + self.w_ctx * sum_ctx) / max(docs, 1)

    def _contribution(self, lst: _List) -> float:
        if lst.done:
            return 0.0
        drift = max(1.0, self.avgdl / self.reference)
        impact = lst.below if not math.isinf(lst.below) else bm25.K1 + 1  # the most any impact can be
        return lst.idf * lst.weight * drift * impact * (1 + SLACK)

    def bound(self) -> float:
        """The highest score a memory not met yet can have."""
        return sum(self._contribution(lst) for lst in self.lists)

    def final(self) -> bool:
        """Whether no memory not met yet can enter the answer."""
        if self.avgdl <= 0 or self.limit <= 0:
            return True
        bound = self.bound()
        return bound <= 0 or (len(self.best) >= self.limit and bound < self.threshold())

    def threshold(self) -> float:
        """The score to beat, or 0 while fewer than ``limit`` memories scored."""
        return self.best[0][0] if len(self.best) >= self.limit else 0.0

    def next_reads(self) -> list[tuple[int, _List]] | None:
        """The lists to read next (index, list), or None when the answer is final.

        A list is read when its share of the bound is at least the gap to close divided by the number of
        lists: the list that holds the bound up most is always among them."""
        if self.final() or self.postings_read >= READ_BUDGET or sum(self.dfs.values()) <= SUM_BELOW:
            return None
        bound, theta = self.bound(), self.threshold()
        gap = (bound - theta) / len(self.lists)
        return [(i, lst) for i, lst in enumerate(self.lists) if not lst.done and self._contribution(lst) >= gap]

    def read_params(self, reads: Sequence[tuple[int, _List]], owner: str) -> list[Any]:
        return [[lst.term for _, lst in reads], [lst.field for _, lst in reads], [lst.below for _, lst in reads],
                [lst.after for _, lst in reads], [lst.chunk for _, lst in reads], owner]

    def took(self, reads: Sequence[tuple[int, _List]], rows: Sequence[Sequence[Any]]) -> list[int]:
        """Record the postings read (rows of ``POSTINGS_SQL``, in each list's order); the row ids met first now."""
        self.rounds += 1
        self.postings_read += len(rows)
        got = [0] * len(reads)
        new: list[int] = []
        for ord_, impact, row_id in rows:
            k = int(ord_) - 1
            lst = reads[k][1]
            got[k] += 1
            lst.below, lst.after = float(impact), int(row_id)
            if row_id not in self.seen:
                self.seen.add(row_id)
                new.append(int(row_id))
        for k, (_, lst) in enumerate(reads):
            if got[k] < lst.chunk:
                lst.done = True
            lst.chunk *= 2
        return new

    def bound_params(self, owner: str) -> list[Any]:
        """The first parameters of :func:`bounds_sql`: each list's factor on an impact (its share of
        :meth:`bound`), then the owner."""
        return [[lst.term for lst in self.lists], [lst.field for lst in self.lists], self.factors(), owner]

    def factors(self) -> list[float]:
        """Each list's factor on an impact: its share of :meth:`bound` is the factor times its impact."""
        drift = max(1.0, self.avgdl / self.reference)
        return [lst.idf * lst.weight * drift * (1 + SLACK) for lst in self.lists]

    def rescored(self, bounds: Sequence[Sequence[Any]]) -> list[int]:
        """The row ids of a page of :func:`bounds_sql` not scored yet (each has already been met or is new)."""
        new = [int(row_id) for row_id, _ in bounds if row_id not in self.seen]
        self.seen.update(new)
        return new

    def scored(self, hits: Sequence[tuple[float, int, str]]) -> None:
        """Exact (score, row_id, id) of memories met (those passing the filters)."""
        for score, row_id, mid in hits:
            item = (score, -row_id, mid)
            if len(self.best) < self.limit:
                heapq.heappush(self.best, item)
            elif item > self.best[0]:
                heapq.heapreplace(self.best, item)

    def answer(self) -> list[tuple[float, str]]:
        """(score, id) best first, ties in insertion order."""
        return [(score, mid) for score, _, mid in sorted(self.best, reverse=True)]
