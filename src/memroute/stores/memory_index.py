"""An exact in-memory search index — cosine KNN and Okapi BM25 — with the store's filters.

Why in memory: on this project's 2-core machines, brute-force numpy cosine is the fastest exact KNN
(0.4 ms at 10k and ~8 ms at 100k 384-d vectors; sqlite-vec was 4-9x slower; STACK.md), and SQLite FTS5's
BM25 costs ~1.3 µs per matching posting (it looks up every matching row's length), which put its p95 at
~20-50 ms on 100k real chat messages, where numpy scores the same postings in ~1-2 ms. The backend's
tables stay the source of truth: the index is kept up to date from their change log, and a large one is
saved next to the database (:mod:`memroute.stores.index_files`) so that opening it maps files instead of
reading every row. From 65,536 rows on, a vector search first scans an 8-bit copy of the vectors and rescores
the best rows exactly, with a bound that proves the answer equals a full float32 scan
(:mod:`memroute.stores.quantized`; ~1.6x faster at 1M); from 8,192 rows an in-memory 8-bit copy does the same
with faiss's kernel rescoring (its scores' bits). A large saved index also has an approximate graph
(:mod:`memroute.stores.ann`) whose candidates are rescored exactly.

BM25 is :mod:`memroute.stores.bm25` (Okapi, two weighted fields). N, n and the average length are taken
over the whole index (every owner), as in FTS5 and Lucene. A row's tokens are indexed with the parts of its
hyphenated words (:func:`memroute.text.index_terms`); its length counts the tokens only.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from memroute.runtime import limit_openmp_here, limit_threads
from memroute.stores import ann, bm25, quantized, time_copy
from memroute.stores.ann import AnnGraph
from memroute.stores.postings import Csr, Postings
from memroute.stores.time_copy import TimeCopy
from memroute.stores.vector_file import VectorFile
from memroute.text.tokenizers import index_terms
from memroute.times import to_micros
from memroute.types import MemoryItem, MemoryKind, ScoredId, SearchFilter

_KINDS = {k: i for i, k in enumerate(MemoryKind)}
limit_threads()
_META = ("_alive", "_owner", "_session", "_kind", "_sens", "_occurred", "_expires", "_archived", "_len_own",
         "_len_ctx", "_row")


_SCORE_BLOCK = 8192
_BLOCK_ROWS = 64
_DENSE_SHARE = 8
"""A BM25 search whose postings number an eighth of the rows or more cuts its best rows from every row's score
(:meth:`MemoryIndex._top_scored`, passes over every row); fewer postings: from their own scores. At 1M rows the two
cost the same at ~90-125k postings (the 200 bench queries, load 8.6: 1.2-1.3 ms from every row's score whatever the
postings, from the postings' own scores 1.2 ms at 50k-100k, 1.8 ms at 100k-150k, 2.7-2.8 ms at 150k-250k)."""
_FEW_SHARE = 16
"""A BM25 search whose postings number fewer than a sixteenth of the rows sums them in this thread's kept buffer
(:func:`_sum_few`), not in a new array of every row's score: at 1M rows below ~60k postings that was 0.14 against
0.42 ms (p50, under 20k) and 0.55 against 0.66 ms (20k-60k), with no wait for new pages (max 1.1-1.4 against 3.6-4.2
ms); from 60k to 125k it was slower (1.41 against 1.18 ms; docs/benchmarks.md, branch bm1)."""
_GROUP_SHARE = 8
""":meth:`MemoryIndex._top_scored` reads the rows of the groups whose best reaches its cut while they are at most an
eighth of the rows; more: one pass over every row's score."""
_KEPT_MASKS = 4
"""Filters whose masks of every row are kept at once (1 MB each at 1M rows): a recall with a time range filters
with and without it, and its BM25 searches read the same masks as its vector searches (:meth:`MemoryIndex._passing`)."""
NO_TIME = np.iinfo(np.int64).min
"""``occurred_at`` of a row without one (it matches no time range)."""
NEVER = np.iinfo(np.int64).max
"""``expires_at`` of a row that does not expire."""


@dataclass(frozen=True, slots=True)
class RowMeta:
    """What the filters read of a row; times in whole microseconds since the epoch (:mod:`memroute.times`)."""

    id: str
    owner: str
    session_id: str | None
    kind: MemoryKind
    sensitivity: int
    occurred_at: int
    expires_at: int
    archived: bool

    @classmethod
    def of(cls, m: MemoryItem) -> RowMeta:
        return cls(m.id, m.owner, m.session_id, m.kind, int(m.sensitivity),
                   NO_TIME if m.occurred_at is None else to_micros(m.occurred_at),
                   NEVER if m.expires_at is None else to_micros(m.expires_at), m.archived)


class _Impacts:
    """The BM25 contributions of the terms with the longest posting lists, kept between searches until the index
    changes (as the length norms are): at 1M rows a query of 20 tokens has common words of 100k-200k postings each,
    and computing their scores from the frequencies and the rows' norms again at every search was most of its time.
    The values are those computed then (the same float32 numbers). At most ``MAX_POSTINGS`` are kept (least
    recently used go first): 48 MB of slots and scores."""

    MIN_POSTINGS = 4096
    MAX_POSTINGS = 4_000_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = -1
        self._held = 0
        self._terms: dict[tuple[str, float, float], tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]] = {}

    def get(self, term: str, w_own: float, w_ctx: float,
            changes: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]] | None:
        with self._lock:
            if changes != self._at:
                return None
            kept = self._terms.pop((term, w_own, w_ctx), None)
            if kept is not None:
                self._terms[(term, w_own, w_ctx)] = kept  # the most recently used, last
            return kept

    def put(self, term: str, w_own: float, w_ctx: float, changes: int, slots: npt.NDArray[np.int32],
            impact: npt.NDArray[np.float32]) -> None:
        if not self.MIN_POSTINGS <= len(slots) <= self.MAX_POSTINGS:
            return
        with self._lock:
            if changes != self._at:
                self._terms.clear()
                self._at, self._held = changes, 0
            while self._terms and self._held + len(slots) > self.MAX_POSTINGS:
                oldest = next(iter(self._terms))
                self._held -= len(self._terms.pop(oldest)[0])
            self._terms[(term, w_own, w_ctx)] = (slots, impact)
            self._held += len(slots)


class _Repeated:
    """The sums of BM25 searches whose terms were asked before, kept until the index changes: a recall of a request
    also runs the constraint search (:mod:`memroute.retrieval.constraints`), whose 30-60 terms are one of a few fixed
    sets (one per domain), so the same terms come back every few recalls; at 1M rows summing their 60k-150k postings
    again was 2-5 ms of such a recall (23 of the bench's 200). A set is kept from its second search on (a message's
    own terms, asked once, never enter) as the search had it: the rows that have a term (once per term) and their sums
    (16 bytes a posting), or every row's sum when the search cut from those (8 bytes a row: 8 MB at 1M rows); at most
    ``KEEP_BYTES`` in all, least recently used first. Keeping costs nothing: the arrays are the search's own."""

    KEEP_BYTES = 32 << 20
    SEEN = 1024

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = -1
        self._seen: dict[tuple[Any, ...], None] = {}
        self._kept: dict[tuple[Any, ...], tuple[npt.NDArray[np.intp] | None, npt.NDArray[np.float64]]] = {}
        self._held = 0

    @staticmethod
    def size(kept: tuple[npt.NDArray[np.intp] | None, npt.NDArray[np.float64]]) -> int:
        return (0 if kept[0] is None else kept[0].nbytes) + kept[1].nbytes

    def _now(self, changes: int) -> None:
        if changes != self._at:
            self._seen.clear()
            self._kept.clear()
            self._at, self._held = changes, 0

    def get(self, key: tuple[Any, ...],
            changes: int) -> tuple[npt.NDArray[np.intp] | None, npt.NDArray[np.float64]] | None:
        """``(rows, sums)`` of the postings, or ``(None, sums)`` of every row."""
        with self._lock:
            self._now(changes)
            kept = self._kept.pop(key, None)
            if kept is not None:
                self._kept[key] = kept  # the most recently used, last
            return kept

    def _asked_before(self, key: tuple[Any, ...]) -> bool:
        """Whether ``key`` was searched before (since the last change); remembers it. Under the lock."""
        if key in self._seen:
            return True
        if len(self._seen) >= self.SEEN:
            del self._seen[next(iter(self._seen))]
        self._seen[key] = None
        return False

    def offer(self, key: tuple[Any, ...], changes: int, rows: npt.NDArray[np.intp] | None,
              sums: npt.NDArray[np.float64]) -> None:
        """A search's ``(rows, sums)`` (as :meth:`get` returns them), kept if ``key`` was searched before."""
        size = self.size((rows, sums))
        with self._lock:
            self._now(changes)
            if not self._asked_before(key) or size > self.KEEP_BYTES:
                return
            old = self._kept.pop(key, None)
            self._held -= 0 if old is None else self.size(old)
            while self._kept and self._held + size > self.KEEP_BYTES:
                self._held -= self.size(self._kept.pop(next(iter(self._kept))))
            self._kept[key] = (rows, sums)
            self._held += size


@dataclass(frozen=True, slots=True)
class _KeptMask:
    """A kept :meth:`MemoryIndex._allowed` mask without its expiry test, by its filter and the index's changes;
    ``soonest``: the earliest ``expires_at`` of the rows it passes."""

    key: tuple[Any, ...]
    mask: npt.NDArray[np.bool_]
    passing: int
    soonest: int


class _Ids:
    """Memory ids by slot: a UTF-8 blob with offsets for the rows read from the index files, a list after."""

    def __init__(self, blob: npt.NDArray[np.uint8] | None = None, offsets: npt.NDArray[np.int64] | None = None) -> None:
        self._blob = blob if blob is not None else np.empty(0, dtype=np.uint8)
        self._off = offsets if offsets is not None else np.zeros(1, dtype=np.int64)
        self._base = len(self._off) - 1
        self._added: list[str] = []

    def __getitem__(self, slot: int) -> str:
        if slot < self._base:
            return bytes(self._blob[int(self._off[slot]) : int(self._off[slot + 1])]).decode("utf-8")
        return self._added[slot - self._base]

    def set(self, slot: int, value: str) -> None:
        """Set the id of ``slot``, the next one to be used."""
        if slot - self._base != len(self._added):
            raise IndexError("ids are set in slot order")
        self._added.append(value)

    def frozen(self, n: int) -> _Ids:
        """Slots ``[0, n)`` in a copy that later sets do not change (the blob is shared: nothing writes it)."""
        copy = _Ids(self._blob, self._off)
        copy._added = self._added[: max(0, n - self._base)]
        return copy

    def blob(self, n: int) -> tuple[bytes, npt.NDArray[np.int64]]:
        """Slots ``[0, n)`` as a UTF-8 blob and offsets."""
        added = [s.encode("utf-8") for s in self._added[: max(0, n - self._base)]]
        lengths = np.fromiter((len(b) for b in added), dtype=np.int64, count=len(added))
        off = np.concatenate([self._off[: min(n, self._base) + 1],
                              int(self._off[min(n, self._base)]) + np.cumsum(lengths)]).astype(np.int64)
        return bytes(self._blob[: int(self._off[min(n, self._base)])]) + b"".join(added), off


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the index files are written from (:meth:`MemoryIndex.snapshot`): rows ``[0, rows)`` and the graph
    then attached, which covered the slots below ``ann_rows``; ``live`` rows of them not deleted."""

    dimension: int
    matrix: npt.NDArray[np.float32]
    meta: dict[str, npt.NDArray[Any]]
    codes: list[str]
    ids: _Ids
    postings: Postings
    graph: AnnGraph | None
    ann_rows: int
    live: int
    vector_file: VectorFile | None = None
    """The saved file that holds the matrix's first rows, read instead of it (:mod:`memroute.stores.vector_file`)."""

    @property
    def rows(self) -> int:
        return len(self.matrix)

    def vectors(self, slots: npt.NDArray[np.integer]) -> npt.NDArray[np.float32]:
        """The vectors of ``slots``, read from the saved file where it holds them, not through a memory map."""
        return _take(self.matrix, self.vector_file, slots)


class MemoryIndex:
    """Rows keyed by the backend's integer row id; ``put`` replaces, ``remove`` deletes.

    Vectors may live in a memory-mapped file (:mod:`memroute.stores.index_files`, copy-on-write: the file
    never changes under the index; rows put later are written to the mapping's room past the file's rows).
    Searches read the file's rows with ``pread`` (:class:`VectorFile`), not through the mapping, whose 2 MB
    page-cache folios would count in the process's resident memory. An approximate graph
    (:mod:`memroute.stores.ann`) over the rows below ``ann_rows`` may serve as a first pass, rescored exactly
    (:meth:`attach_graph`). The index files are written from a :meth:`snapshot`.
    """

    def __init__(self, dimension: int, capacity: int = 1024) -> None:
        self.dimension = dimension
        self._matrix: npt.NDArray[np.float32] = np.zeros((capacity, dimension), dtype=np.float32)
        self._n = 0
        self._alive = np.zeros(capacity, dtype=bool)
        self._owner = np.zeros(capacity, dtype=np.int32)
        self._session = np.zeros(capacity, dtype=np.int32)
        self._kind = np.zeros(capacity, dtype=np.int8)
        self._sens = np.zeros(capacity, dtype=np.int8)
        self._occurred = np.zeros(capacity, dtype=np.int64)
        self._expires = np.zeros(capacity, dtype=np.int64)
        self._archived = np.zeros(capacity, dtype=bool)
        self._len_own = np.zeros(capacity, dtype=np.float32)
        self._len_ctx = np.zeros(capacity, dtype=np.float32)
        self._row = np.zeros(capacity, dtype=np.int64)
        self._ids = _Ids()
        self._slot_by_row = np.full(1024, -1, dtype=np.int64)
        self._codes: dict[str, int] = {"": 0}
        self._postings = Postings()
        self._sum_own = 0.0
        self._sum_ctx = 0.0
        self._dead = 0
        self._changes = 0
        """Counts puts, removes and compactions: what the cached length norms were computed at."""
        self._norms: tuple[tuple[float, float, int], npt.NDArray[np.float32]] | None = None
        self._last_bm25: tuple[tuple[frozenset[str], float, float, int], npt.NDArray[np.intp],
                               npt.NDArray[np.float64], bool] | None = None
        """The last BM25 search's postings' rows and every row's score before the filter (or, for few postings, each
        posting's row's score: ``False``), by its terms, weights and ``_changes``."""
        self._impacts = _Impacts()
        self._repeated = _Repeated()
        self._kept_masks: dict[tuple[Any, ...], _KeptMask] = {}
        self._quantized = quantized.QuantizedCopy(dimension)
        self._bytes = quantized.ByteCopy(dimension)
        self._graph: AnnGraph | None = None
        self._file: VectorFile | None = None
        self._time: TimeCopy | None = None
        self.ann_rows = 0
        """Slots below this are in the graph (by row id); the rest are scanned exactly."""

    @classmethod
    def from_parts(cls, dimension: int, matrix: npt.NDArray[np.float32], meta: dict[str, npt.NDArray[Any]],
                   codes: list[str], ids: tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]], postings: Csr,
                   headroom: int, vector_file: VectorFile | None = None,
                   by_time: TimeCopy | None = None) -> MemoryIndex:
        """An index over ``n`` rows read from files: ``matrix`` has room for ``headroom`` more rows; its first
        rows are those of ``vector_file``, if given, which searches read instead; ``by_time``: their 8-bit copy in
        time order (:mod:`memroute.stores.time_copy`)."""
        n = len(meta["_alive"])
        index = cls(dimension, capacity=1)
        index._matrix, index._file, index._time = matrix, vector_file, by_time
        for name in _META:
            arr = np.zeros(n + headroom, dtype=getattr(index, name).dtype)
            arr[:n] = meta[name]
            setattr(index, name, arr)
        index._n = n
        index._codes = {c: i for i, c in enumerate(codes)}
        index._ids = _Ids(*ids)
        index._postings = Postings(postings)
        alive = index._alive[:n]
        index._dead = int(n - np.count_nonzero(alive))
        index._sum_own = float(np.sum(index._len_own[:n][alive], dtype=np.float64))
        index._sum_ctx = float(np.sum(index._len_ctx[:n][alive], dtype=np.float64))
        rows = index._row[:n][alive]
        index._slot_by_row = np.full(int(rows.max(initial=0)) + 1024, -1, dtype=np.int64)
        index._slot_by_row[rows] = np.flatnonzero(alive)
        return index

    def snapshot(self) -> Snapshot:
        """Rows ``[0, n)`` as they are now, for writing the index files on another thread while this index
        changes: the matrix rows are shared (a row's vector is never written over in place: a put takes a new
        slot, compaction and growth a new matrix), the columns copied (a delete clears ``_alive`` in place,
        compaction moves rows), the ids and postings frozen (their blob and CSR table are made on the writer's
        thread: sorting 1M rows' postings takes seconds)."""
        codes = sorted(self._codes, key=self._codes.__getitem__)
        return Snapshot(self.dimension, self._matrix[: self._n],
                        {name: getattr(self, name)[: self._n].copy() for name in _META}, codes,
                        self._ids.frozen(self._n), self._postings.frozen(), self._graph, self.ann_rows, len(self),
                        self._file)

    @property
    def rows(self) -> int:
        """Slots used, deleted rows included (the next slot to be written)."""
        return self._n

    @property
    def graph(self) -> AnnGraph | None:
        return self._graph

    @property
    def time_copy(self) -> TimeCopy | None:
        """The saved rows' 8-bit copy in time order, if the index was read from files that have one (dropped when
        compaction renumbers the slots)."""
        return self._time

    def attach_graph(self, graph: AnnGraph | None, rows: int) -> None:
        """Use ``graph`` (keys: row ids) for slots below ``rows``; ``None`` goes back to the exact scan."""
        self._graph, self.ann_rows = graph, (rows if graph is not None else 0)

    def __len__(self) -> int:
        return self._n - self._dead

    def _code(self, value: str) -> int:
        code = self._codes.get(value)
        if code is None:
            code = len(self._codes)
            self._codes[value] = code
        return code

    def _grow(self, needed: int) -> None:
        if needed > len(self._matrix):
            cap = len(self._matrix)
            new = np.zeros((max(needed, cap * 2), self.dimension), dtype=np.float32)
            for start in range(0, self._n, 65_536):
                stop = min(self._n, start + 65_536)
                new[start:stop] = self._vector_range(start, stop)
            self._matrix, self._file = new, None
        cap = len(self._alive)
        if needed <= cap:
            return
        new_cap = max(needed, cap * 2)
        for name in _META:
            old = getattr(self, name)
            arr = np.zeros(new_cap, dtype=old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    # ---------------------------------------------------------------------------------------- writing
    def put(self, row: int, meta: RowMeta, vector: npt.NDArray[np.float32], tokens: Sequence[str] = (),
            context_tokens: Sequence[str] = ()) -> None:
        self.remove(row)
        self._changes += 1
        self._grow(self._n + 1)
        slot = self._n
        self._n += 1
        self._matrix[slot] = vector
        self._alive[slot] = True
        self._owner[slot] = self._code("o:" + meta.owner)
        self._session[slot] = self._code("s:" + meta.session_id) if meta.session_id else 0
        self._kind[slot] = _KINDS[meta.kind]
        self._sens[slot] = meta.sensitivity
        self._occurred[slot] = meta.occurred_at
        self._expires[slot] = meta.expires_at
        self._archived[slot] = meta.archived
        self._row[slot] = row
        self._ids.set(slot, meta.id)
        if row >= len(self._slot_by_row):
            grown = np.full(max(row + 1, 2 * len(self._slot_by_row)), -1, dtype=np.int64)
            grown[: len(self._slot_by_row)] = self._slot_by_row
            self._slot_by_row = grown
        self._slot_by_row[row] = slot
        # the parts of hyphenated words are indexed but not counted in the lengths (memroute.text.index_terms)
        own, ctx = Counter(index_terms(tokens)), Counter(index_terms(context_tokens))
        self._len_own[slot], self._len_ctx[slot] = len(tokens), len(context_tokens)
        self._sum_own += len(tokens)
        self._sum_ctx += len(context_tokens)
        for term in own.keys() | ctx.keys():
            self._postings.add(term, slot, own.get(term, 0), ctx.get(term, 0))

    def remove(self, row: int) -> None:
        if row >= len(self._slot_by_row) or self._slot_by_row[row] < 0:
            return
        slot = int(self._slot_by_row[row])
        self._slot_by_row[row] = -1
        self._alive[slot] = False
        self._sum_own -= float(self._len_own[slot])
        self._sum_ctx -= float(self._len_ctx[slot])
        self._dead += 1
        self._changes += 1
        if self._dead > 1024 and self._dead > self._n // 4:
            self._compact()

    def _compact(self) -> None:
        """Drop deleted rows: move live rows down and renumber them in every posting list."""
        live = np.flatnonzero(self._alive[: self._n])
        new_slot = np.full(self._n, -1, dtype=np.int64)
        new_slot[live] = np.arange(len(live))
        matrix = np.zeros((len(live) + 1024, self.dimension), dtype=np.float32)
        for start in range(0, len(live), 65_536):  # a memory-mapped matrix is never written over
            part = live[start : start + 65_536]
            matrix[start : start + len(part)] = self._vectors(part)
        self._matrix, self._file, self._time = matrix, None, None
        for name in _META:
            arr = getattr(self, name)
            arr[: len(live)] = arr[live]
            arr[len(live) : self._n] = 0
        ids = [self._ids[int(s)] for s in live]
        self._ids = _Ids()
        for slot, value in enumerate(ids):
            self._ids.set(slot, value)
        self._postings = Postings(self._postings.csr(new_slot))
        self._slot_by_row[:] = -1
        self._slot_by_row[self._row[: len(live)]] = np.arange(len(live))
        self.ann_rows = int(np.count_nonzero(live < self.ann_rows))  # compaction keeps the slots' order
        self._n = len(live)
        self._dead = 0
        self._changes += 1
        self._quantized.reset()
        self._bytes.reset()

    # ---------------------------------------------------------------------------------------- reading
    def search_vector(self, query: npt.NDArray[np.float32], flt: SearchFilter, limit: int,
                      exact: bool = False) -> list[ScoredId]:
        """The ``limit`` rows nearest ``query`` that pass ``flt``. Scores are always exact; the rows are the
        exact top ``limit`` if ``exact`` or if no graph is attached, else those of the graph's first pass
        (recall@10 against exact search: docs/benchmarks.md)."""
        if limit <= 0:
            return []
        if self._time is not None and (flt.start is not None or flt.end is not None):
            found = self._search_time_range(query, flt, limit)
            if found is not None:
                return found
        found_allowed = self._allowed(flt)
        if found_allowed is None:
            return []
        allowed, qualifying = found_allowed
        if qualifying == 0:
            return []
        if qualifying * 2 <= self._n:  # a small share: score just those rows
            slots = np.flatnonzero(allowed)
            return self._top(slots, self._scores(slots, query), limit)
        # Most rows qualify: scan the whole matrix with faiss's SIMD inner products (2-3x numpy's sgemv
        # here: 7.5 ms against 22 ms for 100k x 512) and keep the best rows that pass the filters, asking
        # for more until enough do. Exact: every qualifying row above the k-th best of all rows is seen.
        if self._graph is not None and not exact:
            found = self._search_graph(query, allowed, limit, qualifying)
            if found is not None:
                return found
        if self._n >= quantized.MIN_ROWS:
            return self._search_quantized(query, allowed, limit)
        if self._n >= quantized.BYTES_MIN_ROWS:
            return self._search_bytes(query, allowed, qualifying, limit)
        # below quantized.MIN_ROWS the whole matrix is scanned through its mapping (at most 65,536 rows, 128 MB
        # at 512-d, resident once read): reading it with pread would copy it at every search
        matrix, q = self._matrix[: self._n], np.ascontiguousarray(query[None, :], dtype=np.float32)
        k = min(self._n, limit + 32 + limit * (self._n // qualifying))
        limit_openmp_here()
        while True:
            scores, found_slots = faiss.knn(q, matrix, k, metric=faiss.METRIC_INNER_PRODUCT)
            found_slots, scores = found_slots[0], scores[0]
            keep = (found_slots >= 0) & allowed[np.maximum(found_slots, 0)]
            if int(keep.sum()) >= limit or k >= self._n:
                # rows tied with the k-th score may be cut at the boundary; re-rank what is kept
                return self._top(found_slots[keep], scores[keep], limit)
            k = min(self._n, k * 4)

    def _search_graph(self, query: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_], limit: int,
                      qualifying: int) -> list[ScoredId] | None:
        """The graph's candidates and every row added after it, rescored exactly; ``None`` if too few pass."""
        assert self._graph is not None
        want = max(ann.CANDIDATES, 4 * limit) * max(1, self._n // max(qualifying, 1))
        keys = self._graph.search(query, want)
        keys = keys[(keys >= 0) & (keys < len(self._slot_by_row))]
        from_graph = self._slot_by_row[keys]
        from_graph = from_graph[from_graph >= 0]
        from_graph = from_graph[allowed[from_graph]]
        if from_graph.size < min(limit, qualifying):
            return None
        cand = np.unique(from_graph[from_graph < self.ann_rows])  # re-put rows come from the exact part
        scores = self._scores(cand, query)
        if self.ann_rows < self._n:  # rows the graph has not seen yet: an exact scan of those that pass
            tail = np.arange(self.ann_rows, self._n)[allowed[self.ann_rows : self._n]]
            cand = np.concatenate([cand, tail])
            scores = np.concatenate([scores, self._scores(tail, query)])
        return self._top(cand, scores, limit)

    def _search_time_range(self, query: npt.NDArray[np.float32], flt: SearchFilter,
                           limit: int) -> list[ScoredId] | None:
        """Exact top ``limit`` inside a time range that holds at most half the rows, found from the time-ordered
        copy (:mod:`memroute.stores.time_copy`): the other filters are read for the range's rows only, from the kept
        mask of the filter without its range (:meth:`_allowed`), and the range is scored through the copy (one
        contiguous read, the best rows rescored with a proven bound) unless scoring the rows that pass one by one
        costs less (few of the range's rows pass the other filters, or the range is small). ``None`` for a larger
        range (the whole-column path). Every row below the copy's rows that passes a time range is in the copy (rows
        without a time or deleted when it was written pass none, and a slot's time never changes); the rows put
        after it are filtered and scored exactly."""
        copy = self._time
        assert copy is not None
        a, b = copy.span(None if flt.start is None else to_micros(flt.start),
                         None if flt.end is None else to_micros(flt.end))
        if (b - a) * 2 > self._n:
            return None
        # the other filters from the kept mask of every row (a recall's search without the range made it), read for
        # the range's rows: one gather, against the filter columns' seven at 40k scattered rows (~2.5 ms a month)
        found_allowed = self._allowed(replace(flt, start=None, end=None))
        if found_allowed is None:
            return []
        allowed = found_allowed[0]
        in_range = copy.order[a:b]
        keep = allowed[in_range]  # the copy's rows [a, b) are inside the range
        after = slice(copy.rows, self._n)
        tail = np.flatnonzero(allowed[after] & self._in_time(after, flt)) + copy.rows
        passing = int(np.count_nonzero(keep))
        if (b - a) / time_copy.ROW_COST + max(time_copy.OVERHEAD_ROWS, 4 * limit) >= passing:
            slots = np.sort(np.concatenate([in_range[keep], tail]))
            return self._top(slots, self._scores(slots, query), limit)
        slots, scores = copy.search(query, a, b, keep, limit, lambda s: self._scores(s, query),
                                    (tail, self._scores(tail, query)))
        return self._top(slots, scores, limit)

    def _search_bytes(self, query: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_], qualifying: int,
                      limit: int) -> list[ScoredId]:
        """Exact top ``limit`` through the in-memory 8-bit copy (:class:`quantized.ByteCopy`): the best rows by
        approximate score are rescored by faiss's inner product (a row's score is the same bits whichever rows it is
        scanned with, so the answers are the full scan's, scores included), and a bound proves that no row left out
        could be in the exact top ``limit``; else fourfold more rows are rescored."""
        self._bytes.sync(self._vector_range, self._n)
        approx = self._bytes.approximate(query)
        if qualifying == self._n:
            slots = np.arange(self._n)
        else:
            slots = np.flatnonzero(allowed)
            approx = approx[slots]
        matrix, q = self._matrix[: self._n], np.ascontiguousarray(query[None, :], dtype=np.float32)
        limit_openmp_here()

        def exact(cand: npt.NDArray[np.integer]) -> npt.NDArray[np.float32]:
            found_scores, found = faiss.knn(q, np.ascontiguousarray(matrix[cand]), len(cand),
                                            metric=faiss.METRIC_INNER_PRODUCT)
            scores = np.empty(len(cand), dtype=np.float32)
            scores[found[0]] = found_scores[0]
            return scores

        cand, scores = time_copy.exact_top(approx, slots, self._bytes.bound(query), limit,
                                           min(len(slots), max(quantized.BYTES_FIRST_K, 2 * limit)), exact)
        return self._top(cand, scores, limit)

    def _search_quantized(self, query: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_],
                          limit: int) -> list[ScoredId]:
        """Exact top ``limit`` through the 8-bit first pass (see :mod:`memroute.stores.quantized`)."""
        self._quantized.sync(self._vector_range, self._n)
        bound = self._quantized.error_bound(query)
        k = min(self._n, max(quantized.FIRST_K, 4 * limit))
        while True:
            approx, found = self._quantized.search(query, k)
            found = found[found >= 0]
            cand = found[allowed[found]]
            exact = self._scores(cand, query)
            if k >= self._n or (cand.size >= limit
                                and float(approx[-1]) + bound < float(np.partition(exact, -limit)[-limit])):
                return self._top(cand, exact, limit)
            k = min(self._n, k * 4)

    def search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                    weights: tuple[float, float] = (1.0, 0.0)) -> list[ScoredId]:
        """Each term's postings are scored and summed per row by :func:`np.bincount` (a row's terms in term order,
        in float64: the sums a dense array added into term by term gave, without its scattered read-add-write of
        every posting: 460k postings at 1M, 16.4 -> 8.9 ms a search), then only the best rows are filtered
        (:meth:`_top_scored`, or :meth:`_top_passing` for fewer postings).
        At 1M rows a query's terms have 55k postings at p50 and 210k at p95:
        finding the distinct rows by sorting them (``np.unique``) and filtering every one of them was half of a
        search's time. The rows and scores of the last search are kept until the index changes: a recall with a
        time range searches its first query's terms again with the range as the filter."""
        w_own, w_ctx = float(weights[0]), max(float(weights[1]), 0.0)
        docs = len(self)
        owner = self._codes.get("o:" + flt.owner)
        if limit <= 0 or docs == 0 or owner is None:
            return []
        avgdl = (w_own * self._sum_own + w_ctx * self._sum_ctx) / docs
        if avgdl <= 0:
            return []
        key = (frozenset(tokens), w_own, w_ctx, self._changes)
        timed = flt.start is not None or flt.end is not None
        last = self._last_bm25
        if last is not None and last[0] == key:  # a recall's time search repeats its first query's terms
            cand, sums, every_row = last[1], last[2], last[3]
        else:
            kept = None if timed else self._repeated.get(key, self._changes)
            if kept is not None:  # terms asked before, no time range: their sums as that search had them
                if kept[0] is None:
                    return self._top_scored(kept[1], limit, flt)
                return self._top_passing(kept[0], kept[1], limit, flt)
            found = self._bm25_scores(tokens, w_own, w_ctx, avgdl)
            if found is None:
                return []
            cand, sums, every_row = found
            self._last_bm25 = (key, cand, sums, every_row)
        if not every_row:  # few postings, summed without every row's score: cut from theirs (a time range first)
            if not timed:
                self._repeated.offer(key, self._changes, cand, sums)
            return self._top_passing(cand, sums, limit, flt)
        if timed:
            rows = self._copy_rows_in_range(flt, len(sums))
            if rows is not None:
                rows = rows[sums[rows] > 0]
                return self._top_passing(rows, sums[rows], limit, flt)
        if len(cand) * _DENSE_SHARE >= len(sums):
            if not timed:
                self._repeated.offer(key, self._changes, None, sums)
            return self._top_scored(sums, limit, flt)
        scores = sums[cand]
        if not timed:
            self._repeated.offer(key, self._changes, cand, scores)
        return self._top_passing(cand, scores, limit, flt)

    def _copy_rows_in_range(self, flt: SearchFilter, rows: int) -> npt.NDArray[np.int64] | None:
        """Every slot below ``rows`` that may be inside ``flt``'s time range, from the time-ordered copy (every slot
        below its rows that is in a range is in it; the slots put after it are all given): a month of 1M rows is
        ~40k slots, against a filter of every posting's row or passes over every row. ``None`` without a copy, or
        for a range that holds half the rows or more."""
        copy = self._time
        if copy is None:
            return None
        a, b = copy.span(None if flt.start is None else to_micros(flt.start),
                         None if flt.end is None else to_micros(flt.end))
        if (b - a + rows - copy.rows) * 2 >= rows:
            return None
        return np.concatenate([copy.order[a:b], np.arange(copy.rows, rows)])

    def _bm25_scores(self, tokens: Sequence[str], w_own: float, w_ctx: float,
                     avgdl: float) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64], bool] | None:
        """The rows having a term of ``tokens`` (a row of several terms comes several times), and every row's score
        (0 for a row without one: a term's contribution is positive; ``True``) or, for fewer postings than a
        sixteenth of the rows, each posting's row's score (:func:`_sum_few`; ``False``); ``None`` if no row has
        one."""
        docs = len(self)
        norms = self._length_norms(w_own, w_ctx, avgdl)
        every_posting = self._dead == 0 and w_own > 0 and w_ctx > 0  # no deleted row, no field left out
        touched: list[npt.NDArray[np.int32]] = []
        impacts: list[npt.NDArray[np.float32]] = []
        for term in set(tokens):
            p = self._postings.get(term)
            if p is None:
                continue
            kept = self._impacts.get(term, w_own, w_ctx, self._changes)
            if kept is not None:
                slots, impact = kept
            else:
                slots = p[0]
                tf = bm25.weighted_frequencies(p[1], p[2], w_own, w_ctx)
                if not every_posting:
                    use = self._alive[slots] & (tf > 0)
                    slots, tf = slots[use], tf[use]
                if len(slots) == 0:
                    continue
                impact = bm25.impacts(bm25.idf(docs, len(slots)), tf, norms.take(slots))
                self._impacts.put(term, w_own, w_ctx, self._changes, slots, impact)
            touched.append(slots)
            impacts.append(impact)
        if not touched:
            return None
        # a row of several terms comes several times, with one score; cast while copied, to the types bincount
        # reads (it would convert each again: 0.5 ms of 4 at 460k postings)
        cand = np.concatenate(touched, dtype=np.intp)
        # a term's slots are distinct: each row's score is its terms' scores added in term order, in float64; the
        # scores go into this thread's buffer (they do not outlive the call), not new pages at every search
        weights = np.concatenate(impacts, out=_weights_buffer(len(cand)))
        if len(cand) * _FEW_SHARE < self._n and len(cand) * _DENSE_SHARE < self._n:
            return cand, _sum_few(cand, weights, self._n), False
        return cand, np.asarray(np.bincount(cand, weights=weights, minlength=self._n), dtype=np.float64), True

    def _length_norms(self, w_own: float, w_ctx: float, avgdl: float) -> npt.NDArray[np.float32]:
        """:func:`bm25.length_norm` of every row for these field weights, computed again after a change (at 1M
        rows ~3 ms, against two scattered length lookups per posting in every search)."""
        key = (w_own, w_ctx, self._changes)
        if self._norms is None or self._norms[0] != key:
            dl = w_own * self._len_own[: self._n] + w_ctx * self._len_ctx[: self._n]
            self._norms = (key, bm25.length_norm(dl, avgdl))
        return self._norms[1]

    def _top_scored(self, sums: npt.NDArray[np.float64], limit: int, flt: SearchFilter) -> list[ScoredId]:
        """:meth:`_top` of the rows that pass ``flt`` from every row's score (``sums``, 0: no term), without reading
        the score of every row that has one: at 1M rows a long query's 460k postings are 300k rows, and gathering
        each posting's score from the 8 MB of sums (a cache miss each, 5.2 ms) then partitioning them (1.7 ms) was
        half of a search's 12.9 ms (load ~10).
        The best score of each group of ``_BLOCK_ROWS`` rows (one contiguous pass) gives ``tau``, a score at least
        ``m`` rows reach; the rows at ``tau`` or above are filtered, and if ``limit`` of them pass, no row below can
        enter the answer (ties with the last one score the same, so they are among them). Else ``m`` grows as in
        :meth:`_top_passing`. A time range is applied to every row first (contiguous column passes), then the few
        rows left go through :meth:`_top_passing` (:meth:`search_bm25` takes a small range's rows from the
        time-ordered copy instead, when the index has one)."""
        if flt.start is not None or flt.end is not None:
            rows = np.flatnonzero((sums > 0) & self._in_time(slice(0, len(sums)), flt))
            return self._top_passing(rows, sums[rows], limit, flt)
        whole = len(sums) - len(sums) % _BLOCK_ROWS
        # group j: the rows j, j + g, j + 2g, ... (g = whole / 64): any 64 distinct rows a group will do, and the
        # maximum of 64 contiguous rows of g is one vectorised pass (a maximum over each run of 64 took 4x longer)
        g = whole // _BLOCK_ROWS
        blocks = sums[:whole].reshape(_BLOCK_ROWS, g).max(axis=0)
        if whole < len(sums):
            blocks = np.append(blocks, sums[whole:].max())  # group g: the last rows
        m = 4 * limit
        while True:
            tau = float(np.partition(blocks, len(blocks) - m)[len(blocks) - m]) if m < len(blocks) else 0.0
            hit = np.flatnonzero(blocks >= tau) if tau > 0 else None
            if hit is not None and len(hit) * _BLOCK_ROWS * _GROUP_SHARE <= len(sums):
                # the rows at tau or above are in the groups whose best reaches it: their 64 rows each, not a pass
                # over every row (~0.6 ms at 1M)
                rows = (hit[hit < g, None] + g * np.arange(_BLOCK_ROWS)).ravel()
                if len(hit) and hit[-1] == g:
                    rows = np.concatenate([rows, np.arange(whole, len(sums))])
                rows = rows[sums[rows] >= tau]
            else:
                rows = np.flatnonzero(sums >= tau) if tau > 0 else np.flatnonzero(sums > 0)
            keep = self._passing(rows, flt)
            passed = int(np.count_nonzero(keep))
            if passed >= limit or tau <= 0:
                return self._top(rows[keep], sums[rows[keep]], limit)
            m = len(blocks) if passed == 0 else max(4 * m, 2 * m * limit // passed)

    def _top_passing(self, slots: npt.NDArray[np.integer], scores: npt.NDArray[np.float64], limit: int,
                     flt: SearchFilter) -> list[ScoredId]:
        """:meth:`_top` of the rows that pass ``flt``, filtering the best rows first: the rows scoring at least
        the ``m``-th best score hold every row above it, so if ``limit`` of them pass, no row below can enter
        the answer (ties with the last one included: they score the same, so they are among them). Else ``m``
        grows to what the share that passed suggests, at least fourfold; if none passed, to every row (a filter
        that matches nothing costs one filtering of every row, as before). ``slots`` may repeat a row (with
        the same score). A time range is applied to every row first (one column read): it usually leaves a few
        per cent of them, where the best rows' share that passes would grow the cut round after round (at 1M rows
        ~22 ms for a recall's search inside a month, against ~1 ms)."""
        if flt.start is not None or flt.end is not None:
            inside = self._in_time(slots, flt)
            slots, scores = slots[inside], scores[inside]
        m = 4 * limit
        while True:
            if m < len(slots):
                kth = np.partition(scores, len(slots) - m)[len(slots) - m]
                best = np.flatnonzero(scores >= kth)
            else:
                best = np.arange(len(slots))
            rows, first = np.unique(slots[best], return_index=True)
            rows = rows.astype(np.int64)
            keep = self._passing(rows, flt)
            passed = int(np.count_nonzero(keep))
            if passed >= limit or len(best) == len(slots):
                return self._top(rows[keep], scores[best[first]][keep], limit)
            m = len(slots) if passed == 0 else max(4 * m, 2 * m * limit // passed)

    def _vectors(self, slots: npt.NDArray[np.integer]) -> npt.NDArray[np.float32]:
        return _take(self._matrix, self._file, slots)

    def _scores(self, slots: npt.NDArray[np.integer], query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``query``'s inner product with the rows ``slots``, read 8,192 at a time (a time filter at 1M rows
        leaves tens of thousands of rows to score: 80 MB at once)."""
        if len(slots) <= _SCORE_BLOCK:
            scores: npt.NDArray[np.float32] = self._vectors(slots) @ query
            return scores
        return np.concatenate([self._vectors(slots[i : i + _SCORE_BLOCK]) @ query
                               for i in range(0, len(slots), _SCORE_BLOCK)])

    def _vector_range(self, start: int, stop: int) -> npt.NDArray[np.float32]:
        if self._file is None or start >= self._file.rows:
            return self._matrix[start:stop]
        return self._vectors(np.arange(start, stop))

    def _allowed(self, flt: SearchFilter) -> tuple[npt.NDArray[np.bool_], int] | None:
        """Which rows pass ``flt`` (its owner included), as one read-only mask over every row, and how many pass;
        ``None`` for an unknown owner. Computed on whole columns, not gathered by slot (gathering the filter
        columns for every slot and scattering them back cost ~8 ms of each vector search at 1M rows), and kept
        until the index changes: the five column passes over 1M rows were ~2 ms of every vector search, for the
        same mask each time. The kept mask leaves out the expiry test and remembers the soonest expiry of the rows
        it passes: while ``flt.now`` is before it, no passing row has expired, so the mask is the answer as is."""
        kept = self._kept(flt)
        if kept is None:
            return None
        if flt.include_expired or flt.now is None or to_micros(flt.now) < kept.soonest:
            return kept.mask, kept.passing
        allowed: npt.NDArray[np.bool_] = kept.mask & (self._expires[: self._n] > to_micros(flt.now))
        return allowed, int(np.count_nonzero(allowed))

    def _kept(self, flt: SearchFilter) -> _KeptMask | None:
        """The kept mask of :meth:`_allowed` (``flt`` without its expiry test), made if the index or the filter
        changed since; ``None`` for an unknown owner."""
        owner = self._codes.get("o:" + flt.owner)
        if owner is None:
            return None
        unexpiring = replace(flt, include_expired=True, now=None)  # the filter without its expiry test
        masks = self._kept_masks
        if masks and next(iter(masks))[0] != self._changes:
            masks.clear()  # the index changed: every mask is stale
        key = (self._changes, unexpiring)
        kept = masks.get(key)
        if kept is None:
            every = slice(0, self._n)
            mask = self._mask(every, unexpiring) & (self._owner[every] == owner)
            soonest = int(np.min(np.where(mask, self._expires[every], NEVER), initial=NEVER))
            mask.flags.writeable = False
            kept = _KeptMask(key, mask, int(np.count_nonzero(mask)), soonest)
            if len(masks) >= _KEPT_MASKS:
                del masks[next(iter(masks))]  # the oldest made
            masks[key] = kept
        return kept

    def _passing(self, rows: npt.NDArray[np.integer], flt: SearchFilter) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` pass ``flt``, its owner included, its time range not (the caller applied it): one
        gather from the kept mask of every row for the filter without its range (:meth:`_kept`; the recall's vector
        search uses the same), against the filter columns' seven gathers and compares (~0.1 ms a recall at 10k)."""
        kept = self._kept(replace(flt, start=None, end=None) if flt.start is not None or flt.end is not None
                          else flt)
        if kept is None:
            return np.zeros(len(rows), dtype=bool)
        keep: npt.NDArray[np.bool_] = kept.mask[rows]
        if not flt.include_expired and flt.now is not None and to_micros(flt.now) >= kept.soonest:
            keep &= self._expires[rows] > to_micros(flt.now)
        return keep

    def _top(self, slots: npt.NDArray[np.integer], scores: npt.NDArray[np.floating], limit: int) -> list[ScoredId]:
        if slots.size == 0:
            return []
        k = min(limit, slots.size)
        if k < slots.size:
            # every row tied with the k-th best score stays in the running, so that ties are broken by
            # insertion order (as PostgreSQL does), not by where argpartition happened to cut
            kth = np.partition(scores, slots.size - k)[slots.size - k]
            top = np.flatnonzero(scores >= kth)
        else:
            top = np.arange(slots.size)
        order = top[np.lexsort((slots[top], -scores[top]))][:k]
        # Python ints and floats in one pass each (the same values as int() and float() of each element)
        return [ScoredId(self._ids[slot], score)
                for slot, score in zip(slots[order].tolist(), scores[order].tolist(), strict=True)]

    def _mask(self, slots: npt.NDArray[np.int64] | slice, flt: SearchFilter) -> npt.NDArray[np.bool_]:
        mask = self._alive[slots].copy()
        if flt.session_id is not None:
            mask &= self._session[slots] == self._codes.get("s:" + flt.session_id, -1)
        if flt.kinds:
            mask &= np.isin(self._kind[slots], [_KINDS[k] for k in flt.kinds])
        mask &= self._sens[slots] <= int(flt.max_sensitivity)
        if not flt.include_archived:
            mask &= ~self._archived[slots]
        if not flt.include_expired and flt.now is not None:
            mask &= self._expires[slots] > to_micros(flt.now)
        if flt.start is not None or flt.end is not None:
            mask &= self._in_time(slots, flt)
        return mask

    def _in_time(self, slots: npt.NDArray[np.integer] | slice, flt: SearchFilter) -> npt.NDArray[np.bool_]:
        """Which of ``slots`` occurred within ``flt``'s time range (a row without a time: none)."""
        occurred = self._occurred[slots]
        inside: npt.NDArray[np.bool_] = occurred != NO_TIME  # below every start too
        if flt.start is not None:
            inside &= occurred >= to_micros(flt.start)
        if flt.end is not None:
            inside &= occurred <= to_micros(flt.end)
        return inside


_scratch = threading.local()


def _weights_buffer(n: int) -> npt.NDArray[np.float64]:
    """``n`` float64 of this thread's buffer for a BM25 search's posting scores, grown by a quarter beyond the
    largest asked (460k postings at 1M rows: 4.6 MB a searching thread, kept for the thread's life)."""
    buf: npt.NDArray[np.float64] | None = getattr(_scratch, "weights", None)
    if buf is None or len(buf) < n:
        buf = _scratch.weights = np.empty(max(n, 1 << 16) * 5 // 4, dtype=np.float64)
    return buf[:n]


def _sum_few(cand: npt.NDArray[np.intp], weights: npt.NDArray[np.float64], rows: int) -> npt.NDArray[np.float64]:
    """Each posting's row's score, summed as :func:`np.bincount` sums them (a row's postings added in their order to
    0.0, in float64: the same bits) in this thread's buffer of every row's score, which is all zero again after."""
    acc: npt.NDArray[np.float64] | None = getattr(_scratch, "sums", None)
    if acc is None or len(acc) < rows:
        acc = _scratch.sums = np.zeros(rows * 5 // 4 + 1024, dtype=np.float64)
    try:
        np.add.at(acc, cand, weights)
        scores: npt.NDArray[np.float64] = acc[cand]
    finally:
        acc[cand] = 0.0  # whatever happened: a later search starts from zeros
    return scores


def _take(matrix: npt.NDArray[np.float32], file: VectorFile | None,
          slots: npt.NDArray[np.integer]) -> npt.NDArray[np.float32]:
    """Rows ``slots`` of ``matrix``, those below ``file.rows`` read from ``file`` (the same values)."""
    if file is None:
        rows: npt.NDArray[np.float32] = matrix[slots]
        return rows
    in_file = slots < file.rows
    if in_file.all():
        return file.take(slots)
    out = np.empty((len(slots), matrix.shape[1]), dtype=np.float32)
    out[in_file] = file.take(slots[in_file])
    out[~in_file] = matrix[slots[~in_file]]
    return out
