"""`memroute eval everyday`: recall as a user sees it, on the hand-written everyday set."""

from __future__ import annotations

import argparse
from typing import Any

from memroute.cli.common import add_llm_options, emit_json, llm_from
from memroute.embed import EMBEDDERS
from memroute.retrieval import RecallOptions

_COLUMNS = (("answer_in_top3", "top-3"), ("answer_injected", "injected"), ("precision", "precision"),
            ("abstention", "abstain"), ("newest_first", "newest"), ("stale_injected", "stale inj."))


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = groups["eval"].add("everyday", "recall on small personal stores (en/ja/ko, cross-language): answer "
                                       "injected, precision, abstention, newest fact first")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--split", choices=["train", "dev"], default="dev",
                       help="a split of the shipped set (default: dev)")
    where.add_argument("--data", metavar="PATH", help="a file in the set's format (eval/data/everyday/README.md)")
    p.add_argument("--embedder", default="use-m3", choices=list(EMBEDDERS))
    p.add_argument("--no-rerank", action="store_true", help="skip the local reranker")
    p.add_argument("--misses", action="store_true", help="also print each question that missed a figure, with "
                   "what was returned (with --json: every question's result under \"details\")")
    add_llm_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=_eval)


def _eval(args: argparse.Namespace) -> int:
    from memroute.eval.everyday_eval import evaluate_everyday

    result = evaluate_everyday(args.data, args.split, args.embedder, RecallOptions(rerank=not args.no_rerank),
                               llm=llm_from(args), details=args.misses)
    if args.json:
        emit_json(result)
        return 0
    cfg = result["config"]
    source = cfg["data"] if cfg["split"] is None else f"{cfg['split']} split"
    print(f"everyday recall, {source}: {result['questions']} questions over {cfg['stores']} stores "
          f"({cfg['memories']} memories); embedder {cfg['embedder']}; latency p50 {result['latency_ms']['p50']} "
          f"ms, p95 {result['latency_ms']['p95']} ms")
    print(f"{'':16}{'questions':>10}" + "".join(f"{title:>16}" for _, title in _COLUMNS))
    rows = [("all", result), *result["by_language"].items(), *result["by_type"].items()]
    for name, r in rows:
        print(f"{name:16}{r['questions']:>10}" + "".join(f"{_cell(r[key]):>16}" for key, _ in _COLUMNS))
    if "llm" in result:
        u = result["llm"]
        print(f"LLM: {u['calls']} calls, {u['tokens_in']} tokens in, {u['tokens_out']} out, {u['fallbacks']} "
              "fallbacks")
    for d in result.get("details", []):
        missed = [k for k, ok in d["ok"].items() if not ok]
        if missed:
            print(f"\n{d['id']} [{d['type']}] {d['text']}\n  missed: {', '.join(missed)}")
            for m in d["returned"]:
                print(f"  {'*' if m['injected'] else ' '} {m['label']:<8}{m['relevance']:<7}p {m['score']:.3f} "
                      f"cos {m['cosine']:.2f}  {m['text'][:70]}")
            for note in d["notes"]:
                print(f"  note: {note}")
    return 0


def _cell(rate: dict[str, Any]) -> str:
    if not rate["of"]:
        return "-"
    return f"{rate['rate']:.2f} {rate['hits']}/{rate['of']}"
