"""`memroute serve --workers 2`: two processes on one socket and one store, each with its own connection and
index. What one worker writes, the other finds at once; what one forgets, the other no longer returns."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.pg_server import PgServer
from tests.service_process import MEMROUTE, Served, serving

HEALTH = re.compile(r'^http_requests_total\{method="GET",route="/healthz",status="200"\} (\d+)', re.M)


def _healthz_count(http: httpx.Client) -> int:
    """How many /healthz the worker behind this connection has answered (each worker has its own metrics)."""
    r = http.get("/metrics")
    assert r.status_code == 200
    found = HEALTH.search(r.text)
    return int(float(found.group(1))) if found else 0


def _connection(served: Served) -> httpx.Client:
    """A client with one keep-alive connection, hence one worker for its whole life."""
    return httpx.Client(base_url=served.url, headers=served.headers, timeout=30,
                        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))


def _two_workers(served: Served) -> tuple[httpx.Client, httpx.Client]:
    """Two connections answered by different workers: the first marks its worker with 20 /healthz, then
    new connections are opened until one lands on a worker that has not seen them (the second worker may
    still be starting when the first answers /readyz)."""
    first = _connection(served)
    for _ in range(20):
        assert first.get("/healthz").status_code == 200
    marked = _healthz_count(first)
    assert marked >= 20
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        other = _connection(served)
        if _healthz_count(other) < marked:
            return first, other
        other.close()
        time.sleep(0.2)
    first.close()
    raise AssertionError("for 2 minutes every new connection reached the first worker: is there a second one?")


def _check_shared(served: Served) -> None:
    a, b = _two_workers(served)
    try:
        text = "the violet umbrella was left at the Kyoto station lost-and-found"
        r = a.post("/v1/memories?owner=alice", json={"id": "m-umbrella", "text": text, "session": "s1"})
        assert r.status_code == 201, r.text
        assert b.get("/v1/memories/m-umbrella?owner=alice").json()["text"] == text
        hits = b.get("/v1/search", params={"q": "violet umbrella", "owner": "alice", "limit": 5}).json()
        assert [h["memory"]["id"] for h in hits][:1] == ["m-umbrella"]
        recalled = b.post("/v1/recall?owner=alice", json={"text": "where was the violet umbrella left?"}).json()
        assert "m-umbrella" in [m["id"] for m in recalled["memories"]]
        assert b.get("/v1/search", params={"q": "violet umbrella", "owner": "bob"}).json() == []

        assert b.delete("/v1/memories/m-umbrella?owner=alice").json() == {"deleted": 1}
        assert a.get("/v1/memories/m-umbrella?owner=alice").status_code == 404
        hits = a.get("/v1/search", params={"q": "violet umbrella", "owner": "alice", "limit": 5}).json()
        assert "m-umbrella" not in [h["memory"]["id"] for h in hits]

        agent = {"name": "Travel desk", "description": "trains, stations, lost property on journeys"}
        assert a.put("/v1/agents/travel?owner=alice", json=agent).status_code in (200, 201)
        assert "travel" in [x["id"] for x in b.get("/v1/agents?owner=alice").json()["agents"]]
    finally:
        a.close()
        b.close()


def test_two_workers_share_one_sqlite_store(tmp_path: Path) -> None:
    with serving(f"sqlite:///{tmp_path / 'shared.db'}", tmp_path / "serve.log", args=("--workers", "2")) as served:
        _check_shared(served)
        trackers = [pid for pid in _children(served.process.pid)
                    if b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    # stopped (SIGTERM): the workers left no semaphore for the resource tracker to clean up and warn about
    # when it exits, after the last worker
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in trackers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert trackers and not any(Path(f"/proc/{pid}").exists() for pid in trackers)
    assert "leaked semaphore" not in served.log_text(), served.log_text()[-2000:]


def test_two_workers_share_one_postgres_store(pg_server: PgServer, tmp_path: Path) -> None:
    with serving(pg_server.new_database(), tmp_path / "serve.log", args=("--workers", "2")) as served:
        _check_shared(served)


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def _connections_by_worker(served: Served) -> list[int]:
    """How many established connections to the service's port each worker process holds (Linux /proc)."""
    port = int(served.url.rsplit(":", 1)[1])
    established = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state, inode = (line.split()[i] for i in (1, 3, 9))
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                established.add(f"socket:[{inode}]")
    workers = _children(served.process.pid)
    counts = []
    for worker in workers:
        links = []
        for fd in Path(f"/proc/{worker}/fd").iterdir():
            try:
                links.append(os.readlink(fd))
            except OSError:
                continue  # closed meanwhile
        counts.append(sum(link in established for link in links))
    return sorted(counts)


def test_keep_alive_connections_spread_over_the_workers(tmp_path: Path) -> None:
    """Eight clients that connect one after another (and keep their connections) are served four by each
    worker: a keep-alive connection stays with the worker that accepted it, and asyncio's own loop let
    whichever worker woke first take the next one (rounds of 4-4, 1-7, 3-5 on the code before)."""
    with serving(f"sqlite:///{tmp_path / 'spread.db'}", tmp_path / "serve.log", args=("--workers", "2")) as served:
        for client in _two_workers(served):  # both workers are up
            client.close()
        rounds = []
        for _ in range(4):
            clients = [_connection(served) for _ in range(8)]
            try:
                for client in clients:
                    assert client.get("/healthz").status_code == 200
                rounds.append([n for n in _connections_by_worker(served) if n])
            finally:
                for client in clients:
                    client.close()
            time.sleep(0.3)  # the closed connections leave the workers
        # one round may be off by one (a worker's loop held up on a loaded machine), no more
        assert sorted(map(sorted, rounds)) in ([[4, 4]] * 4, [[3, 5]] + [[4, 4]] * 3), rounds


@pytest.mark.parametrize("workers", ["2", "0"])
def test_workers_that_cannot_share_the_store_are_refused(workers: str) -> None:
    done = subprocess.run([MEMROUTE, "serve", "--store", "sqlite://:memory:", "--workers", workers, "--port", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert ("in-memory store cannot be shared" if workers == "2" else "give 1 to 64") in done.stderr
    assert "Traceback" not in done.stderr


def test_balanced_loop_turns_nagle_off_on_the_shared_socket() -> None:
    """uvicorn binds the socket its workers share with proto 0, and asyncio sets TCP_NODELAY only on a
    socket whose proto is IPPROTO_TCP: every connection a worker accepts must still have Nagle off, or a
    response's body waits for the client's delayed ACK of its headers."""
    import asyncio
    import socket

    from memroute.service.server import BalancedLoop

    listening = socket.socket(family=socket.AF_INET)  # as uvicorn.Config.bind_socket makes it
    listening.bind(("127.0.0.1", 0))
    assert listening.proto == 0
    seen: list[int] = []

    class Record(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            seen.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    async def accept_one() -> None:
        server = await asyncio.get_running_loop().create_server(Record, sock=listening)
        _, writer = await asyncio.open_connection(*listening.getsockname())
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    loop = BalancedLoop()
    try:
        loop.run_until_complete(accept_one())
    finally:
        loop.close()
    assert seen and seen[0] != 0
