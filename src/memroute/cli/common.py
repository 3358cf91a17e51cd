"""Shared pieces of the CLI: common options, settings, output."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from memroute.config import Settings
from memroute.llm import LlmAssistant, assistant_from_settings

COMMAND_GROUPS = {
    "eval": "measure quality on evaluation data (analysis, recall, everyday, route, intents)",
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


def add_llm_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm", metavar="URL", help="also ask an OpenAI-compatible LLM at this base URL (e.g. "
                        "http://localhost:11434/v1); key from MEMROUTE_LLM_API_KEY or MEMROUTE_LLM_API_KEY_ENV, "
                        "policy from MEMROUTE_LLM_* (docs/llm.md) without its per-minute budgets")
    parser.add_argument("--llm-model", metavar="NAME", help="the model the --llm endpoint serves "
                        "(default: MEMROUTE_LLM_MODEL)")


def llm_from(args: argparse.Namespace) -> LlmAssistant | None:
    """The LLM of an evaluation (``--llm`` / ``--llm-model``), or None; a bad configuration is a ConfigError
    now. An evaluation is a batch, not live traffic: the per-minute budgets are lifted (a server that is
    overloaded answers 429, which is retried), the per-request ones stay."""
    if not getattr(args, "llm", None):
        return None
    unlimited = 10**12
    return assistant_from_settings(Settings.load(llm_url=args.llm, llm_model=args.llm_model,
                                                 llm_calls_per_minute=unlimited, llm_tokens_per_minute=unlimited))


def emit_json(value: Any) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")
