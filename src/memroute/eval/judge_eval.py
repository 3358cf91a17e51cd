"""The relevance judge on LoCoMo and the everyday set's train split: injection figures and ``--fit-judge``.

``memroute eval recall`` reports, beside the ranking figures, what the calibrated judge
(:mod:`memroute.retrieval.judge`) injects on LoCoMo (the first five of each question, seed 001's rule):
with the shipped judge, and leave-one-conversation-out (with ``--loo``: the judge refitted without the
conversation it is scored on, on the other six and the everyday train split). ``--fit-judge`` fits the judge of the
run's embedder on all seven conversations and the everyday train split (its feature set and L2 first chosen by
leave-one-group-out, :func:`memroute.retrieval.judge_fit.select`) and writes it into
``retrieval/judge_weights.json`` (the ``any`` model too, when the embedder is the default use-m3).
The everyday dev split is never read here: ``memroute eval everyday --split dev`` reports it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memroute.embed import get_embedder
from memroute.retrieval import judge
from memroute.retrieval.judge_fit import (
    COSINE_FREE,
    FEATURE_SETS,
    JudgedQuestion,
    add,
    fit_judge,
    judged_question,
    select,
    shares,
)

JUDGE_PATH = Path(__file__).resolve().parent.parent / "retrieval" / "judge_weights.json"
METHOD = ("logistic regression over the judge's features (memroute.retrieval.judge), the data sets weighed "
          "equally, feature set and L2 chosen by leave-one-group-out (judge_fit.select); cut-offs by a grid over "
          "the fitted probabilities maximising, summed over the data sets, the mean of answer-injected, "
          "precision and abstention (seed 001's injection rule)")


def everyday_train(embedder: str) -> tuple[list[JudgedQuestion], list[str]]:
    """The everyday set's train split as judged questions, with each one's store (empty when the set is
    not installed)."""
    try:
        data: Any = importlib.import_module("memroute.eval.everyday")
        runner: Any = importlib.import_module("memroute.eval.everyday_eval")
    except ImportError:
        return [], []
    out, stores = [], []
    for o in runner.run_everyday(data.load_everyday(data.data_path("train")), embedder):
        q = o.question
        out.append(judged_question(o.recall.trace, q.answers, "everyday", q.answerable, q.stale | q.related))
        stores.append(q.store)
    return out, stores


def injection(locomo: Sequence[JudgedQuestion], conversations: Sequence[str], embedder: str,
              fit: bool = False, loo: bool = False) -> dict[str, Any]:
    """The shipped judge's shares on ``locomo``; with ``loo`` also leave-one-conversation-out (refitted with
    the everyday train split), with ``fit`` the judge refitted on everything and written."""
    model_id = get_embedder(embedder).model_id
    shipped = judge.judge_for(model_id)
    tally: dict[str, list[int]] = {}
    if shipped is not None:
        for q in locomo:
            add(tally, q, shipped.probability(q.x), shipped)
    out: dict[str, Any] = {"shipped": shares(tally)["locomo"] if tally else None}
    if not loo and not fit:
        return out
    train, stores = everyday_train(embedder)
    chosen = select(list(locomo) + train, list(conversations) + stores)
    use, l2 = FEATURE_SETS[chosen.features], chosen.l2
    out["selection"] = {"features": chosen.features, "l2": l2, "objective": round(chosen.objective, 4),
                        "shares": chosen.shares, "tried": chosen.tried}
    held: dict[str, list[int]] = {}
    for conv in dict.fromkeys(conversations):
        rest = [q for q, c in zip(locomo, conversations, strict=True) if c != conv] + train
        model = fit_judge(rest, f"all but {conv}", use, l2)
        for q, c in zip(locomo, conversations, strict=True):
            if c == conv:
                add(held, q, model.probability(q.x), model)
    out["leave_one_conversation_out"] = shares(held).get("locomo")
    out["everyday_train_questions"] = len(train)
    if fit:
        every = list(locomo) + train
        sets = f"LoCoMo ({len(locomo)} questions)" + (f" and everyday train ({len(train)})" if train else "")
        stamp = datetime.now(UTC).strftime("%Y-%m-%d")
        how = f"features {chosen.features!r}, L2 {l2:g} (leave-one-group-out objective {chosen.objective:.3f})"
        models = {model_id: fit_judge(every, f"{sets}; embedder {embedder}; {how}; {stamp}", use, l2)}
        if embedder == "use-m3":
            models[judge.ANY_ENCODER] = fit_judge(every, f"{sets}; embedder {embedder}, without the raw cosine; "
                                                  f"{how}; {stamp}",
                                                  tuple(u and c for u, c in zip(use, COSINE_FREE, strict=True)), l2)
        current = json.loads(JUDGE_PATH.read_text("utf-8")) if JUDGE_PATH.exists() else {}
        encoders = {**current.get("encoders", {}), **{k: m.to_dict() for k, m in models.items()}}
        JUDGE_PATH.write_text(json.dumps({"method": METHOD, "encoders": encoders}, indent=1) + "\n", "utf-8")
        judge.clear_cache()
        out["fitted"] = {"path": str(JUDGE_PATH), "models": sorted(models),
                         "cutoffs": {k: [m.high, m.medium, m.relative] for k, m in models.items()}}
    return out
