"""`memroute serve` (the HTTP service; what `make run` starts) and `memroute new-key`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from memroute.cli.common import check_store_url, emit_json
from memroute.config import Settings
from memroute.errors import DependencyError


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("serve", help="run the HTTP service: API, OpenAPI docs, metrics",
                       description="Serve the HTTP API (docs at /docs, schema at /openapi.json, Prometheus "
                       "metrics at /metrics) over one store. Without API keys it serves loopback clients only.")
    p.add_argument("--store", help="store URL (default: settings, MEMROUTE_STORE)")
    p.add_argument("--host", help="address to bind (default 127.0.0.1; any other needs API keys)")
    p.add_argument("--port", type=int, help="port (default 8765)")
    p.add_argument("--agents", help="default agent catalogue (TOML/YAML/JSON) for owners without their own")
    p.add_argument("--owner", help="owner of requests that name none, without keys or with a * key "
                   "(default: settings; 'demo' with --demo)")
    p.add_argument("--demo", action="store_true", help="load the bundled demo memories (owner 'demo') and, "
                   "unless --agents is given, route to the bundled demo catalogue")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="worker processes on one socket, each with its own store connection (default 1; "
                   "about one per core: each takes server_threads requests at a time)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.set_defaults(handler=_serve)

    k = sub.add_parser("new-key", help="make an API key and print the entry that configures it",
                       description="Print a new random API key (give it to the client; it is not stored) and "
                       "its entry for MEMROUTE_API_KEYS or the api_keys_file (only its SHA-256 is kept).")
    k.add_argument("owners", nargs="+", metavar="OWNER", help="owners the key may act for (* for any)")
    k.add_argument("--add-to", metavar="FILE", help="append the entry to this keys file (created, readable by "
                   "you only; serve it with MEMROUTE_API_KEYS_FILE=FILE) and print only the key")
    k.add_argument("--json", action="store_true", help="machine-readable JSON output")
    k.set_defaults(handler=_new_key)


def _serve(args: argparse.Namespace) -> int:
    from memroute.cli.demo import DEMO_OWNER, demo_agents, load_demo
    from memroute.memory import Memory

    try:
        from memroute.service.app import create_app
        from memroute.service.server import WorkerApp, check_workers, serve, serve_workers, warm_up
    except ImportError as exc:
        raise DependencyError(f"the service needs FastAPI and uvicorn ({exc.name} is missing): "
                              "pip install 'memroute[server]'") from None
    settings = Settings.load(store=args.store, host=args.host, port=args.port, agents=args.agents,
                             owner=args.owner or (DEMO_OWNER if args.demo else None))
    check_store_url(settings.store)
    check_workers(settings, args.workers)
    with Memory.open(settings.store, settings=settings) as memory:
        loaded = ""
        if args.demo:
            loaded = (f"; demo: {load_demo(memory)} memories of owner {DEMO_OWNER!r}, dated relative to "
                      "today")
        agents = demo_agents() if args.demo and not settings.agents else None
        app = create_app(settings, memory, agents=agents)
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        url = f"http://{host}:{settings.port}"
        keys = ("no API keys: development mode, loopback clients only" if app.state.service.keys.open
                else "API key required")
        workers = f"; {args.workers} workers" if args.workers > 1 else ""
        print(f"memroute service: {url}  (docs {url}/docs; store {memory.store.url}; {keys}{loaded}{workers})",
              flush=True)
        if args.workers == 1:
            warm_up(memory, settings.owner)
            serve(app, settings, args.log_level)
            return 0
    # Each worker opens the store itself; this process only checked the configuration and the store above.
    serve_workers(WorkerApp(settings, demo_agents=agents is not None), settings, args.workers, args.log_level)
    return 0


def _new_key(args: argparse.Namespace) -> int:
    from memroute.service.auth import key_entry, new_key

    key = new_key()
    entry = key_entry(key, args.owners)
    if args.add_to:
        path = Path(args.add_to).expanduser()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(entry + "\n")
        if args.json:
            emit_json({"key": key, "entry": entry, "file": str(path)})
        else:
            print(key)
            print(f"(the key for the client, not stored; its entry was added to {path}: serve with "
                  f"MEMROUTE_API_KEYS_FILE={path})", file=sys.stderr)
        return 0
    if args.json:
        emit_json({"key": key, "entry": entry})
    else:
        print(f"key:   {key}\n       (give it to the client as 'Authorization: Bearer <key>'; it is not stored)\n"
              f"entry: {entry}\n       (add it to MEMROUTE_API_KEYS, ';'-separated, or as a line of the api_keys_file)")
    return 0
