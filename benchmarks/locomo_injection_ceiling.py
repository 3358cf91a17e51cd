"""How much of LoCoMo any relevance judge can inject (docs/benchmarks.md, everyday recall, "Twenty-second pass").

Issue 21 asks, on LoCoMo, that the answering memory be injected for >= 0.85 of answerable questions with >= 0.80
of injected memories answering. This prints two upper bounds for that, on the shipped pipeline's recalls of every
LoCoMo conversation (in sample: nothing here is a result, each figure is the most a rule could reach):

* ``hit@k``: the share of answerable questions with an evidence turn among the pipeline's first ``k`` (a judge
  that knew the answers would inject exactly those; the judge reads the first five, ``RecallOptions.limit``);
* the judge's ceiling: inject the first ``k`` memories whose probability passes one cut-off, the cut-off chosen on
  the same questions it is scored on, for the shipped judge and for a judge refitted on these LoCoMo questions
  alone with every feature: the most answers injected at precision >= 0.80.

    OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.locomo_injection_ceiling --embedder use-m3 \
        --workdir /tmp/ceiling [--data ../shared/data/locomo_retrieval] [--json]

The stores are built in ``--workdir`` on first use (as ``memroute eval recall`` builds them) and reused.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.embed import get_embedder
from memroute.embed.tokens import ranking_id
from memroute.eval.locomo import load_locomo
from memroute.eval.recall_eval import open_store, run_conversation
from memroute.retrieval import RecallOptions, judge
from memroute.retrieval.judge_fit import JudgedQuestion, fit_judge

HIT_AT = (1, 2, 3, 5, 10, 20, 30)
FIRST_K = (1, 2, 3, 5)
PRECISION = 0.80


def ceiling(questions: Sequence[JudgedQuestion], probs: Sequence[npt.NDArray[np.float64]]) -> dict[int, Any]:
    """Per ``k``: the most answers injected (share of ``questions``) by "the first k whose probability passes t"
    at precision >= :data:`PRECISION`, over every t among the probabilities, with that precision and t."""
    cuts = np.unique(np.round(np.concatenate(probs), 3))
    out: dict[int, Any] = {}
    for k in FIRST_K:
        best: dict[str, float] = {"injected": 0.0}
        for t in cuts:
            answered = good = injected = 0
            for q, p in zip(questions, probs, strict=True):
                chosen = np.zeros(len(p), dtype=bool)
                chosen[:k] = p[:k] >= t
                labelled = chosen & ~np.isnan(q.y)
                answered += bool((chosen & (q.y == 1)).any())
                good += int((labelled & (q.y == 1)).sum())
                injected += int(labelled.sum())
            if injected and good / injected >= PRECISION and answered / len(questions) > best["injected"]:
                best = {"injected": round(answered / len(questions), 4), "precision": round(good / injected, 4),
                        "cut_off": float(t)}
        out[k] = best
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedder", default="use-m3")
    ap.add_argument("--data", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data") + "/locomo_retrieval")
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    a.workdir.mkdir(parents=True, exist_ok=True)
    questions: list[JudgedQuestion] = []
    hits: dict[int, list[bool]] = {k: [] for k in HIT_AT}
    for conv in load_locomo(a.data):
        mem = open_store(conv, a.workdir, a.embedder)
        for run in run_conversation(mem, conv, RecallOptions()):  # the judge's view: the first five
            q = run.judged.judged(None)
            if not q.answerable or not run.evidence:
                continue
            questions.append(q)
            for k in HIT_AT:
                hits[k].append(bool(set(run.final[:k]) & run.evidence))
        mem.close()
    shipped = judge.judge_for(ranking_id(get_embedder(a.embedder)))
    result: dict[str, Any] = {
        "embedder": a.embedder, "answerable_questions": len(questions),
        "hit@k": {k: round(float(np.mean(v)), 4) for k, v in hits.items()},
        "first_five_hold_an_answer": round(float(np.mean([(q.y == 1).any() for q in questions])), 4),
    }
    if shipped is not None:
        result["shipped_judge"] = ceiling(questions, [shipped.probability(q.x) for q in questions])
    refit = fit_judge(questions, "LoCoMo in sample", None, 1.0)
    result["judge_refitted_in_sample"] = ceiling(questions, [refit.probability(q.x) for q in questions])
    command = (f"OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.locomo_injection_ceiling "
               f"--embedder {a.embedder} --workdir {a.workdir} --data {a.data}")
    if a.json:
        print(json.dumps({**result, "command": command}))
        return 0
    print(f"{a.embedder}: {len(questions)} answerable LoCoMo questions")
    print("  an answer among the first k: " + ", ".join(f"k={k} {v}" for k, v in result["hit@k"].items()))
    print(f"  among the five the judge reads: {result['first_five_hold_an_answer']}")
    for name in ("shipped_judge", "judge_refitted_in_sample"):
        if name in result:
            print(f"  {name}, most injected at precision >= {PRECISION}: " + ", ".join(
                f"first {k}: {v['injected']}" + (f" (precision {v['precision']}, cut-off {v['cut_off']:.3f})"
                                                 if "cut_off" in v else "") for k, v in result[name].items()))
    print(f"  command: {command}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
