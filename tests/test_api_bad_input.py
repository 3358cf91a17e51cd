"""Every bad argument to the public Python API is an ``InputError`` that says what is wrong, and nothing is written
(issue 19, defect 4): on SQLite and PostgreSQL, through :class:`memroute.Client`, and over HTTP by the same rules
(:mod:`memroute.validate`).

Before, a lone surrogate escaped as ``UnicodeEncodeError``, ``sensitivity=99`` as ``ValueError``, a set in metadata
or ``limit="5"`` as ``TypeError``; NUL in a session was stored, and NaN in metadata was stored as JSON ``NaN``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from memroute import Client, Memory
from memroute.embed import CachedEmbedder
from memroute.errors import InputError
from memroute.retrieval import RecallOptions
from memroute.validate import MAX_METADATA_BYTES, MAX_METADATA_DEPTH
from tests.service_server import KEYS, Live, auth, live_service, settings_for


class Opaque:
    """Any Python object that is not JSON."""


def nested(levels: int) -> dict[str, Any]:
    """Objects nested ``levels`` deep."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


Api = Any
"""A Memory or a Client: the same method names."""

BAD_CALLS: dict[str, Callable[[Api], object]] = {
    # lone surrogates anywhere a string goes
    "surrogate in text": lambda m: m.remember("a \ud800 b"),
    "surrogate in session": lambda m: m.remember("x", session="s\udfff"),
    "surrogate in owner": lambda m: m.remember("x", owner="o\ud800"),
    "surrogate in metadata value": lambda m: m.remember("x", metadata={"k": ["\ud800"]}),
    "surrogate in metadata key": lambda m: m.remember("x", metadata={"\ud800": 1}),
    "surrogate in reply": lambda m: m.remember("x", kind="episode", reply="\ud800"),
    "surrogate in context": lambda m: m.remember("x", context="\ud800"),
    "surrogate in a search": lambda m: m.search("budget \ud800"),
    "surrogate in a recall": lambda m: m.recall("budget \ud800"),
    "surrogate in a message's session": lambda m: m.add_message("s\ud800", "user", "hi"),
    "surrogate in a message": lambda m: m.add_message("s", "user", "hi \ud800"),
    # NUL in names and metadata (PostgreSQL's text and jsonb cannot hold one)
    "NUL in session": lambda m: m.remember("x", session="a\x00b"),
    "NUL in owner": lambda m: m.remember("x", owner="a\x00b"),
    "NUL in id": lambda m: m.remember("x", id="a\x00b"),
    "NUL in metadata key": lambda m: m.remember("x", metadata={"a\x00": 1}),
    "NUL in metadata value": lambda m: m.remember("x", metadata={"a": "b\x00"}),
    "NUL in a message's session": lambda m: m.add_message("a\x00b", "user", "hi"),
    # numbers and enumerations out of range or of the wrong type
    "sensitivity 99": lambda m: m.remember("x", sensitivity=99),
    "sensitivity -1": lambda m: m.remember("x", sensitivity=-1),
    "sensitivity 'top'": lambda m: m.remember("x", sensitivity="top"),
    "max_sensitivity 99": lambda m: m.search("budget", max_sensitivity=99),
    "limit '5'": lambda m: m.search("budget", limit="5"),
    "limit 2.5": lambda m: m.search("budget", limit=2.5),
    "limit 0": lambda m: m.search("budget", limit=0),
    "limit 10**9": lambda m: m.search("budget", limit=10**9),
    "list limit -1": lambda m: m.list(limit=-1),
    "list offset -1": lambda m: m.list(offset=-1),
    "recent_messages limit 'all'": lambda m: m.recent_messages("s", limit="all"),
    # times of the wrong type or outside the accepted range
    "occurred_at int": lambda m: m.remember("x", occurred_at=12345),
    "occurred_at float": lambda m: m.remember("x", occurred_at=1.5),
    "occurred_at junk": lambda m: m.remember("x", occurred_at="next tuesday-ish"),
    "occurred_at at the calendar's end": lambda m: m.remember("x", occurred_at="9999-12-31T23:59:59-14:00"),
    "recall now 10**20": lambda m: m.recall("budget", now=10**20),
    "recall now at the calendar's start": lambda m: m.recall("budget", now="0001-01-01T00:00:00Z"),
    "message at the calendar's end": lambda m: m.add_message("s", "user", "hi", at="9999-12-31T23:59:59-14:00"),
    "search start after end": lambda m: m.search("budget", start="2025-02-01T00:00:00Z", end="2025-01-01T00:00:00Z"),
    # metadata that is not JSON
    "metadata with a set": lambda m: m.remember("x", metadata={"a": {1, 2}}),
    "metadata with an object": lambda m: m.remember("x", metadata={"a": Opaque()}),
    "metadata with NaN": lambda m: m.remember("x", metadata={"a": math.nan}),
    "metadata with Infinity": lambda m: m.remember("x", metadata={"a": [-math.inf]}),
    "metadata too deep": lambda m: m.remember("x", metadata=nested(MAX_METADATA_DEPTH + 1)),
    "metadata too big": lambda m: m.remember("x", metadata={"a": "x" * MAX_METADATA_BYTES}),
    "metadata not a mapping": lambda m: m.remember("x", metadata=[1, 2]),
    # other wrong types
    "text not a string": lambda m: m.remember(42),
    "search text not a string": lambda m: m.search(42),
    "id not a string": lambda m: m.get(42),
    "forget an int": lambda m: m.forget(42),
    "role not a string": lambda m: m.add_message("s", 42, "hi"),
    "an item that is not a mapping": lambda m: m.remember_many([{"text": "fine"}, 42]),
    "items that are not a list": lambda m: m.remember_many(42),
}
LIBRARY_ONLY: dict[str, Callable[[Api], object]] = {
    # the HTTP API has no such argument, or JSON has no such value
    "batch_size '5'": lambda m: m.remember_many([{"text": "x"}], batch_size="5"),
    "options not RecallOptions": lambda m: m.recall("budget", options={"limit": 5}),
    "RecallOptions.limit 'five'": lambda m: m.recall("budget", options=RecallOptions(limit="five")),  # type: ignore
    "RecallOptions.vector_weight NaN": lambda m: m.recall("budget", options=RecallOptions(vector_weight=math.nan)),
    "a recent message with a surrogate": lambda m: m.recall("budget", recent_messages=[{"role": "user",
                                                                                       "text": "\ud800"}]),
    "kinds with an int": lambda m: m.search("budget", kinds=[3]),
}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def memory_any(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
               embedder: CachedEmbedder) -> Iterator[Memory]:
    if request.param == "postgres":
        url = request.getfixturevalue("pg_server").new_database()
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('bad-input') / 'm.db'}"
    with Memory.open(url, owner="alice", embedder=embedder) as mem:
        mem.remember("the quarterly budget review is on friday", id="budget")
        mem.add_message("s", "user", "hello")
        yield mem


def _contents(mem: Memory) -> tuple[object, ...]:
    stats = mem.stats()
    return stats.memories, stats.messages, stats.owners, stats.sessions, mem.get("budget")


@pytest.mark.parametrize("case", sorted(BAD_CALLS.keys() | LIBRARY_ONLY.keys()))
def test_a_bad_argument_is_an_input_error_and_writes_nothing(memory_any: Memory, case: str) -> None:
    before = _contents(memory_any)
    with pytest.raises(InputError) as caught:
        {**BAD_CALLS, **LIBRARY_ONLY}[case](memory_any)
    assert str(caught.value) and "Traceback" not in str(caught.value)
    assert _contents(memory_any) == before


def test_an_update_with_a_bad_value_changes_nothing(memory_any: Memory) -> None:
    before = memory_any.get("budget")
    for change in ({"archived": "no"}, {"metadata": {"a": math.nan}}, {"sensitivity": 7}, {"session": "\x00"}):
        with pytest.raises(InputError):
            memory_any.update("budget", **change)
    assert memory_any.get("budget") == before


def test_values_at_the_limits_are_accepted_and_read_back(memory_any: Memory) -> None:
    meta = {"deep": nested(MAX_METADATA_DEPTH - 1),  # the metadata object is a level too
            "tuple": (1, 2.5, None, True), "big": 2**63 - 1,
            "unicode": "プロジェクト 🎉 \u200f"}
    item = memory_any.remember("limits note", id="limits", session="s" * 256, sensitivity="secret",
                               metadata=meta)
    got = memory_any.get("limits")
    assert got.metadata == {**meta, "tuple": [1, 2.5, None, True]} == item.metadata
    assert got.session_id == "s" * 256 and int(got.sensitivity) == 2
    memory_any.forget("limits")


# ------------------------------------------------------------------------------------ over HTTP
@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder) -> Iterator[Live]:
    with live_service(settings_for(tmp_path_factory.mktemp("bad-input-http")), embedder) as running:
        running.memory.remember("the quarterly budget review is on friday", id="budget", owner="alice")
        running.memory.add_message("s", "user", "hello", owner="alice")
        yield running


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_the_client_raises_the_same_input_errors(live: Live, case: str) -> None:
    before = _contents(live.memory)
    with Client(live.url, api_key=KEYS["alice"], owner="alice") as client, pytest.raises(InputError):
        BAD_CALLS[case](client)
    assert _contents(live.memory) == before


@pytest.mark.parametrize("body", [
    b'{"text": "x", "metadata": {"a": NaN}}',
    b'{"text": "x", "metadata": {"a": [1, -Infinity]}}',
    b'{"text": "x", "metadata": {"a": "b\\u0000"}}',
    b'{"text": "x", "metadata": {"a\\u0000": 1}}',
    b'{"text": "x", "metadata": ' + b'{"a": ' * 40 + b"1" + b"}" * 40 + b"}",
    b'{"text": "x", "session": "a\\u0000b"}',
    b'{"text": "x", "occurred_at": "0001-01-01T00:00:00+14:00"}',
])
def test_over_http_the_same_rules_are_a_400(live: Live, body: bytes) -> None:
    before = _contents(live.memory)
    r = httpx.post(f"{live.url}/v1/memories", content=body, headers={**auth("alice"),
                                                                    "content-type": "application/json"})
    assert r.status_code in (400, 422), r.text
    assert r.json()["type"] in ("InputError", "ValidationError") and r.json()["message"]
    assert _contents(live.memory) == before


def test_over_http_times_at_the_calendar_edges_and_reversed_ranges_are_4xx(live: Live) -> None:
    """A time outside the stated years fails the schema's pattern (422); a reversed range is a 400."""
    def refused(r: httpx.Response, status: int, kind: str) -> None:
        assert r.status_code == status and r.json()["type"] == kind, r.text

    with httpx.Client(base_url=live.url, headers=auth("alice")) as http:
        for path, extra in (("/v1/memories", {}), ("/v1/search", {"q": "budget"})):
            refused(http.get(path, params={"start": "2025-02-01T00:00:00Z", "end": "2025-01-01T00:00:00Z", **extra}),
                    400, "InputError")
            refused(http.get(path, params={"end": "9999-12-31T23:59:59-14:00", **extra}), 422, "ValidationError")
        refused(http.post("/v1/sessions/s/messages", json={"role": "user", "text": "x",
                                                            "at": "0001-01-01T00:00:00+14:00"}), 422, "ValidationError")
        refused(http.post("/v1/recall", json={"text": "budget", "now": "0001-01-01T00:00:00Z"}), 422,
                "ValidationError")


def test_accepted_metadata_comes_back_as_sent_over_http(live: Live) -> None:
    meta = {"n": 1.5, "big": -(2**63), "list": [None, True, "é"], "nested": nested(5)}
    with Client(live.url, api_key=KEYS["alice"], owner="alice") as client:
        item = client.remember("metadata round trip", id="meta-rt", metadata=meta)
        assert item.metadata == meta == client.get("meta-rt").metadata
        client.forget("meta-rt")
