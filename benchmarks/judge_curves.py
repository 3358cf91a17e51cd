"""The judge's held-out trade-off on training data, to tell a ranking change from a cut-off that moved
(docs/benchmarks.md, everyday recall, "Twentieth pass").

``keep`` runs ``memroute eval recall ARGS`` (give it ``--fit-judge`` or ``--loo``, and run it on a copy of ``src``:
``--fit-judge`` writes the judge) and keeps the judge's training questions and their groups in ``OUT.pkl``.
``curves`` refits the judge (feature set, L2) without each group (``judge_fit.select``'s folds), pools the held-out
probabilities and prints each data set's shares at common cut-offs (high = medium = c, relative 0), one run per
file, so that two rankers' judges can be compared at the same injection. Training data only.

    PYTHONPATH=COPY/src python -m benchmarks.judge_curves keep OUT.pkl eval recall --data DIR --embedder E \
        --fit-judge ...
    PYTHONPATH=src python -m benchmarks.judge_curves curves [--features seed] [--l2 1] A.pkl B.pkl
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.eval import judge_eval
from memroute.retrieval import judge_fit
from memroute.retrieval.judge_fit import FEATURE_SETS, JudgedQuestion, Selection, _folds, _Padded, fit_judge

CUTS = (0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65)


def keep(out: str, argv: list[str]) -> int:
    def kept(every: Sequence[JudgedQuestion], groups: Sequence[str], **kw: Any) -> Selection:
        with open(out, "wb") as f:
            pickle.dump((every, groups), f)
        return judge_fit.select(every, groups, **kw)

    setattr(judge_eval, "select", kept)  # noqa: B010 (the eval's own name for it, replaced for this run)
    from memroute.cli import main
    return main(argv)


def curves(path: str, features: str, l2: float) -> None:
    with open(path, "rb") as f:
        every, groups = pickle.load(f)
    keys = _folds(every, groups, 4)
    probs: list[npt.NDArray[np.float64]] = [np.zeros(0)] * len(every)
    for key in dict.fromkeys(keys):
        model = fit_judge([q for q, k in zip(every, keys, strict=True) if k != key], "", FEATURE_SETS[features], l2)
        for i, (q, k) in enumerate(zip(every, keys, strict=True)):
            if k == key and len(q.y):
                probs[i] = model.probability(q.x)
    names = list(dict.fromkeys(q.dataset for q in every))
    sets = {d: _Padded([q for q in every if q.dataset == d],
                       [p for q, p in zip(every, probs, strict=True) if q.dataset == d]) for d in names}
    print(path)
    for c in CUTS:
        cells = []
        for d in names:
            s = sets[d].shares(c, c, 0.0)
            cells.append(f"{d} " + " / ".join("-" if v is None else f"{v:.3f}" for v in s.values()))
        print(f"  c {c:.2f}: " + " | ".join(cells) + "   (injected / precision / abstention)")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "keep":
        sys.exit(keep(sys.argv[2], sys.argv[3:]))
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["curves"])
    ap.add_argument("--features", default="seed", choices=sorted(FEATURE_SETS))
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    for p in a.files:
        curves(p, a.features, a.l2)
