"""Properties of the public Python API over arbitrary strings, numbers and dates (issue 19):

- only :class:`~memroute.errors.MemrouteError` subclasses come out of a call;
- a call that fails writes nothing;
- whatever is accepted reads back as it was returned, and is found by a search for its own text.

Bounded (a few hundred examples in all, one SQLite store) so the file runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memroute import Memory
from memroute.embed import CachedEmbedder
from memroute.errors import MemrouteError
from memroute.stores.base import StoreStats
from memroute.times import EARLIEST, LATEST
from memroute.types import MemoryItem

# every code point, with lone surrogates and NUL drawn often
any_char = st.characters(blacklist_categories=()) | st.sampled_from(["\ud800", "\udfff", "\x00"])
# a string a caller would mean, with a lone surrogate or a NUL somewhere in it, or any string at all
hostile_text = st.builds("{}{}{}".format, st.text(max_size=10), st.sampled_from(["\ud800", "\udfff", "\x00"]),
                         st.text(max_size=10))
any_text = hostile_text | st.text(any_char, max_size=40)
zones = st.builds(timezone, st.timedeltas(min_value=-timedelta(hours=23, minutes=59),
                                          max_value=timedelta(hours=23, minutes=59)))
any_time = st.one_of(st.datetimes(), st.datetimes(timezones=zones),
                     st.datetimes(timezones=zones).map(datetime.isoformat), any_text)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), any_text, st.binary(max_size=8),
                    st.just(object()), st.sets(st.integers(), max_size=2))
json_like = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner) |
                         st.dictionaries(any_text | st.integers(), inner, max_size=3), max_leaves=12)
any_value = st.one_of(scalars, json_like, any_time)
# values a caller would mean to pass, so that accepted calls are common too
plain_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)
plain_json = st.dictionaries(plain_text, st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) |
                             st.floats(allow_nan=False, allow_infinity=False) | plain_text, max_size=3)

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                           HealthCheck.too_slow])
_owners = itertools.count()


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Memory]:
    with Memory.open(f"sqlite:///{tmp_path_factory.mktemp('props') / 'p.db'}", owner="base",
                     embedder=embedder) as m:
        m.remember("a memory that is always there", id="anchor")
        m.add_message("s", "user", "hello")
        yield m


def fresh_owner() -> str:
    return f"owner-{next(_owners)}"


def state(mem: Memory) -> StoreStats:
    return mem.stats()


def check_found(mem: Memory, item: MemoryItem) -> None:
    """Read back as returned, listed, and found by a search for its own text (the owner's only memory)."""
    assert mem.get(item.id, owner=item.owner) == item
    assert [m.id for m in mem.list(owner=item.owner, include_expired=True, max_sensitivity="secret")] == [item.id]
    hits = mem.search(item.text, owner=item.owner, max_sensitivity="secret", include_expired=True)
    assert [h.memory.id for h in hits] == [item.id]


def test_remember_accepts_or_refuses_cleanly(mem: Memory) -> None:
    accepted: list[MemoryItem] = []

    @PROPERTY
    @given(fields=st.fixed_dictionaries({
        "text": plain_text, "session": st.none() | plain_text, "metadata": st.none() | plain_json,
        "sensitivity": st.sampled_from([0, 1, 2, "public", "secret"]), "occurred_at": st.none() | st.datetimes(),
        "kind": st.sampled_from(["note", "fact", "episode"])}),
        wild=st.lists(st.sampled_from(["text", "session", "metadata", "sensitivity", "occurred_at", "kind"]),
                      max_size=2),
        wild_values=st.lists(st.one_of(any_text, any_value), min_size=2, max_size=2))
    def remember(fields: dict[str, Any], wild: list[str], wild_values: list[Any]) -> None:
        """Arguments a caller would mean, with one or two of them replaced by anything at all."""
        fields.update(zip(wild, wild_values, strict=False))
        text, session, metadata, sensitivity, occurred_at, kind = (fields[k] for k in (
            "text", "session", "metadata", "sensitivity", "occurred_at", "kind"))
        owner, before = fresh_owner(), state(mem)
        try:
            item = mem.remember(text, owner=owner, session=session, metadata=metadata, sensitivity=sensitivity,
                                occurred_at=occurred_at, kind=kind)
        except MemrouteError:
            assert state(mem) == before
            return
        check_found(mem, item)
        if occurred_at is not None:
            assert item.occurred_at is not None and EARLIEST <= item.occurred_at <= LATEST
        assert item.metadata == item.metadata  # no NaN came in (NaN != NaN)
        accepted.append(item)
        mem.forget(item.id, owner=owner)
        assert state(mem).memories == before.memories

    remember()
    assert accepted  # the property "accepted -> read back and found" was exercised


@PROPERTY
@given(owner=any_text, session=any_text, role=st.one_of(any_text, any_value), text=st.one_of(any_text, any_value),
       at=st.one_of(st.none(), any_time, any_value))
def test_add_message_accepts_or_refuses_cleanly(mem: Memory, owner: str, session: str, role: Any, text: Any,
                                                at: Any) -> None:
    before = state(mem)
    try:
        msg = mem.add_message(session, role, text, owner=owner, at=at)
    except MemrouteError:
        assert state(mem) == before
        return
    assert replace(mem.recent_messages(session, owner=owner, limit=1)[-1], id=None) == msg


@PROPERTY
@given(query=st.one_of(any_text, any_value), limit=st.one_of(st.integers(), any_value),
       start=st.one_of(st.none(), any_time, any_value), end=st.one_of(st.none(), any_time, any_value),
       max_sensitivity=st.one_of(st.just("public"), any_value), session=st.one_of(st.none(), any_value),
       mode=st.sampled_from(["hybrid", "bm25", "vector"]) | any_text)
def test_reads_answer_or_refuse_cleanly_and_write_nothing(mem: Memory, query: Any, limit: Any, start: Any, end: Any,
                                                          max_sensitivity: Any, session: Any, mode: Any) -> None:
    before = state(mem)
    filters = dict(start=start, end=end, max_sensitivity=max_sensitivity, session=session)
    for call in (lambda: mem.search(query, mode=mode, limit=limit, **filters),
                 lambda: mem.list(limit=limit, **filters),
                 lambda: mem.recall(query, now=start, session=session),
                 lambda: mem.recent_messages(session, limit=limit)):
        with contextlib.suppress(MemrouteError):
            call()
    assert state(mem) == before


@PROPERTY
@given(when=st.one_of(st.datetimes(), st.datetimes(timezones=zones)))
def test_an_accepted_time_reads_back_exactly_and_filters_by_it(mem: Memory, when: datetime) -> None:
    owner = fresh_owner()
    try:
        item = mem.remember("a dated note", owner=owner, occurred_at=when)
    except MemrouteError:  # refused only outside the stated range
        try:
            utc = (when.replace(tzinfo=UTC) if when.tzinfo is None else when).astimezone(UTC)
        except OverflowError:  # not even a time in UTC
            return
        assert not EARLIEST <= utc <= LATEST
        return
    assert item.occurred_at == (when.replace(tzinfo=UTC) if when.tzinfo is None else when)
    assert mem.get(item.id, owner=owner).occurred_at == item.occurred_at
    assert [m.id for m in mem.list(owner=owner, start=item.occurred_at, end=item.occurred_at)] == [item.id]
    mem.forget(item.id, owner=owner)
