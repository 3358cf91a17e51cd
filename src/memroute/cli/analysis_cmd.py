"""`memroute analyze`, `memroute eval analysis`, `memroute bench analysis`."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memroute.analysis import analyze
from memroute.cli.common import emit_json
from memroute.errors import InputError

_BENCH_NOW = datetime(2025, 3, 12, 15, 0, tzinfo=UTC)


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("analyze", help="analyse one message: language, references, continuation, time, keywords",
                       description="Analyse one message in its conversation (rule-based, deterministic).")
    p.add_argument("text")
    p.add_argument("--history", help="the turns before it: a JSON list or JSON Lines of {role, text}")
    p.add_argument("--now", help="reference time for 'yesterday', 'last week' (ISO 8601; default: now, UTC)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=_analyze)

    p = groups["eval"].add("analysis", "accuracy of query analysis per language and field on the labelled set")
    p.add_argument("--data", type=Path, help="folder with en.jsonl, ja.jsonl, ko.jsonl (default: packaged set)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output (includes every error)")
    p.add_argument("--errors", type=int, default=0, metavar="N", help="print the first N errors")
    p.set_defaults(handler=_eval)

    p = groups["bench"].add("analysis", "time query analysis on 10k real messages from the shared data")
    p.add_argument("--data", type=Path, help="the shared data folder (default: /work/shared/data)")
    p.add_argument("-n", type=int, default=10_000, help="number of messages")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=_bench)


def _read_history(path: str) -> list[Any]:
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read history file {path}: {exc}") from None
    stripped = raw.strip()
    if not stripped:
        return []
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a JSON list of {{role, text}} objects")
        return data
    out = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
    return out


def _analyze(args: argparse.Namespace) -> int:
    history = _read_history(args.history) if args.history else []
    result = analyze(args.text, history, args.now).to_dict()
    if args.json:
        emit_json(result)
        return 0
    for key in ("language", "continuation", "continuation_cue", "needs_context", "query_type", "intent",
                "question_category", "importance"):
        print(f"{key}: {result[key]}")
    tr = result["time_range"]
    print("time_range: " + ("none" if tr is None else f"{tr['start']} .. {tr['end']} ({tr['expression']}"
                            + (", fuzzy)" if tr["fuzzy"] else ")")))
    print("keywords: " + ", ".join(result["keywords"]))
    for ref in result["references"]:
        print(f"reference: {ref['type']} {ref['surface']!r} -> {ref['resolved']}")
    for i, part in enumerate(result["parts"], 1):
        print(f"part {i}: {part}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from memroute.eval.analysis_eval import FIELDS, TARGET, evaluate

    report = evaluate(args.data)
    if args.json:
        emit_json(report.to_dict())
        return 0
    print(f"{'lang':<5}" + "".join(f"{f:>15}" for f in FIELDS))
    for lang, fields in report.scores.items():
        print(f"{lang:<5}" + "".join(f"{fields[f].accuracy:>9.3f} /{fields[f].total:>4}" for f in FIELDS))
    print(f"target {TARGET:.2f} on every field: {'met' if report.all_at_target else 'NOT met'}")
    for err in report.errors[: args.errors]:
        print(json.dumps(err, ensure_ascii=False, default=str), file=sys.stderr)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from memroute.eval.analysis_eval import SHARED_DATA, bench_texts, run_bench

    data = args.data or SHARED_DATA
    if not data.exists():
        print(f"memroute: error: shared data folder {data} not found; pass --data DIR", file=sys.stderr)
        return 2
    result = run_bench(bench_texts(data, args.n), _BENCH_NOW)
    if args.json:
        emit_json(result.to_dict())
        return 0
    print(f"messages: {result.n}")
    print(f"p50: {result.p50_ms:.3f} ms  p95: {result.p95_ms:.3f} ms  p99: {result.p99_ms:.3f} ms  "
          f"mean: {result.mean_ms:.3f} ms (wall clock)")
    print(f"CPU time p50: {result.cpu_p50_ms:.3f} ms  p95: {result.cpu_p95_ms:.3f} ms  p99: {result.cpu_p99_ms:.3f} ms")
    for lang, stats in result.by_language.items():
        print(f"  {lang}: n={stats['n']:.0f} p50={stats['p50_ms']:.3f} ms p95={stats['p95_ms']:.3f} ms")
    return 0
