"""PostgreSQL BM25 without summing every posting of a query's terms: impacts, MaxScore in the server.

Since migration 5 every (owner, field, term, memory) has a row in ``memroute_postings`` with an *impact*:
BM25's term-frequency part ``tf (k1 + 1) / (tf + k1 (1 - b + b dl / A))`` (:mod:`memroute.stores.bm25`)
computed with the memory's length and a reference average length ``A`` kept in ``memroute_meta`` under
``bm25_avgdl``. The index ``(owner, field, term, impact DESC, row_id)`` reads a term's memories best first.
IDF is not in the impact: it is multiplied in at query time, so document frequencies may drift without a
rewrite. Triggers on ``memroute_lexical`` keep the postings in step with every write, update and delete.

A search bounds a memory's score by summing, over the lists it is in, the list's factor (IDF, field weight,
drift, slack) times its impact there, and works in the server (MaxScore: Turtle & Flood, "Query evaluation:
strategies and optimizations", 1995). First the rarest lists are read whole and every other list's best
postings (:data:`FIRST_SQL`); the memories with the best partial sums there are scored exactly, with the same
code as before (:func:`memroute.stores.pg_sql.bm25_scores`): the ``limit``-th score is the bar to beat.
Lists whose most add up to no more than the bar cannot lift a memory to it alone: the memories that can still
enter are in the other lists ("essential"), each read only down to the impact that, with the most of every
other list, still reaches the bar. Their bounds are completed with what the left-out lists give them (those
lists scanned against the candidates only), and memories are scored exactly in the order of their bounds
until the bar beats the next bound (:func:`bounds_sql`; the bar rises as memories are scored, and each round
is planned again with it). What is returned is therefore the exact BM25 top ``limit`` over every matching
memory, ties in insertion order, as the SQLite store gives it. (An earlier version read the lists best first
in chunks, the threshold algorithm; it never beat one sum in the server, docs/benchmarks.md.)

The bound holds for any field weights and any drift of the average length (``memroute_meta`` keeps the ``A``
the impacts were computed with):

- the average length ``A'`` of the search differs from ``A``: ``f(tf, dl, A') <= max(1, A' / A) f(tf, dl, A)``
  (the length term of the denominator scales by ``A / A'``);
- two weighted fields (BM25F: frequencies and lengths summed before saturation): the saturation is concave in
  the frequency, so the joint part is at most the sum of each field's part with its own length alone, and a
  field weight ``w`` scales that part by at most ``max(1, w)``.

So drift loosens the bound (more is read) but never breaks it; ``refresh_postings`` recomputes the impacts
with the current average when a bulk load has moved it by more than ``DRIFT`` (:func:`needs_refresh`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memroute.stores import bm25

FIRST = 16
"""Postings read from the top of each list (``limit`` when larger) to find the first memories to score."""
RARE = 4_000
"""The rarest terms' lists are read whole for the first memories to score, up to this many postings in all:
in a long query the best memories hold several rare terms, and scoring them first sets a bar that leaves the
frequent terms' lists out (their postings are most of what a search would read)."""
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

_LEXICAL = "m.id, m.tokens, m.context_tokens, m.len_own, m.len_ctx"
"""The lexical columns a memory is scored from (:func:`memroute.stores.pg_sql.bm25_scores`, with its row id)."""


def first_sql(where: str) -> str:
    """Each list's highest impact, and the lexical rows of the memories to score first (the best partial sums
    over each list's first ``n`` postings) in one statement: rows (list, its highest impact) and (row id, the
    lexical columns, NULL when the memory does not pass the filters). Parameters: (terms, fields, factors, n,
    owner, how many memories, the filter's parameters) ``where`` of ``where_clause``."""
    return ("WITH t AS MATERIALIZED (SELECT l.ord, l.factor, p.impact, p.row_id FROM unnest(%s::text[], %s::int2[], "
            "%s::float8[], %s::int8[]) WITH ORDINALITY AS l(term, field, factor, n, ord) CROSS JOIN LATERAL (SELECT "
            "impact, row_id FROM memroute_postings p WHERE p.owner = %s AND p.field = l.field AND p.term = l.term "
            "ORDER BY p.impact DESC, p.row_id LIMIT l.n) p), "
            "c AS (SELECT row_id FROM t GROUP BY row_id ORDER BY sum(factor * impact) DESC, row_id LIMIT %s) "
            "SELECT ord, max(impact)::float8, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::int, NULL::int "
            f"FROM t GROUP BY ord UNION ALL SELECT NULL, NULL, c.row_id, {_LEXICAL} FROM c "
            f"LEFT JOIN memroute_lexical m ON m.row_id = c.row_id AND {where}")


def bounds_sql(narrow: str | None, where: str) -> str:
    """The memories that can still enter, with their score bounds, best first: one statement in the server.

    The candidates are the memories of the essential lists (each read only down to its cut, an index range)
    whose share there, plus the most the lists left out can add, passes the bar; their bound is then made exact
    with what the left-out lists really give them (those lists are scanned against the candidates, not summed
    for every memory they hold). A list's factor times a memory's impact is that list's share of the bound.
    Parameters: (essential terms, fields, factors, cuts, owner, [the filter's parameters,] the left-out lists'
    most, the bar, left-out terms, fields, factors, owner, the bar, size, the filter's parameters). ``narrow``
    (``where`` of ``where_clause``, when it names a session or a time range) keeps only the memories it lets
    through among the candidates, reading their lexical rows: else most rows would be none of them. Each row
    comes with the memory's lexical columns (NULL when it does not pass the filters ``where``)."""
    lexical = f"JOIN memroute_lexical m ON m.row_id = p.row_id AND {narrow} " if narrow else ""
    return ("WITH e AS MATERIALIZED (SELECT p.row_id, sum(l.factor * p.impact) AS share FROM unnest(%s::text[], "
            "%s::int2[], %s::float8[], %s::float8[]) AS l(term, field, factor, cut) JOIN memroute_postings p ON "
            f"p.owner = %s AND p.field = l.field AND p.term = l.term AND p.impact >= l.cut {lexical}"
            "GROUP BY p.row_id HAVING sum(l.factor * p.impact) + %s > %s), "
            "b AS (SELECT row_id, sum(share) AS bound FROM (SELECT row_id, share FROM e UNION ALL SELECT p.row_id, "
            "l.factor * p.impact FROM unnest(%s::text[], %s::int2[], %s::float8[]) AS l(term, field, factor) "
            "JOIN memroute_postings p ON p.owner = %s AND p.field = l.field AND p.term = l.term "
            "WHERE p.row_id IN (SELECT row_id FROM e)) s "
            "GROUP BY row_id HAVING sum(share) > %s ORDER BY bound DESC, row_id LIMIT %s) "
            f"SELECT b.row_id, b.bound, {_LEXICAL} FROM b LEFT JOIN memroute_lexical m ON m.row_id = b.row_id "
            f"AND {where} ORDER BY b.bound DESC, b.row_id")


REFERENCE_SQL = "SELECT value::float8 FROM memroute_meta WHERE key = 'bm25_avgdl'"
SNAPSHOT_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
"""A search's reads see one snapshot: the lists read in several statements are read as of one moment."""


def needs_refresh(avgdl_now: float, reference: float | None) -> bool:
    if reference is None or reference <= 0:
        return True
    return max(avgdl_now / reference, reference / avgdl_now) > DRIFT if avgdl_now > 0 else False


@dataclass
class _List:
    term: str
    field: int
    factor: float
    """What an impact of this list is multiplied by in a bound: IDF, field weight (at least 1), drift, slack."""
    top: float = 0.0
    """The list's highest impact (0: no posting of the owner)."""

    @property
    def most(self) -> float:
        """The most this list adds to any memory's score bound."""
        return self.factor * self.top


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

    def __post_init__(self) -> None:
        docs = self.collection[0]
        drift = max(1.0, self.avgdl / self.reference) if self.reference > 0 else math.inf
        fields = ((0, self.w_own),) + (((1, self.w_ctx),) if self.w_ctx > 0 else ())
        self.lists = [_List(t, f, bm25.idf(docs, self.dfs[t]) * max(1.0, w) * drift * (1 + SLACK))
                      for t in self.terms for f, w in fields if w > 0]

    @property
    def avgdl(self) -> float:
        docs, sum_own, sum_ctx = self.collection
        return (self.w_own * sum_own + self.w_ctx * sum_ctx) / max(docs, 1)

    def first_params(self, owner: str, filter_params: Sequence[Any]) -> list[Any]:
        """The parameters of :func:`first_sql`: the rarest lists whole (``RARE`` postings in all), the first
        ``FIRST`` (or ``limit``) of the others; ``2 limit + FIRST`` memories."""
        first = max(FIRST, self.limit, 1)
        n, budget = {}, RARE
        for k in sorted(range(len(self.lists)), key=lambda k: self.dfs[self.lists[k].term]):
            df = self.dfs[self.lists[k].term]
            n[k] = df if df <= budget else first
            budget -= df if df <= budget else budget  # a list too long for the rest ends the whole reads
        return [[lst.term for lst in self.lists], [lst.field for lst in self.lists],
                [lst.factor for lst in self.lists], [max(n[k], 1) for k in range(len(self.lists))], owner,
                2 * self.limit + FIRST, *filter_params]

    def first(self, rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
        """Take the rows of :func:`first_sql`: each list's highest impact; the lexical rows to score first
        (id, tokens, context tokens, lengths, row id), whose scores are the first bar."""
        lexical: list[Sequence[Any]] = []
        for ord_, top, row_id, *columns in rows:
            if ord_ is not None:
                self.lists[int(ord_) - 1].top = float(top)
            else:
                self.seen.add(int(row_id))
                if columns[0] is not None:
                    lexical.append((*columns, row_id))
        return lexical

    def plan(self) -> tuple[list[_List], list[float], float]:
        """(the essential lists, each one's cut, what the others add at most) for the bar now (MaxScore:
        Turtle & Flood, "Query evaluation: strategies and optimizations", 1995).

        With ``θ`` the score to beat, a memory in no list but those whose shares add up to at most ``θ``
        scores below ``θ`` (every share is raised by the slack): those lists are left out, and the memories
        that can still enter are in the others. A memory in list ``i`` scores less than its share there plus
        the most every other list adds, so only impacts of at least ``(θ - others) / factor`` are read from
        it; a memory below the cut of any of its lists cannot enter, so a bound missing that list's share
        (the memory met through another list) only concerns memories that lose anyway."""
        theta = self.threshold()
        lists = sorted((lst for lst in self.lists if lst.top > 0), key=lambda lst: lst.most)
        total, left_out = sum(lst.most for lst in lists), 0.0
        while lists and theta > 0 and left_out + lists[0].most <= theta:
            left_out += lists.pop(0).most
        cuts = [max(0.0, (theta - (total - lst.most)) / lst.factor) for lst in lists]
        return lists, cuts, left_out

    def bound_params(self, owner: str, narrow_params: Sequence[Any], size: int,
                     filter_params: Sequence[Any]) -> list[Any] | None:
        """The parameters of :func:`bounds_sql` for the bar now, or None when no memory can enter any more."""
        lists, cuts, left_out = self.plan()
        if not lists:
            return None
        out = [lst for lst in self.lists if lst.top > 0 and lst not in lists]
        theta = self.threshold()
        return [[lst.term for lst in lists], [lst.field for lst in lists], [lst.factor for lst in lists], cuts, owner,
                *narrow_params, left_out, theta, [lst.term for lst in out], [lst.field for lst in out],
                [lst.factor for lst in out], owner, theta, size, *filter_params]

    def rescored(self, bounds: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
        """The lexical rows of the memories of a page of :func:`bounds_sql` not scored yet (that pass the
        filters)."""
        lexical: list[Sequence[Any]] = []
        for row_id, _, *columns in bounds:
            if row_id not in self.seen:
                self.seen.add(int(row_id))
                if columns[0] is not None:
                    lexical.append((*columns, row_id))
        return lexical

    def scored(self, hits: Sequence[tuple[float, int, str]]) -> None:
        """Exact (score, row_id, id) of memories met (those passing the filters)."""
        for score, row_id, mid in hits:
            item = (score, -row_id, mid)
            if len(self.best) < self.limit:
                heapq.heappush(self.best, item)
            elif item > self.best[0]:
                heapq.heapreplace(self.best, item)

    def threshold(self) -> float:
        """The score to beat, or 0 while fewer than ``limit`` memories scored."""
        return self.best[0][0] if len(self.best) >= self.limit else 0.0

    def answer(self) -> list[tuple[float, str]]:
        """(score, id) best first, ties in insertion order."""
        return [(score, mid) for score, _, mid in sorted(self.best, reverse=True)]
