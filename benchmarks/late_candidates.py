"""Late interaction on the first K candidates only: what it keeps of the gain, held out.

MaxSim's cost per recall is the read of the candidates' token vectors and one product with them (docs/benchmarks.md,
the thirteenth everyday-recall pass): on the first K candidates of the fused order only, the rest reading as the
column's mean, it costs about K/50 of that. This runs the pipeline once with late interaction on (the candidates'
features and MaxSim as the recalls trace them; the stores of ``--workdir`` are reused or built), then for each K
refits the pair's reranker as ``memroute eval recall --loo`` does (its ``FIT_SETTINGS``: setting B) with MaxSim kept
for the first K candidates: LoCoMo leave one conversation out (recall@5, MRR) and everyday train's first answers
held out by store. Nothing is written. Recall itself scores the first :data:`memroute.retrieval.late.CANDIDATES`
only (the fourteenth pass built this); for this run it scores the first ``max(K)``.

    OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.late_candidates \\
        --data ../shared/data/locomo_retrieval --workdir /tmp/lpair [--k 50 30 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def first_k(late: np.ndarray, k: int) -> np.ndarray:
    """``late`` with every candidate past the first ``k`` unscored (NaN: the column's mean to the reranker)."""
    out = late.copy()
    out[k:] = np.nan
    return out


def held_out(data: Path, workdir: Path, ks: Sequence[int], embedder: str = "use-m3+e5-small") -> dict[int, Any]:
    from memroute.eval import recall_eval
    from memroute.eval.locomo import load_locomo
    from memroute.retrieval import RecallOptions, late

    opts = RecallOptions()
    convs = load_locomo(data)
    workdir.mkdir(parents=True, exist_ok=True)
    runs = []
    shipped, late.CANDIDATES = late.CANDIDATES, max(ks)  # the traces score every K asked for
    try:
        for conv in convs:
            mem = recall_eval.open_store(conv, workdir, embedder)
            try:
                runs += recall_eval.run_conversation(mem, conv, opts)
            finally:
                mem.close()
        every = recall_eval.everyday_runs(embedder, opts.max_candidates)
    finally:
        late.CANDIDATES = shipped
    settings = recall_eval.FIT_SETTINGS.get(embedder, recall_eval.FitSettings())
    out: dict[int, Any] = {}
    for k in ks:
        rk = [replace(r, late=first_k(r.late, k)) for r in runs]
        ek = [replace(e, late=first_k(e.late, k)) for e in every]
        rows = []
        for conv in convs:
            model = recall_eval.fit_model([r for r in rk if r.sample_id != conv.sample_id], ek, settings,
                                          opts.max_candidates, "")
            rows.extend(recall_eval.rescore([r for r in rk if r.sample_id == conv.sample_id], model,
                                            opts.max_candidates))
        summary = recall_eval.summarise(rows)
        first = 0
        for store in dict.fromkeys(e.store for e in ek):
            model = recall_eval.fit_model(rk, [e for e in ek if e.store != store], settings, opts.max_candidates, "")
            first += recall_eval.first_answers(model, [e for e in ek if e.store == store])[0]
        out[k] = {"recall@5": summary["recall@5"], "mrr": summary["mrr"], "train_first": first,
                  "train_answerable": sum(e.answerable for e in ek)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="the locomo_retrieval folder")
    p.add_argument("--workdir", required=True, help="the per-conversation stores (reused, else built)")
    p.add_argument("--k", type=int, nargs="+", default=[50, 30, 20])
    p.add_argument("--embedder", default="use-m3+e5-small")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from memroute.embed import get_embedder
    from memroute.embed.tokens import token_source

    if token_source(get_embedder(args.embedder)) is None:
        print(f"{args.embedder} gives no token vectors: late interaction is off (MEMROUTE_LATE_INTERACTION)",
              file=sys.stderr)
        return 2
    report = held_out(Path(args.data), Path(args.workdir), args.k, args.embedder)
    if args.json:
        print(json.dumps(report))
    else:
        for k, r in report.items():
            print(f"first {k:>3} candidates: LoCoMo leave-one-out recall@5 {r['recall@5']}, MRR {r['mrr']}; "
                  f"train first answers {r['train_first']} of {r['train_answerable']} held out by store")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
