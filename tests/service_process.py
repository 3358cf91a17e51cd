"""`memroute serve` as a real process on a free loopback port, for the contract and fault tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from memroute.service.auth import key_entry, new_key

MEMROUTE = str(Path(sys.executable).parent / "memroute")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    url: str
    key: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def log_text(self) -> str:
        return self.log.read_text("utf-8", "replace")


def start(store: str, log: Path, *, port: int | None = None, key: str | None = None, demo: bool = False,
          env: dict[str, str] | None = None, timeout_s: float = 90, args: tuple[str, ...] = ()) -> Served:
    """Start ``memroute serve`` on ``store`` with one API key for any owner; returns once /readyz answers."""
    key = key or new_key()
    port = port or free_port()
    environment = {**os.environ, "MEMROUTE_API_KEYS": key_entry(key, ["*"]), "MEMROUTE_OWNER": "demo",
                   "MEMROUTE_RATE_LIMIT_PER_MINUTE": "1000000", "MEMROUTE_RATE_LIMIT_BURST": "100000",
                   **(env or {})}
    command = [MEMROUTE, "serve", "--store", store, "--port", str(port), "--log-level", "warning", *args]
    with log.open("ab") as sink:
        process = subprocess.Popen(command + (["--demo"] if demo else []), stdout=sink, stderr=subprocess.STDOUT,
                                   env=environment)
    served = Served(f"http://127.0.0.1:{port}", key, process, log)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"memroute serve exited with {process.returncode}:\n{served.log_text()[-3000:]}")
        try:
            if httpx.get(f"{served.url}/readyz", timeout=2).status_code == 200:
                return served
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"memroute serve did not get ready in {timeout_s:g} s:\n{served.log_text()[-3000:]}")
        time.sleep(0.1)


def stop(served: Served) -> None:
    if served.process.poll() is None:
        served.process.terminate()
        try:
            served.process.wait(15)
        except subprocess.TimeoutExpired:
            served.process.kill()
            served.process.wait(5)


@contextmanager
def serving(store: str, log: Path, **kwargs: object) -> Iterator[Served]:
    served = start(store, log, **kwargs)  # type: ignore[arg-type]
    try:
        yield served
    finally:
        stop(served)
