"""The OpenAPI contract states what the server enforces, checked by schemathesis against a live `memroute serve`.

Schemathesis generates requests from the published schema, valid and invalid, and runs every check it has
(no 5xx; schema-valid requests accepted and invalid ones refused; every status, header and answer body
documented; ``Allow`` on 405; authentication; stateful links). The patterns the schema states are also
checked against the server's own rules, on arbitrary strings.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memroute.errors import InputError
from memroute.service.auth import OWNER_PATTERN, check_owner
from memroute.service.schemas import NO_NUL, NOT_BLANK, TIME_PATTERN
from tests.service_process import Served, serving

ST = str(Path(sys.executable).parent / "st")
# white space, the characters the owner rule names, NUL, and letters of three scripts
_CHARS = st.sampled_from(list("\t\n\x0b\x0c\r\x1c\x1f \x85\xa0\u1680\u2003\u2028\u3000*,;=\x00aZ9éあ한_-"))
_STRINGS = st.text(_CHARS, max_size=8) | st.text(max_size=8)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("contract")
    with serving(f"sqlite:///{tmp / 'contract.db'}", tmp / "serve.log", demo=True) as served:
        yield served


# The one rule a schema cannot state: ``start`` after ``end`` (two query parameters) is a 400 on the two
# operations that take both; every other answer of theirs is held to the schema as everywhere else.
_CONFIG = """
[[operations]]
include-path-regex = "^/v1/(memories|search)$"
include-method = "GET"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]
"""


@pytest.mark.slow
def test_schemathesis_finds_no_contract_violation(service: Served, tmp_path: Path) -> None:
    """Bounded: 6 examples per operation and phase, deterministic generation, every check."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(_CONFIG)
    run = subprocess.run(
        [ST, "--config-file", str(config), "run", f"{service.url}/openapi.json", "--checks", "all",
         "--max-examples", "6", "--generation-deterministic", "--workers", "2", "--no-color", "--request-timeout", "30",
         "--header", f"Authorization: Bearer {service.key}", "--phases", "coverage,fuzzing,stateful",
         "--report", "junit", "--report-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path)
    summary = "\n".join(line[:400] for line in run.stdout.splitlines()  # each failure: operation, check, answer
                        if re.match(r"\s*(_{3,} |- ST|\[\d{3}\]|`\{|❌|Test cases|\d+ generated)", line))
    assert run.returncode == 0, f"schemathesis found contract violations:\n{summary}\n{run.stderr[-2000:]}"
    tested = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert tested is not None and int(tested[1]) == int(tested[2]) >= 300, summary  # every operation, all passed
    assert "Traceback" not in service.log_text()


def test_a_405_names_every_method_of_the_path(service: Served) -> None:
    for path, methods in (("/v1/memories/x", "DELETE, GET, PATCH"), ("/v1/agents/x", "DELETE, PUT"),
                          ("/v1/sessions/s/messages", "GET, POST"), ("/v1/memories", "GET, POST")):
        r = httpx.request("OPTIONS", f"{service.url}{path}", headers=service.headers)
        assert r.status_code == 405 and r.headers["allow"] == methods, (path, r.headers, r.text)
        assert r.json()["type"] == "MethodNotAllowed" and methods in r.json()["message"]


def test_a_repeated_query_parameter_is_refused(service: Served) -> None:
    for query in ("owner=a&owner=b", "owner=demo&owner=demo", "limit=1&limit=2", "q=x&q=y&owner=demo"):
        r = httpx.get(f"{service.url}/v1/search?{query}", headers=service.headers)
        assert r.status_code == 400 and "more than once" in r.json()["message"], (query, r.text)
    kinds = httpx.get(f"{service.url}/v1/memories?kinds=note&kinds=fact&owner=demo", headers=service.headers)
    assert kinds.status_code == 200  # a list parameter repeats by design


def test_documented_rules_are_enforced_with_their_status(service: Served) -> None:
    http = httpx.Client(base_url=service.url, headers=service.headers, params={"owner": "alice"})
    naive = http.post("/v1/memories", json={"text": "a naive time", "occurred_at": "2026-01-02T03:04:05"})
    assert naive.status_code == 422 and "RFC 3339" in naive.text
    far = http.post("/v1/memories", json={"text": "too far", "occurred_at": "9999-12-31T23:59:59Z"})
    assert far.status_code == 422
    assert http.post("/v1/memories", json={"text": "   "}).status_code == 400  # the library says why
    assert http.post("/v1/memories", json={"text": "x", "session": "a\x00b"}).status_code == 422
    assert http.post("/v1/route", json={"text": "x", "session": "s", "hints": ["h"]}).status_code == 400
    put = http.put("/v1/agents/weather", json={"id": "other", "name": "Weather"})
    assert put.status_code == 409 and put.json()["type"] == "Conflict"
    assert http.get("/v1/memories", params={"owner": "*"}).status_code == 400
    schema = http.get("/openapi.json").json()
    assert "409" in schema["paths"]["/v1/memories"]["post"]["responses"]
    assert {"201", "409"} <= set(schema["paths"]["/v1/agents/{agent_id}"]["put"]["responses"])
    items = [{"text": "kept"}, {"text": "x", "occurred_at": "yesterday"}, {"bogus": 1}, {"text": " "}]
    refused = http.post("/v1/memories/import", json={"items": items})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "items", "1"]
    assert http.get("/v1/memories").json() == []  # nothing refused was stored
    report = http.post("/v1/memories/import", json={"items": items, "skip_invalid": True}).json()
    assert report["stored"] == 1 and [r["index"] for r in report["rejected"]] == [1, 2, 3]
    assert "occurred_at" in report["rejected"][0]["reason"] and "empty" in report["rejected"][2]["reason"]


@settings(max_examples=400, deadline=None)
@given(_STRINGS)
def test_the_owner_pattern_is_the_owner_rule(owner: str) -> None:
    try:
        accepted = check_owner(owner) == owner
    except InputError:
        accepted = False
    assert bool(re.fullmatch(OWNER_PATTERN, owner)) == accepted


@settings(max_examples=400, deadline=None)
@given(_STRINGS)
def test_the_text_patterns_are_the_text_rules(text: str) -> None:
    assert bool(re.fullmatch(NOT_BLANK, text)) == ("\x00" not in text and text.strip() != "")
    assert bool(re.fullmatch(NO_NUL, text)) == ("\x00" not in text)


@settings(max_examples=300, deadline=None)
@given(st.from_regex(TIME_PATTERN, fullmatch=True))
def test_every_time_the_schema_allows_is_in_the_accepted_range(text: str) -> None:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:  # a day the month does not have (2026-02-31): refused as bad input, a 400
        return
    assert value.tzinfo is not None
    assert datetime(1100, 1, 1, tzinfo=UTC) <= value.astimezone(UTC) <= datetime(8899, 12, 31, 23, 59, tzinfo=UTC)


_METADATA_CASES = [{"a": {"b": [1, -2, 1.5, "x", None, True]}}, {"n": 2**63 - 1}, {"n": -(2**63)}, {"n": 5.0},
                   {"a": {"b": [2**64]}}, {"n": 2**63}, {"n": 1e20}, {"a": [{"k": "x\x00"}]}, {"a": {"k\x00": 1}}]


def test_the_schema_states_metadata_rules_at_every_depth(service: Served) -> None:
    """Each metadata value is held to the published ``MetadataValue`` component, and the server agrees with it:
    what the schema allows is stored, what it refuses is a 422 (an integer outside 64 bits nested anywhere,
    ``1e20`` included, which JSON Schema counts as an integer; NUL in a nested string or key)."""
    import jsonschema

    http = httpx.Client(base_url=service.url, headers=service.headers, params={"owner": "meta"})
    document = http.get("/openapi.json").json()
    field = document["components"]["schemas"]["MemoryIn"]["properties"]["metadata"]
    validator = jsonschema.Draft202012Validator({**field, "components": document["components"]})
    outcomes = []
    for metadata in _METADATA_CASES:
        valid = validator.is_valid(metadata)
        status = http.post("/v1/memories", json={"text": "metadata case", "metadata": metadata}).status_code
        outcomes.append((valid, status))
        assert status == (201 if valid else 422), (metadata, valid, status)
    assert [valid for valid, _ in outcomes] == [True] * 4 + [False] * 5  # the cases cover both sides
