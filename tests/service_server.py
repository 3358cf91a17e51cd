"""A real memroute service on a free loopback port, served by uvicorn in a thread, for the service tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from memroute import Memory, Settings
from memroute.cli.demo import demo_agents
from memroute.embed import Embedder
from memroute.service.app import create_app
from memroute.service.auth import key_entry, new_key
from memroute.service.server import HeaderDeadline, server_config
from memroute.types import Agent

KEYS = {name: new_key() for name in ("alice", "bob", "both", "admin")}
OWNERS = {"alice": ["alice"], "bob": ["bob"], "both": ["alice", "bob"], "admin": ["*"]}


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def settings_for(tmp: Path, **overrides: Any) -> Settings:
    """Settings of a test service: its own SQLite file, the four keys, generous limits unless overridden."""
    values: dict[str, Any] = {
        "store": f"sqlite:///{tmp / 'service.db'}", "owner": "alice", "host": "127.0.0.1", "port": 0,
        "api_keys": "; ".join(key_entry(KEYS[name], OWNERS[name]) for name in KEYS),
        "rate_limit_per_minute": 100_000, "rate_limit_burst": 10_000,
    }
    values.update(overrides)
    return Settings(**values)


@dataclass
class Live:
    url: str
    app: FastAPI
    memory: Memory


@contextmanager
def serving(app: FastAPI, settings: Settings, protocol: type[HeaderDeadline] | None = None) -> Iterator[str]:
    """Serve ``app`` on a free loopback port until the block ends (``protocol``: the HTTP protocol, default the
    service's); yields its base URL."""
    server = uvicorn.Server(server_config(app, settings, log_level="warning", protocol=protocol))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test service did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


@contextmanager
def live_service(settings: Settings, embedder: Embedder, agents: Sequence[Agent] | None = None,
                 protocol: type[HeaderDeadline] | None = None) -> Iterator[Live]:
    """The service over a fresh :class:`Memory` on ``settings.store``, routing to the demo catalogue."""
    memory = Memory.open(settings.store, settings=settings, embedder=embedder)
    try:
        app = create_app(settings, memory, agents=demo_agents() if agents is None else agents)
        with serving(app, settings, protocol) as url:
            yield Live(url, app, memory)
    finally:
        memory.close()
