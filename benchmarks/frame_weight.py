"""Replay Japanese and Korean routing sets under values of ``AgentRouter.frame_weight`` and ``clause_weight``
(the share of a message's scores taken from its frame, when it carries a payload or when its request follows
subordinate clauses; docs/benchmarks.md, routing, the twentieth and twenty-first ja/ko passes).

Each value runs :func:`memroute.eval.route_eval.run_route_eval` (its ``frame_weight``) as ``memroute eval
route`` does (default configuration but for the weight), so a value's figures equal the CLI's with that
weight. ``--split train`` reads ko / ja train (their own catalogue) and JMultiWOZ-TC train (``--jmultiwoz``
dialogues spread over the file, as the sixteenth to nineteenth passes did); ``dev`` and ``test`` read the whole
splits (JMultiWOZ-TC's test is not read here). Also prints the share of ja/ko user turns that carry a payload
or a main clause after subordinate ones (and so get the extra encoding). ``--clause-weights`` runs every
clause weight under every frame weight (without it, the clause weight is the frame weight, the default).

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.frame_weight --split train --weights 0 0.25 0.5 0.75
    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.frame_weight --split train --weights 0.5 --clause-weights 0 0.5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def frame_share(data: Path, sample: int | None) -> tuple[int, int, int]:
    """(ja/ko user turns with a payload, those with a frame of either kind, ja/ko user turns)."""
    from memroute.analysis.payload import find_payload
    from memroute.eval.datasets import load_dialogues
    from memroute.eval.route_eval import spread_sample
    from memroute.routing.composite import AgentRouter
    from memroute.text.language import detect_language

    dialogues = load_dialogues(data)
    if sample is not None:
        dialogues = spread_sample(dialogues, sample)
    texts = [t.utterance for d in dialogues for t in d.turns if t.utterance.strip()]
    jako = [t for t in texts if detect_language(t) in ("ja", "ko")]
    router = AgentRouter(embedder=None, bank=None)
    return (sum(find_payload(t) is not None for t in jako), sum(router.frame_of(t) is not None for t in jako),
            len(jako))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.tune_ja_ko_rule import ja_ko_sets
    from memroute.eval.route_eval import run_route_eval

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("train", "dev", "test"), default="train")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75])
    parser.add_argument("--clause-weights", type=float, nargs="+",
                        help="clause weights to run under every frame weight (default: the frame weight)")
    parser.add_argument("--jmultiwoz", type=int, default=250, help="JMultiWOZ-TC train dialogues (spread sample)")
    parser.add_argument("--out", type=Path, help="append each result as a JSON line here")
    args = parser.parse_args(argv)
    for name, (data, candidates, sample) in ja_ko_sets(args.split, args.jmultiwoz).items():
        with_payload, with_frame, turns = frame_share(data, sample)
        print(f"{name} {args.split}: {with_payload} of {turns} ja/ko turns carry a payload "
              f"({with_payload / max(turns, 1):.1%}), {with_frame} a frame of either kind "
              f"({with_frame / max(turns, 1):.1%})", flush=True)
        grid = [(w, c) for w in args.weights for c in (args.clause_weights or [None])]
        for w, c in grid:
            report = run_route_eval(data, candidates, split=args.split, sample=sample, frame_weight=w,
                                    clause_weight=c)
            acc = report.accuracy
            row = {"set": name, "split": args.split, "w": w, "c": c, "turns": report.turns, "all": acc["all"],
                   "switch_new": acc.get("switch_new"), "stay": acc.get("stay"), "first": acc.get("first"),
                   "wrong": report.errors}
            print(json.dumps(row), flush=True)
            if args.out is not None:
                with args.out.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
