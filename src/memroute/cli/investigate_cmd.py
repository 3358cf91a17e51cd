"""`memroute investigate ...`: walk a guided code-investigation session (seed 002) by hand.

Sessions live in the store (``--store``), so each command can be a separate process: ``start`` prints the
session id that the next commands take.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from memroute.cli.common import add_common, emit_json, require_store, settings_from
from memroute.errors import InputError
from memroute.investigate import TOOLS, Investigator, StepResult, Workspace
from memroute.investigate.decisions import to_jsonl
from memroute.llm import assistant_from_settings
from memroute.stores import open_store


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("investigate", help="walk a guided code-investigation session by hand",
                       description="Guided code investigation: start a session, give the query frame, explore "
                       "with the code tools, submit what you found, until the session is READY.")
    steps = p.add_subparsers(dest="subcommand", metavar="STEP", required=True)

    s = _step(steps, "start", "start a session: intent, category and the slot-extraction prompt")
    s.add_argument("query", metavar="QUERY", help="the request, as the user wrote it")
    s.add_argument("--intent", choices=["IMPLEMENT", "MODIFY", "INVESTIGATE", "QUESTION"],
                   help="default: classified from the query")

    s = _step(steps, "frame", "give the query frame: slots with their exact quotes (JSON)")
    s.add_argument("session")
    s.add_argument("slots", nargs="?", help='JSON or @file: {"target_feature": {"value": ..., "quote": ...}, ...}; '
                   "left out: the configured LLM (MEMROUTE_LLM_*, with the 'slots' step) extracts them")

    s = _step(steps, "submit", "submit what exploration found; READY, SEMANTIC or still EXPLORATION")
    s.add_argument("session")
    s.add_argument("--symbol", action="append", default=[], help="a symbol involved (repeatable)")
    s.add_argument("--entry-point", action="append", default=[], help="an entry point (repeatable)")
    s.add_argument("--pattern", action="append", default=[], help="a pattern or convention seen (repeatable)")
    s.add_argument("--file", action="append", default=[], help="a file read (repeatable)")
    s.add_argument("--evidence", help='JSON or @file: [{"tool": ..., "args": {...}, "slot": ...}]')

    s = _step(steps, "hypothesize", "in SEMANTIC: state hypotheses for the blocking slots (JSON)")
    s.add_argument("session")
    s.add_argument("hypotheses", help='JSON or @file: [{"slot", "value", "symbols": [...], "files": [...]}]')

    s = _step(steps, "verify", "in VERIFICATION: confirm a hypothesis with tool evidence (JSON)")
    s.add_argument("session")
    s.add_argument("slot")
    s.add_argument("evidence", help='JSON or @file: [{"tool": "find_definitions", "args": {"name": ...}}]')

    s = _step(steps, "show", "a session with its phase history (without SESSION: every session)")
    s.add_argument("session", nargs="?")

    s = _step(steps, "log", "the decision log as JSON Lines")
    s.add_argument("--session", help="only this session")
    s.add_argument("--step", help="only this step (start_session, set_query_frame, tool, submit_understanding, ...)")
    s.add_argument("--phase", choices=["FRAME", "EXPLORATION", "SEMANTIC", "VERIFICATION", "READY"],
                   help="only records whose step ended in this phase")
    s.add_argument("--risk-level", choices=["HIGH", "MEDIUM", "LOW"], help="only records at this risk level")
    s.add_argument("--since", help="only records from this time on (ISO 8601)")
    s.add_argument("--out", help="write to this file instead of standard output")

    s = _step(steps, "code", "run a code-intelligence tool on the repository")
    s.add_argument("tool", choices=TOOLS)
    s.add_argument("arg", nargs="?", help="name (definitions, references), pattern (search_text), text (query) "
                   "or path (get_symbols, analyze_structure)")
    s.add_argument("--path", help="only this file or folder")
    s.add_argument("--kind", help="only this kind of symbol (class, function, method, variable)")
    s.add_argument("--regex", action="store_true",
                   help="search_text: the pattern is a regular expression (RE2 syntax, linear time)")
    s.add_argument("--glob", help="search_text: only files matching (e.g. *.py)")
    s.add_argument("--limit", type=int)
    s.add_argument("--session", help="record the call in this session's decision log")


def _step(steps: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = steps.add_parser(name, help=help_text, description=help_text)
    add_common(parser)
    parser.add_argument("--repo", action="append", default=[], metavar="PATH",
                        help="repository root the code tools may read (repeatable; default: the current folder)")
    parser.add_argument("--code-cache", metavar="DIR", default=_default_cache(),
                        help="where `query` keeps each repository's symbol index between commands, so that only "
                        "changed files are embedded again (default: %(default)s)")
    parser.add_argument("--no-code-cache", action="store_true", help="index in memory, keep nothing")
    parser.set_defaults(handler=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if args.subcommand in ("show", "log"):  # these only read: they never create a store
        require_store(settings.store)
    llm = assistant_from_settings(settings) if args.subcommand == "frame" and args.slots is None else None
    inv = Investigator(open_store(settings.store, settings.busy_timeout_ms), Workspace(args.repo or ["."]),
                       embedder=settings.embedder, owner=settings.owner, llm=llm,
                       code_cache=None if args.no_code_cache else args.code_cache)
    try:
        out = _dispatch(inv, args)
    finally:
        inv.close()
        inv.store.close()
    if args.json or not isinstance(out, StepResult):
        if out is not None:
            emit_json(out.to_dict() if isinstance(out, StepResult) else out)
        return 0
    _print_step(out)
    return 0


def _dispatch(inv: Investigator, args: argparse.Namespace) -> Any:
    cmd = args.subcommand
    if cmd == "start":
        return inv.start_session(args.query, args.intent)
    if cmd == "frame":
        return inv.set_query_frame(args.session, None if args.slots is None else _json(args.slots, "slots"))
    if cmd == "submit":
        evidence = _json(args.evidence, "evidence") if args.evidence else []
        return inv.submit_understanding(args.session, symbols=args.symbol, entry_points=args.entry_point,
                                        patterns=args.pattern, files=args.file, evidence=evidence)
    if cmd == "hypothesize":
        return inv.submit_hypotheses(args.session, _json(args.hypotheses, "hypotheses"))
    if cmd == "verify":
        return inv.verify_hypothesis(args.session, args.slot, _json(args.evidence, "evidence"))
    if cmd == "show":
        if args.session is None:
            return [s.summary() for s in inv.list_sessions()]
        session = inv.get_session(args.session)
        return {**session.to_dict(), "ready_blockers": session.ready_blockers()}
    if cmd == "log":
        text = to_jsonl(inv.decision_log(args.session, step=args.step, phase=args.phase,
                                         risk_level=args.risk_level, since=args.since))
        if args.out:
            Path(args.out).write_text(text, "utf-8")
            print(f"wrote {text.count(chr(10))} records to {args.out}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return None
    return _code(inv, args)


def _code(inv: Investigator, args: argparse.Namespace) -> dict[str, Any]:
    key = {"find_definitions": "name", "find_references": "name", "search_text": "pattern", "query": "text",
           "get_symbols": "path", "analyze_structure": "path"}[args.tool]
    params: dict[str, Any] = {key: args.arg if key != "path" else (args.arg or args.path)}
    if key != "path" and args.path:
        params["path"] = args.path
    if args.kind and args.tool in ("find_definitions", "get_symbols", "query"):
        params["kind"] = args.kind
    if args.tool == "search_text":
        params.update(regex=args.regex, glob=args.glob)
    if args.limit is not None:
        params["limit"] = args.limit
    if params[key] is None and key != "path":
        raise InputError(f"{args.tool} needs a {key}: memroute investigate code {args.tool} {key.upper()}")
    return inv.tool(args.tool, params, session=args.session).to_dict()


def _default_cache() -> str:
    """``$XDG_CACHE_HOME/memroute/code`` (``~/.cache/memroute/code``): each command is a new process, and
    embedding a large repository's symbols takes tens of seconds."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "memroute" / "code")


def _json(value: str, what: str) -> Any:
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text("utf-8")
        except OSError as exc:
            raise InputError(f"cannot read {what} from {value[1:]}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not valid JSON: {exc}") from None


def _print_step(result: StepResult) -> None:
    data = result.to_dict()
    print(f"session {result.session_id}  step {result.step}  phase {result.phase.value}")
    for key, value in data.items():
        if key in ("session_id", "step", "phase", "next_step") or value in (None, [], {}):
            continue
        if key == "extraction_prompt":
            print(f"\n{value}\n")
        else:
            print(f"  {key}: {json.dumps(value, ensure_ascii=False)}")
    print(f"next: {result.next_step}")
