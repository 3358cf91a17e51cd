"""The ``memroute`` command line. Each command lives in its own module and registers itself here.

Every command takes ``--store URL`` and ``--owner ID`` (defaults from settings) and ``--json`` for
machine-readable output. Errors print one line on stderr and exit with status 1 (2 for usage errors).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator, Sequence

from memroute.cli import (
    analysis_cmd,
    convert_cmd,
    everyday_cmd,
    init_cmd,
    investigate_cmd,
    mcp_cmd,
    memory_cmds,
    recall_cmd,
    route_cmd,
    serve_cmd,
    store_cmds,
)
from memroute.cli.common import COMMAND_GROUPS, Group, examples
from memroute.cli.help_examples import EXAMPLES
from memroute.errors import MemrouteError

# Modules that register commands; each has ``register(sub, groups)``.
_MODULES = (init_cmd, memory_cmds, store_cmds, analysis_cmd, route_cmd, recall_cmd, everyday_cmd, mcp_cmd, serve_cmd,
            investigate_cmd, convert_cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memroute",
        description="Conversation-aware routing and memory recall in English, Japanese and Korean.",
        epilog=examples("memroute init                 # a starter agents.toml and memroute.toml here",
                        "memroute demo                 # the end-to-end demonstration",
                        "memroute COMMAND --help       # each command's options and examples"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups: dict[str, Group] = {}
    for name, help_text in COMMAND_GROUPS.items():
        gp = sub.add_parser(name, help=help_text, description=help_text)
        groups[name] = Group(gp.add_subparsers(dest="subcommand", metavar="WHAT", required=True))
    for module in _MODULES:
        module.register(sub, groups)
    for name, command in commands(parser):
        if name in EXAMPLES:
            command.epilog = examples(*EXAMPLES[name])
            command.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command and subcommand parser, as ("investigate start", parser)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield prefix + name, command
                yield from commands(command, f"{prefix}{name} ")


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Stop with the command's own usage and, for a mistyped option, the one it looks like."""
    name = " ".join(v for v in (getattr(args, "command", None), getattr(args, "subcommand", None)) if v)
    command = dict(commands(parser)).get(name, parser)
    known = [o for action in command._actions for o in action.option_strings]
    hints = []
    for word in extra:
        option = word.split("=", 1)[0]
        if option.startswith("-"):
            close = difflib.get_close_matches(option, known, n=1, cutoff=0.6)
            hints.append(f"{option}: did you mean {close[0]}?" if close else f"{option} is not an option of "
                         f"memroute {name} (memroute {name} --help lists them)")
    command.error(f"unrecognized arguments: {' '.join(extra)}" + ("\n  " + "\n  ".join(hints) if hints else ""))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unknown_options(parser, args, extra)
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
