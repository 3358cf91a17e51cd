"""The ``memroute`` command line. Each command lives in its own module and registers itself here.

Every command takes ``--store URL`` and ``--owner ID`` (defaults from settings) and ``--json`` for
machine-readable output. Errors print one line on stderr and exit with status 1 (2 for usage errors).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from memroute.cli import (
    analysis_cmd,
    everyday_cmd,
    investigate_cmd,
    mcp_cmd,
    memory_cmds,
    recall_cmd,
    route_cmd,
    serve_cmd,
    store_cmds,
)
from memroute.cli.common import COMMAND_GROUPS, Group
from memroute.errors import MemrouteError

# Modules that register commands; each has ``register(sub, groups)``.
_MODULES = (memory_cmds, store_cmds, analysis_cmd, route_cmd, recall_cmd, everyday_cmd, mcp_cmd, serve_cmd,
            investigate_cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memroute",
        description="Conversation-aware routing and memory recall in English, Japanese and Korean.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups: dict[str, Group] = {}
    for name, help_text in COMMAND_GROUPS.items():
        gp = sub.add_parser(name, help=help_text, description=help_text)
        groups[name] = Group(gp.add_subparsers(dest="subcommand", metavar="WHAT", required=True))
    for module in _MODULES:
        module.register(sub, groups)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except MemrouteError as exc:
        print(f"memroute: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("memroute: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
