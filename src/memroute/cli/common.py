"""Shared pieces of the CLI: common options, settings, output."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memroute.config import Settings
from memroute.errors import ConfigError, NotFoundError
from memroute.llm import LlmAssistant, assistant_from_settings

COMMAND_GROUPS = {
    "eval": "measure quality on evaluation data (analysis, recall, everyday, route, intents; convert public sets)",
    "bench": "measure speed and memory (store, recall, route)",
}


@dataclass
class Group:
    """A command group (``eval``, ``bench``) that modules add subcommands to."""

    sub: Any

    def add(self, name: str, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self.sub.add_parser(name, help=help_text, description=help_text)
        return parser


def examples(*lines: str) -> str:
    """A help text's closing lines: one or two commands to copy (``epilog`` of a parser)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def add_common(parser: argparse.ArgumentParser, store: bool = True, owner: bool = True) -> None:
    if store:
        parser.add_argument("--store", help="store URL (default: settings, MEMROUTE_STORE)")
    if owner:
        parser.add_argument("--owner", help="owner id (default: settings, MEMROUTE_OWNER)")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


def settings_from(args: argparse.Namespace) -> Settings:
    """The command's settings (options over environment over memroute.toml); a store URL that looks like a
    mistyped absolute path is refused here, before any command can create it."""
    settings = Settings.load(store=getattr(args, "store", None), owner=getattr(args, "owner", None))
    check_store_url(settings.store)
    return settings


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


def _sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///`` URL, or None (another backend, or in memory)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):].partition("?")[0]
    return path if path and path != ":memory:" else None


def _looks_absolute(path: str) -> bool:
    """A relative path whose first folder is missing here but exists at / (``home/me/x.db``): three slashes
    where four were meant."""
    first = Path(path).parts[0] if Path(path).parts else ""
    return not Path(path).is_absolute() and bool(first) and not Path(first).exists() and Path("/", first).is_dir()


def _four_slashes(path: str) -> str:
    return (f"did you mean sqlite:////{path}? (an absolute path takes four slashes; with three it is relative "
            f"to {Path.cwd()}; write sqlite:///./{path} if that is what you want)")


def check_store_url(url: str) -> None:
    """Refuse, before anything is created, a new SQLite store whose path looks like a mistyped absolute one."""
    path = _sqlite_path(url)
    if path is not None and not Path(path).exists() and _looks_absolute(path):
        raise ConfigError(f"no store at {Path(path).absolute()} (nothing was created); {_four_slashes(path)}")


def require_store(url: str) -> None:
    """For a command that only reads: a SQLite store that does not exist is an error, and nothing is created
    (no file, no folder). A relative path that looks like a mistyped absolute one gets a suggestion."""
    path = _sqlite_path(url)
    if path is None or Path(path).exists():
        return
    hint = _four_slashes(path) if _looks_absolute(path) else "commands that write (remember, import, demo) create it"
    raise NotFoundError(f"no store at {Path(path).absolute()}; {hint}")
