"""Keys, owner scoping, limits and bad input, against the real service over real HTTP.

A key for owner A must never read or change owner B's data (by id, search, recall, route context or
messages), and nothing a client sends may produce a 500 or hold a worker.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from memroute import AuthError, ConfigError, Memory, ServiceError
from memroute.cli import main
from memroute.embed import CachedEmbedder
from memroute.service.app import create_app
from memroute.service.auth import KeyRing, key_entry, new_key
from memroute.service.limits import RateLimiter, Runner
from memroute.service.server import HeaderDeadlineH11, HeaderDeadlineHttpTools
from tests.service_server import KEYS, Live, auth, live_service, serving, settings_for

SECRET = "Bob's locker code is 4417 and his zebra nickname is Quokkaroo"


PROTOCOLS = [HeaderDeadlineH11, *([HeaderDeadlineHttpTools] if HeaderDeadlineHttpTools is not None else [])]
"""Every HTTP protocol the service may run: each is served these tests (httptools when installed, else h11)."""


@pytest.fixture(scope="module", params=PROTOCOLS, ids=lambda protocol: protocol.__name__)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
         embedder: CachedEmbedder) -> Iterator[Live]:
    settings = settings_for(tmp_path_factory.mktemp("security"), max_request_bytes=50_000, request_timeout_s=1.0,
                            max_text_chars=5_000)
    with live_service(settings, embedder, protocol=request.param) as running:
        bob = httpx.Client(base_url=running.url, headers=auth("bob"))
        stored = bob.post("/v1/memories", json={"id": "bob-1", "text": SECRET, "session": "shared-name"})
        assert stored.status_code == 201
        for turn in ("Translate 'good morning' to Japanese", "Now to Korean"):
            assert bob.post("/v1/route", json={"text": turn, "session": "shared-name"}).status_code == 200
        bob.close()
        yield running


def _no_secret(response: httpx.Response) -> None:
    assert "4417" not in response.text and "Quokkaroo" not in response.text


ENDPOINTS: list[tuple[str, str, Any]] = [
    ("POST", "/v1/memories", {"text": "x"}), ("POST", "/v1/memories/import", {"items": []}),
    ("GET", "/v1/memories/bob-1", None), ("GET", "/v1/memories", None), ("GET", "/v1/search?q=locker", None),
    ("PATCH", "/v1/memories/bob-1", {"text": "y"}), ("DELETE", "/v1/memories/bob-1", None),
    ("DELETE", "/v1/sessions/shared-name", None), ("DELETE", "/v1/owner", None),
    ("POST", "/v1/sessions/s/messages", {"role": "user", "text": "x"}), ("GET", "/v1/sessions/s/messages", None),
    ("POST", "/v1/recall", {"text": "locker"}), ("POST", "/v1/route", {"text": "translate"}),
    ("POST", "/v1/analyze", {"text": "x"}), ("GET", "/v1/agents", None), ("PUT", "/v1/agents/a", {"name": "A"}),
    ("DELETE", "/v1/agents/a", None), ("GET", "/metrics", None),
]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer mr_wrong"}, {"X-API-Key": "mr_wrong"},
                                     {"Authorization": f"Basic {KEYS['bob']}"}],
                         ids=["no-key", "wrong-bearer", "wrong-header", "basic-scheme"])
def test_every_endpoint_needs_a_valid_key(live: Live, headers: dict[str, str]) -> None:
    with httpx.Client(base_url=live.url, headers=headers) as http:
        for method, path, body in ENDPOINTS:
            r = http.request(method, path, json=body, params={"owner": "bob"})
            assert r.status_code == 401, (method, path, r.text)
            assert r.json()["type"] == "AuthError" and r.headers["www-authenticate"] == "Bearer"
            _no_secret(r)
        assert http.get("/healthz").status_code == 200 and http.get("/readyz").status_code == 200
    with httpx.Client(base_url=live.url, headers=auth("bob")) as bob:  # nothing was changed by the refusals
        assert bob.get("/v1/memories/bob-1").json()["text"] == SECRET


def test_the_x_api_key_header_works_too(live: Live) -> None:
    r = httpx.get(f"{live.url}/v1/memories/bob-1", headers={"X-API-Key": KEYS["bob"]})
    assert r.status_code == 200 and r.json()["text"] == SECRET


def test_a_key_for_alice_never_reaches_bobs_data(live: Live) -> None:
    with httpx.Client(base_url=live.url, headers=auth("alice"), timeout=30) as alice:
        alice.post("/v1/memories", json={"id": "alice-1", "text": "Alice's garden has tulips"})
        # by id: the same 404 as for an id that does not exist
        for method, body in (("GET", None), ("PATCH", {"text": "stolen"}), ("DELETE", None)):
            theirs = alice.request(method, "/v1/memories/bob-1", json=body)
            nobody = alice.request(method, "/v1/memories/no-such-id", json=body)
            assert theirs.status_code == nobody.status_code == 404
            assert theirs.json()["type"] == nobody.json()["type"] == "NotFoundError"
            assert theirs.json()["message"].replace("bob-1", "X") == nobody.json()["message"].replace("no-such-id", "X")
            _no_secret(theirs)
        # by naming bob as the owner
        for method, path, body in ENDPOINTS[:-1]:
            r = alice.request(method, path, json=body, params={"owner": "bob"})
            assert r.status_code == 403 and r.json()["type"] == "AuthError", (method, path, r.text)
            _no_secret(r)
        # by search, list and recall
        for mode in ("hybrid", "bm25", "vector"):
            r = alice.get("/v1/search", params={"q": "locker code zebra nickname Quokkaroo", "mode": mode,
                                                "max_sensitivity": "secret"})
            assert r.status_code == 200 and all(h["memory"]["owner"] == "alice" for h in r.json())
            _no_secret(r)
        _no_secret(alice.get("/v1/memories", params={"max_sensitivity": "secret", "limit": 1000}))
        recall = alice.post("/v1/recall", json={"text": "What is Bob's locker code?", "session": "shared-name"})
        assert recall.status_code == 200 and "bob-1" not in recall.text  # not even in the trace's candidates
        _no_secret(recall)
        # by messages and sessions
        assert alice.get("/v1/sessions/shared-name/messages").json() == []
        assert alice.delete("/v1/sessions/shared-name").json() == {"deleted": 0}
        # by route context: bob's session of the same name is not alice's conversation
        d = alice.post("/v1/route", json={"text": "Now to Korean", "session": "shared-name"}).json()
        assert d["previous"] is None and d["action"] != "stayed"
        _no_secret(alice.post("/v1/route", json={"text": "locker code", "session": "fresh"}))
    with httpx.Client(base_url=live.url, headers=auth("bob")) as bob:
        assert bob.get("/v1/memories/bob-1").json()["text"] == SECRET
        assert len(bob.get("/v1/sessions/shared-name/messages").json()) == 2
        follow = bob.post("/v1/route", json={"text": "And to French", "session": "shared-name"}).json()
        assert (follow["previous"], follow["action"]) == ("translator", "stayed")


def test_owner_selection_by_keys_with_several_owners(live: Live) -> None:
    with httpx.Client(base_url=live.url, headers=auth("both")) as both:
        r = both.get("/v1/memories")
        assert r.status_code == 400 and "several owners" in r.json()["message"]
        assert both.get("/v1/memories/bob-1", params={"owner": "bob"}).json()["text"] == SECRET
        assert both.get("/v1/memories/bob-1", params={"owner": "alice"}).status_code == 404
        assert both.get("/v1/memories", params={"owner": "carol"}).status_code == 403
    admin = httpx.get(f"{live.url}/v1/memories/bob-1", params={"owner": "bob"}, headers=auth("admin"))
    assert admin.json()["text"] == SECRET


@pytest.mark.parametrize("owner", ["", " ", "a,b", "*", "x" * 257, "line\nbreak"])
def test_owner_ids_that_cannot_be_are_refused(live: Live, owner: str) -> None:
    r = httpx.get(f"{live.url}/v1/memories", params={"owner": owner}, headers=auth("admin"))
    assert r.status_code in (400, 422) and r.json()["type"] in ("InputError", "ValidationError")


def test_keys_are_kept_hashed_and_entries_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = new_key()
    entry = key_entry(key, ["alice"])
    assert key not in entry and hashlib.sha256(key.encode()).hexdigest() in entry
    ring = KeyRing.parse(entry, "test", "alice")
    assert ring.authenticate(key, "10.1.2.3").owners == frozenset({"alice"})
    with pytest.raises(AuthError):
        ring.authenticate(key + "x", "127.0.0.1")
    with pytest.raises(ConfigError, match="line 2"):
        KeyRing.parse(f"{entry}\nsha256:abc=bob", "keys.txt", "alice")
    with pytest.raises(ConfigError, match="not a valid owner"):
        KeyRing.parse(entry.replace("=alice", "=a b\x00"), "keys.txt", "alice")
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text(f"# service keys\n{entry}  # alice's bot\n", "utf-8")
    from memroute.config import Settings

    loaded = KeyRing.from_settings(Settings(api_keys_file=str(keys_file)))
    assert loaded.authenticate(key, "10.1.2.3").owners == frozenset({"alice"})
    assert main(["new-key", "alice", "bob", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["entry"] == key_entry(printed["key"], ["alice", "bob"])


def test_development_mode_is_loopback_only(tmp_path: Path, embedder: CachedEmbedder,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    settings = settings_for(tmp_path, api_keys="")
    with Memory.open(settings.store, settings=settings, embedder=embedder) as memory:
        with pytest.raises(ConfigError, match="without API keys"):
            create_app(settings_for(tmp_path, api_keys="", host="0.0.0.0"), memory)
        app = create_app(settings, memory)
        with serving(app, settings) as url:
            assert httpx.post(f"{url}/v1/memories", json={"text": "dev note"}).status_code == 201
            assert httpx.get(f"{url}/v1/memories", params={"owner": "anyone"}).json() == []
            assert httpx.get(f"{url}/metrics").status_code == 200
    with pytest.raises(AuthError):  # a non-loopback client of a keyless service is refused
        KeyRing([], "alice").authenticate(None, "192.168.1.20")
    code = main(["serve", "--host", "0.0.0.0", "--store", settings.store, "--port", "0"])
    assert code == 1 and "without API keys" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ bad input
@pytest.fixture(scope="module")
def alice(live: Live) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, headers=auth("alice"), timeout=30) as client:
        yield client


@pytest.mark.parametrize("content, status, kind", [
    (b'{"text": ', 400, "MalformedJSON"),
    (b"\xff\xfe not utf-8", 400, "MalformedJSON"),
    (b'{"text": "a", }', 400, "MalformedJSON"),
    (b"[" * 5000 + b"]" * 5000, 400, None),
    (b'{"text": 12}', 422, "ValidationError"),
    (b'{"text": "x", "session": ["a"]}', 422, "ValidationError"),
    (b'{}', 422, "ValidationError"),
    (b'{"text": "x", "owner": "bob"}', 422, "ValidationError"),
    (b'{"text": "x", "colour": "blue"}', 422, "ValidationError"),
    (b'{"text": "x", "kind": "poem"}', 422, "ValidationError"),
    (b'{"text": "x", "occurred_at": "yesterday-ish"}', 422, "ValidationError"),
    (b'{"text": "bad \\ud800 surrogate"}', 422, "ValidationError"),
    (b'{"text": "nul \\u0000 inside"}', 400, "InputError"),
    (b'{"text": "x", "metadata": {"deep": "\\udfff"}}', 422, "ValidationError"),
    (b'"just a string"', 422, "ValidationError"),
    (b"null", 422, "ValidationError"),
])
def test_malformed_bodies_are_4xx_with_a_clear_message(alice: httpx.Client, content: bytes, status: int,
                                                       kind: str | None) -> None:
    r = alice.post("/v1/memories", content=content, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"type", "message", "detail"} and body["message"]
    if kind:
        assert body["type"] == kind


@pytest.mark.parametrize("path, body", [
    ("/v1/recall", {"text": "x", "options": {"limit": 10**30}}),
    ("/v1/recall", {"text": "x", "options": {"vector_weight": "NaN"}}),
    ("/v1/recall", {"text": "x", "options": {"strategy": "psychic"}}),
    ("/v1/recall", {"text": "x", "recent_messages": [{"role": "user"}]}),
    ("/v1/recall", {"text": "x", "now": "not a time"}),
    ("/v1/route", {"text": ""}),
    ("/v1/route", {"text": "x", "session": "s", "hints": ["tool"]}),
    ("/v1/route", {"text": "x", "top_k": 0}),
    ("/v1/analyze", {"text": "x", "now": "31/12/2025"}),
    ("/v1/memories/import", {"items": [{"text": "x"}] * 1001}),
    ("/v1/sessions/s/messages", {"role": "", "text": "x"}),
])
def test_bad_values_are_4xx(alice: httpx.Client, path: str, body: dict[str, Any]) -> None:
    r = alice.post(path, json=body)
    assert r.status_code in (400, 413, 422), (path, r.text)
    assert r.json()["type"] in ("InputError", "ValidationError", "PayloadTooLarge")


def test_nan_in_json_is_refused(alice: httpx.Client) -> None:
    r = alice.post("/v1/recall", content=b'{"text": "x", "options": {"keyword_weight": NaN}}',
                   headers={"content-type": "application/json"})
    assert r.status_code == 422


def test_query_text_longer_than_the_limit_is_400(alice: httpx.Client) -> None:
    for path in ("/v1/recall", "/v1/route", "/v1/analyze"):
        r = alice.post(path, json={"text": "word " * 1_200})
        assert r.status_code == 400 and "max_text_chars" in r.json()["message"].lower(), (path, r.text)
    assert alice.get("/v1/search", params={"q": "w" * 6_000}).status_code in (400, 414)


def test_oversized_bodies_are_refused_while_streaming(live: Live, alice: httpx.Client) -> None:
    declared = alice.post("/v1/memories", json={"text": "x" * 60_000})
    assert declared.status_code == 413 and declared.json()["type"] == "PayloadTooLarge"
    assert "50,000" in declared.json()["message"]
    sent: list[int] = []

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"text": "'
        for _ in range(10_000):
            sent.append(1_000)
            yield b"x" * 1_000
        yield b'"}'

    streamed = alice.post("/v1/memories", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["type"] == "PayloadTooLarge"
    assert sum(sent) < 10_000_000  # the connection was closed: the client stopped sending (socket buffers aside)
    assert alice.get("/v1/memories/bob-1").status_code == 404  # the service still answers


def test_unicode_in_headers_is_a_4xx_or_ignored(live: Live) -> None:
    host, port = live.url.removeprefix("http://").split(":")
    cases = [("Authorization: Bearer 鍵キー키\r\n".encode(), 401),
             ("X-API-Key: \xe9\xff\r\n".encode("latin-1"), 401),
             (f"Authorization: Bearer {KEYS['alice']}\r\nX-Note: 日本語 한국어\r\n".encode(), 200)]
    for raw, expected in cases:
        status, body = _raw_request(host, int(port), b"GET /v1/memories HTTP/1.1\r\nHost: x\r\n" + raw +
                                    b"Connection: close\r\n\r\n")
        assert status == expected, body
        assert expected == 200 or json.loads(body)["type"] == "AuthError"
    ok = httpx.get(f"{live.url}/v1/memories", params={"owner": "アリス"}, headers=auth("admin"))
    assert ok.status_code == 200 and ok.json() == []


def test_slow_clients_get_408_and_hold_nothing(live: Live, alice: httpx.Client) -> None:
    host, port = live.url.removeprefix("http://").split(":")
    slow_body = socket.create_connection((host, int(port)))
    slow_body.sendall(b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Authorization: Bearer " + KEYS["alice"].encode() + b"\r\nContent-Length: 100\r\n\r\n{\"te")
    slow_headers = socket.create_connection((host, int(port)))
    slow_headers.sendall(b"GET /v1/memories HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    idle = socket.create_connection((host, int(port)))
    started = time.monotonic()
    assert alice.get("/healthz").status_code == 200  # others are served meanwhile
    for conn in (slow_body, slow_headers):
        conn.settimeout(10)
        answer = _read_all(conn)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["type"] == "RequestTimeout"
    idle.settimeout(10)
    assert _read_all(idle) == b""  # closed without a word: it never asked anything
    assert time.monotonic() - started < 8
    # on a new connection: alice's keep-alive one idles past the same deadline about now, and a request sent
    # as the server closes it is reset (the usual keep-alive race; it failed the suite once)
    assert httpx.get(f"{live.url}/healthz", timeout=10).status_code == 200


def _raw_request(host: str, port: int, request: bytes) -> tuple[int, str]:
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(request)
        answer = _read_all(conn)
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body.decode("utf-8", "replace")


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    conn.close()
    return b"".join(chunks)


def test_rate_limit_answers_429_with_retry_after(tmp_path: Path, embedder: CachedEmbedder) -> None:
    settings = settings_for(tmp_path, rate_limit_per_minute=60, rate_limit_burst=3)
    with live_service(settings, embedder) as live:
        answers = [httpx.get(f"{live.url}/v1/memories", headers=auth("alice")) for _ in range(4)]
        assert [r.status_code for r in answers] == [200, 200, 200, 429]
        limited = answers[-1]
        assert limited.json()["type"] == "RateLimitError" and int(limited.headers["retry-after"]) == 1
        assert httpx.get(f"{live.url}/v1/memories", headers=auth("bob")).status_code == 200  # per key
        assert httpx.get(f"{live.url}/healthz").status_code == 200


def test_callers_without_a_valid_key_are_rate_limited_by_address(tmp_path: Path, embedder: CachedEmbedder) -> None:
    settings = settings_for(tmp_path, rate_limit_per_minute=6, rate_limit_burst=4)
    mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
    with live_service(settings, embedder) as live:
        refused = [httpx.get(f"{live.url}/v1/memories", headers={"Authorization": "Bearer mr_guess"}),
                   httpx.get(f"{live.url}/v1/memories"),
                   httpx.post(f"{live.url}/mcp/", json=initialize, headers=mcp),
                   httpx.get(f"{live.url}/metrics", headers={"X-API-Key": "guess"})]
        assert [r.status_code for r in refused] == [401] * 4
        # the address's bucket is empty: every further keyless or wrong-key request is 429, on every surface
        for limited in (httpx.get(f"{live.url}/v1/memories", headers={"Authorization": "Bearer mr_guess2"}),
                        httpx.post(f"{live.url}/mcp/", json=initialize, headers=mcp | {"X-API-Key": "guess"}),
                        httpx.post(f"{live.url}/v1/recall", json={"text": "x"})):
            assert limited.status_code == 429, limited.text
            assert limited.json()["type"] == "RateLimitError" and int(limited.headers["retry-after"]) >= 1
            assert "address" in limited.json()["message"]
        # a valid key is limited per key, never by the address it shares with a stranger
        assert httpx.get(f"{live.url}/v1/memories", headers=auth("alice")).status_code == 200
        assert httpx.post(f"{live.url}/mcp/", json=initialize, headers=mcp | auth("bob")).status_code == 200


def test_rate_limiter_refills() -> None:
    limiter = RateLimiter(per_minute=600, burst=2)
    limiter.check("k")
    limiter.check("k")
    with pytest.raises(ServiceError) as err:
        limiter.check("k")
    assert err.value.status == 429 and err.value.retry_after == 1
    time.sleep(0.15)  # 10 per second
    limiter.check("k")


async def test_a_full_queue_answers_503() -> None:
    runner = Runner(threads=1, queue=0)
    release = anyio.Event()
    started = anyio.Event()

    def block() -> int:
        anyio.from_thread.run_sync(started.set)
        anyio.from_thread.run(release.wait)
        return 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run, block)
        await started.wait()
        with pytest.raises(ServiceError) as err:
            await runner.run(lambda: 2)
        assert err.value.status == 503 and err.value.retry_after == 1
        release.set()
    assert await runner.run(lambda: 3) == 3


def test_client_side_bad_input_never_reaches_a_500(alice: httpx.Client) -> None:
    for params in ({"limit": "many"}, {"limit": "0"}, {"kinds": "poem"}, {"max_sensitivity": "top"},
                   {"start": "soon"}, {"offset": "-1"}):
        r = alice.get("/v1/memories", params=params)
        assert r.status_code in (400, 422), (params, r.text)
    assert alice.get("/v1/search").status_code == 422
    assert alice.put("/v1/memories/x", json={}).status_code == 405
    assert alice.get("/v1/nothing-here").json()["type"] == "NotFound"
