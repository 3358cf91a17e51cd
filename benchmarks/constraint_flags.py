"""The everyday set with each question's constraint facts: is the answering memory among the candidates, flagged by
the constraint search (``RecallTrace.constraints``), in the first 3, injected (docs/benchmarks.md, "constraints by
meaning").

    PYTHONPATH=src python -m benchmarks.constraint_flags ENCODER train|dev OUT.json
"""

from __future__ import annotations

import json
import sys
import time

from memroute.eval.everyday import data_path, load_everyday
from memroute.eval.everyday_eval import run_everyday, summarise

if __name__ == "__main__":
    enc, split, out = sys.argv[1], sys.argv[2], sys.argv[3]
    t0 = time.time()
    outcomes = run_everyday(load_everyday(data_path(split)), enc)
    rows = []
    for o in outcomes:
        q, tr = o.question, o.recall.trace
        rows.append({"id": q.id, "type": q.type, "answers": sorted(q.answers),
                     "cand": bool({c.id for c in tr.candidates} & q.answers), "flagged": sorted(tr.constraints),
                     "flagged_ans": bool(set(tr.constraints) & q.answers),
                     "top3": bool(set(o.ranked[:3]) & q.answers), "injected": list(o.injected),
                     "inj_ans": bool(set(o.injected) & q.answers)})
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"summary": summarise(outcomes), "rows": rows}, f, ensure_ascii=False)
    cons = [r for r in rows if r["type"] == "constraint"]
    print(f"{enc} {split}: constraint questions {len(cons)}: answer a candidate {sum(r['cand'] for r in cons)}, "
          f"flagged {sum(r['flagged_ans'] for r in cons)}, in the first 3 {sum(r['top3'] for r in cons)}, "
          f"injected {sum(r['inj_ans'] for r in cons)}; flags on other memories "
          f"{sum(len(set(r['flagged']) - set(r['answers'])) for r in rows)} ({round(time.time() - t0, 1)} s; {out})")
    print(f"PYTHONPATH=src python -m benchmarks.constraint_flags {enc} {split} {out}")
