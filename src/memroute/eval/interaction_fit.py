"""Fitting the question-memory interaction model (:mod:`memroute.retrieval.interaction`) of one encoder.

Training pairs are what a recall's judge sees: the first :data:`FIRST` candidates of each question in the
final order, with the query's vector and the candidate's. LoCoMo (``../shared/data/locomo_retrieval``): a
candidate answers when it is an evidence turn, every other retrieved turn is a negative. The everyday set's
train split: a candidate answers when it is one of the question's answering memories; an unanswerable
question's candidates are all negatives; a stale or merely related memory is left out. The data sets weigh
the same (LoCoMo has ten times the candidates).

The fit is a logistic regression over :func:`~memroute.retrieval.interaction.pair_features` (standardised
for the fit, stored in the raw scale), L2 :data:`L2` on every weight but the cosine's and the bias (a ridge
towards the plain cosine); :data:`L2` was chosen on the everyday train split with each store held out (the
judge refitted without it, as ``docs/benchmarks.md``, "Seventh pass", describes). The everyday dev split is
never read. ``python -m memroute.eval.interaction_fit --data DIR [--embedder NAME] [--limit N]`` fits and
writes the encoder's entry of ``retrieval/interaction_weights.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memroute.embed import get_embedder
from memroute.errors import InputError
from memroute.eval import recall_eval
from memroute.eval.everyday import data_path, load_everyday
from memroute.eval.locomo import load_locomo
from memroute.memory import Memory
from memroute.retrieval import RecallOptions, interaction
from memroute.retrieval.interaction import InteractionModel, pair_features
from memroute.retrieval.trace import RecallTrace

FIRST = 10
"""Candidates per question that enter the fit (the judge reads the first five to ten)."""
L2 = 10_000.0
"""Ridge strength on the standardised per-dimension weights (chosen among 300, 3,000, 10,000 and 30,000)."""
WEIGHTS_PATH = Path(__file__).resolve().parent.parent / "retrieval" / interaction.WEIGHTS_FILE


@dataclass(frozen=True, slots=True)
class Pairs:
    """One question's training rows."""

    dataset: str
    group: str
    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    """1: answers; 0: does not; nan: left out."""


def question_pairs(mem: Memory, owner: str, trace: RecallTrace, answers: Collection[str], dataset: str,
                   group: str, ignore: Collection[str] = ()) -> Pairs | None:
    """The first :data:`FIRST` candidates of one recall as rows (None when it has none); the query vector is
    the recall's first query embedded again, as the search embedded it."""
    cands = sorted((c for c in trace.candidates if c.final_rank is not None), key=lambda c: c.final_rank or 0)
    cands = cands[:FIRST]
    if not cands or not trace.queries:
        return None
    first = trace.queries[0]
    text = str(first.get("vector_text") or first["text"])[:2000]
    qvec = mem.embedder.embed([text], side="query")[0]
    vectors = mem.store.get_vectors([c.id for c in cands], owner)
    if any(c.id not in vectors for c in cands):
        return None
    x = pair_features(qvec, np.vstack([vectors[c.id] for c in cands]))
    y = np.array([np.nan if c.id in ignore else float(c.id in answers) for c in cands])
    return Pairs(dataset, group, x, y)


def collect(data_dir: str | Path, embedder: str, limit: int | None = None) -> list[Pairs]:
    """LoCoMo's questions (the first ``limit``) and the everyday train split's, recalled with the defaults."""
    out: list[Pairs] = []
    model = get_embedder(embedder)
    with tempfile.TemporaryDirectory(prefix="memroute-interaction-") as tmp:
        for store in load_everyday(data_path("train")):
            with Memory.open(f"sqlite:///{Path(tmp) / f'{store.id}.db'}", owner=store.id, embedder=model) as mem:
                mem.remember_many([{"id": m.id, "text": m.text, "occurred_at": m.occurred_at}
                                   for m in store.memories])
                for q in store.questions:
                    r = mem.recall(q.text, recent_messages=list(q.recent), now=q.now)
                    row = question_pairs(mem, store.id, r.trace, q.answers, "everyday", store.id, q.stale | q.related)
                    if row is not None:
                        out.append(row)
        convs = load_locomo(data_dir)
        if limit is not None:
            convs = [replace(convs[0], questions=convs[0].questions[:limit])]
        opts = replace(RecallOptions(), limit=FIRST)
        for conv in convs:
            mem = recall_eval.open_store(conv, Path(tmp), embedder)
            try:
                for lq in conv.questions:
                    r = mem.recall(lq.text, now=conv.now, options=opts)
                    row = question_pairs(mem, conv.sample_id, r.trace, lq.evidence, "locomo", conv.sample_id)
                    if row is not None:
                        out.append(row)
            finally:
                mem.close()
    return out


def fit(pairs: Sequence[Pairs], l2: float = L2, fitted_on: str = "", iterations: int = 15) -> InteractionModel:
    """The logistic model of the module docstring on ``pairs`` (Newton's method)."""
    rows = [(p.dataset, p.x[k], p.y[k]) for p in pairs for k in range(len(p.y)) if not np.isnan(p.y[k])]
    y = np.array([r[2] for r in rows])
    if not 0 < y.sum() < len(y):
        raise InputError("the interaction model needs candidates that answer and candidates that do not")
    x = np.vstack([r[1] for r in rows])
    sets = [r[0] for r in rows]
    count = {d: sets.count(d) for d in set(sets)}
    weight = np.array([len(rows) / (len(count) * count[d]) for d in sets])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[0] = reg[-1] = 0.0  # the cosine and the bias are not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -30, 30)))
        grad = z.T @ (weight * (p - y)) + reg * w
        hess = (z * (weight * p * (1 - p))[:, None]).T @ z + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-7:
            break
    raw = w[:-1] / scale
    bias = float(w[-1] - mean @ raw)
    dim = (len(raw) - 1) // 2
    return InteractionModel(dim, float(raw[0]), raw[1: dim + 1], raw[dim + 1:], bias, fitted_on)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m memroute.eval.interaction_fit", description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="the LoCoMo folder (locomo_retrieval)")
    parser.add_argument("--embedder", default="use-m3")
    parser.add_argument("--limit", type=int, default=None, help="only LoCoMo's first conversation's first N questions")
    parser.add_argument("--l2", type=float, default=L2)
    args = parser.parse_args(argv)
    pairs = collect(args.data, args.embedder, args.limit)
    n = {d: sum(1 for p in pairs if p.dataset == d) for d in ("locomo", "everyday")}
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    model = fit(pairs, args.l2, f"LoCoMo ({n['locomo']} questions) and everyday train ({n['everyday']}); first "
                f"{FIRST} candidates; embedder {args.embedder}; L2 {args.l2:g}; {stamp}")
    model_id = get_embedder(args.embedder).model_id
    current = json.loads(WEIGHTS_PATH.read_text("utf-8")) if WEIGHTS_PATH.exists() else {}
    encoders = {**current.get("encoders", {}), model_id: model.to_dict()}
    WEIGHTS_PATH.write_text(json.dumps({"method": __doc__.split("\n")[0], "encoders": encoders}) + "\n", "utf-8")
    interaction.clear_cache()
    print(json.dumps({"path": str(WEIGHTS_PATH), "encoder": model_id, "fitted_on": model.fitted_on}))


if __name__ == "__main__":
    main()
