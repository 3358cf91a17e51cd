"""Shared pieces of the CLI: common options, settings, output."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from memroute.config import Settings

COMMAND_GROUPS = {
    "eval": "measure quality on evaluation data (analysis, recall, route, intents)",
    "bench": "measure speed and memory (store, recall, route)",
}


@dataclass
class Group:
    """A command group (``eval``, ``bench``) that modules add subcommands to."""

    sub: Any

    def add(self, name: str, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self.sub.add_parser(name, help=help_text, description=help_text)
        return parser


def add_common(parser: argparse.ArgumentParser, store: bool = True, owner: bool = True) -> None:
    if store:
        parser.add_argument("--store", help="store URL (default: settings, MEMROUTE_STORE)")
    if owner:
        parser.add_argument("--owner", help="owner id (default: settings, MEMROUTE_OWNER)")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings.load(store=getattr(args, "store", None), owner=getattr(args, "owner", None))


def emit_json(value: Any) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")
