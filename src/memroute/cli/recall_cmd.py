"""`memroute recall`, `memroute eval recall`, `memroute bench recall`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memroute.cli.common import add_common, add_llm_options, emit_json, llm_from, require_store, settings_from
from memroute.embed import EMBEDDERS
from memroute.memory import Memory
from memroute.retrieval import RecallOptions, Strategy
from memroute.retrieval.judge_fit import FEATURE_SETS, L2S

_DEFAULTS = RecallOptions()


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("recall", help="recall the memories that matter for a message (the per-turn pipeline)")
    p.add_argument("text")
    p.add_argument("--session", help="the conversation the message belongs to (its recent turns are read)")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--strategy", choices=[s.value for s in Strategy], help="force a strategy")
    p.add_argument("--now", help="when the message is sent (ISO 8601; default: now)")
    p.add_argument("--no-rerank", action="store_true", help="skip the local reranker")
    p.add_argument("--pack", action="store_true", help="print the [EPISODE_EVIDENCE] memory pack")
    p.add_argument("--trace", action="store_true", help="show the full trace: the query analysis, expanded "
                   "queries, every search and the candidates with their scores")
    add_common(p)
    p.set_defaults(handler=_recall)

    p = groups["eval"].add("recall", "recall quality on LoCoMo-format data, with BM25 and vector baselines")
    p.add_argument("--data", required=True, help="the locomo_retrieval folder (sessions.jsonl, qa.jsonl)")
    p.add_argument("--loo", action="store_true", help="also report leave-one-conversation-out reranker figures")
    p.add_argument("--fit", action="store_true", help="fit this embedder's reranker on all conversations and "
                   "write its entry of the weights the package ships (retrieval/rerank_weights.json)")
    p.add_argument("--fit-judge", action="store_true", help="fit the relevance judge of this embedder on LoCoMo "
                   "and the everyday train split and write it (retrieval/judge_weights.json)")
    p.add_argument("--judge-features", nargs="+", choices=list(FEATURE_SETS), metavar="SET",
                   help="with --fit-judge or --loo: the judge's feature sets to choose among (one holds the selection "
                   f"fixed; default: all of {', '.join(FEATURE_SETS)})")
    p.add_argument("--judge-l2", nargs="+", type=float, metavar="L2", help="with --fit-judge or --loo: the judge's "
                   f"L2 strengths to choose among (one holds it fixed; default: {' '.join(f'{x:g}' for x in L2S)})")
    p.add_argument("--embedder", default="use-m3", choices=list(EMBEDDERS))
    p.add_argument("--k-per-query", type=int, default=_DEFAULTS.k_per_query)
    p.add_argument("--max-candidates", type=int, default=_DEFAULTS.max_candidates)
    p.add_argument("--fusion", choices=["minmax", "rrf"], default="minmax")
    p.add_argument("--no-rerank", action="store_true")
    p.add_argument("--workdir", help="keep the per-conversation stores here and reuse them on the next run")
    p.add_argument("--store", metavar="URL", help="a postgresql:// database to hold the conversations instead of "
                   "SQLite files: a schema each (locomo_<sample id>_<embedder>), reused on the next run")
    p.add_argument("--limit", type=int, help="only the first N questions (bounds the cost of an --llm run)")
    add_llm_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=_eval)

    p = groups["bench"].add("recall", "latency of a full recall (no LLM) at N memories, ingest rate and RSS")
    p.add_argument("--memories", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--keep", metavar="DIR", help="build the stores in DIR and leave them there (default: a temporary "
                   "folder, removed); a store of N memories already there is measured again, not filled again")
    p.add_argument("--embedder", default="use-m3", choices=list(EMBEDDERS), help="the encoder of the store and the "
                   "queries (up to 20,000 memories every one is embedded; past that, the corpus's distinct texts are)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=_bench)


def _recall(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    opts = RecallOptions(limit=args.limit, strategy=args.strategy, rerank=not args.no_rerank)
    require_store(settings.store)
    with Memory.open(settings=settings) as mem:
        result = mem.recall(args.text, session=args.session, now=args.now, options=opts)
    if args.json:
        emit_json(result.to_dict(trace=args.trace))
        return 0
    t = result.trace
    print(f"strategy {t.strategy}; {len(t.queries)} quer{'y' if len(t.queries) == 1 else 'ies'}; "
          f"{len(t.candidates)} candidates; {t.stages_ms.get('total', 0.0):.1f} ms; "
          f"inject: {'yes' if result.should_inject else 'no'}")
    for note in t.notes:
        print(f"note: {note}")
    for r in t.llm:
        what = "answer used" if r["used_llm"] else f"rule result ({r['fallback']}: {r['detail']})"
        print(f"llm {r['step']}: {what}; {r['latency_ms']} ms, {r['tokens_in']}+{r['tokens_out']} tokens")
    for m in result.memories:
        when = m.memory.occurred_at.date().isoformat() if m.memory.occurred_at else "-"
        print(f"{m.score:.3f} {m.relevance:<6} {when} {m.memory.id}  {m.memory.text[:100]}\n       {m.reason}")
    if args.pack:
        print(result.memory_pack())
    if args.trace:
        print("trace:")
        print(json.dumps(result.to_dict(trace=True).get("trace"), ensure_ascii=False, indent=2, default=str))
    return 0


def _eval(args: argparse.Namespace) -> int:
    from memroute.eval.recall_eval import evaluate

    opts = RecallOptions(k_per_query=args.k_per_query, max_candidates=args.max_candidates, fusion=args.fusion,
                         rerank=not args.no_rerank)
    result = evaluate(args.data, opts, embedder=args.embedder, loo=args.loo, fit=args.fit, workdir=args.workdir,
                      llm=llm_from(args), limit=args.limit, store_url=args.store, fit_judge=args.fit_judge,
                      judge_features=args.judge_features, judge_l2=args.judge_l2)
    if args.json:
        emit_json(result)
        return 0
    rows = [("memroute", result), *((f"{k} only" if k != "fused_no_rerank" else "fused, no rerank", v)
                                    for k, v in result["baselines"].items())]
    if "leave_one_conversation_out" in result:
        rows.append(("leave-one-conv-out", result["leave_one_conversation_out"]))
    print(f"{result['questions']} questions; latency p50 {result['latency_ms']['p50']} ms, "
          f"p95 {result['latency_ms']['p95']} ms")
    print(f"{'':20}{'recall@5':>9}{'recall@10':>10}{'hit@5':>7}{'mrr':>7}{'ndcg@10':>8}   recall@5 by category")
    for name, r in rows:
        cats = "  ".join(f"{k.split()[1]} {v['recall@5']:.3f}" for k, v in r["by_category"].items())
        print(f"{name:20}{r['recall@5']:>9.3f}{r['recall@10']:>10.3f}{r['hit@5']:>7.3f}{r['mrr']:>7.3f}"
              f"{r['ndcg@10']:>8.3f}   {cats}")
    if "llm" in result:
        print(_llm_line(result["llm"]))
    if "fitted" in result:
        print(f"reranker weights written to {result['fitted']['path']}")
    for name, shares in (result.get("injection") or {}).items():
        if isinstance(shares, dict) and "answer_injected" in shares:
            print(f"judge ({name}): " + ", ".join(f"{k} {v}" for k, v in shares.items()))
    if "fitted" in result.get("injection", {}):
        print(f"judge written to {result['injection']['fitted']['path']}")
    return 0


def _llm_line(usage: dict[str, Any]) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in usage["fallback_reasons"].items()) or "none"
    return (f"LLM: {usage['calls']} calls, {usage['tokens_in']} tokens in, {usage['tokens_out']} out; call latency "
            f"p50 {usage['latency_ms']['p50']} ms, p95 {usage['latency_ms']['p95']} ms; {usage['fallbacks']} "
            f"fallbacks ({reasons})")


def _bench(args: argparse.Namespace) -> int:
    from memroute.eval.recall_bench import run_recall_bench

    return run_recall_bench(args.memories, args.queries, args.json, keep=args.keep, embedder=args.embedder)
