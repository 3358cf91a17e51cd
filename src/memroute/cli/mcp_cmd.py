"""`memroute mcp`: the MCP server over stdio (or streamable HTTP on loopback), for one owner."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memroute.cli.common import settings_from
from memroute.cli.route_cmd import DEFAULT_CATALOGUES
from memroute.errors import DependencyError


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("mcp", help="serve the memory tools (and code investigation) over MCP, on stdio",
                       description="Serve remember / recall / route / analyze / forget over MCP on stdio (for "
                       "an agent that starts memroute as a subprocess). With --repo, also the guided code "
                       "investigation tools over those repositories. Every call acts for --owner.")
    p.add_argument("--store", help="store URL (default: settings, MEMROUTE_STORE)")
    p.add_argument("--owner", help="the owner every call acts for (default: settings, MEMROUTE_OWNER)")
    p.add_argument("--agents", help="agent catalogue for `route` (TOML/YAML/JSON); default ./agents.toml|yaml|json")
    p.add_argument("--repo", action="append", default=[], metavar="PATH",
                   help="a repository the code-investigation tools may read (repeatable; nothing outside them)")
    p.add_argument("--http", type=int, metavar="PORT",
                   help="serve streamable HTTP on 127.0.0.1:PORT at /mcp instead of stdio (no API keys: "
                        "loopback only; use `memroute serve` for keys)")
    p.set_defaults(handler=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    try:
        from memroute.mcp import create_mcp_server
    except ImportError as exc:  # pragma: no cover - the extra is part of dev installs
        raise DependencyError(f"the MCP server needs the mcp package ({exc}): pip install 'memroute[mcp]'") from None
    from memroute.memory import Memory
    from memroute.routing import load_catalogue

    settings = settings_from(args)
    path = args.agents or next((name for name in DEFAULT_CATALOGUES if Path(name).is_file()), None)
    agents = load_catalogue(path) if path else ()
    with Memory.open(settings=settings) as memory:
        server = create_mcp_server(memory, agents, settings.owner, repos=args.repo)
        if args.http is None:
            server.run("stdio")
        else:
            import anyio

            anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=args.http))
    return 0
