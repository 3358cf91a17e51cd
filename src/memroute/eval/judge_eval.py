"""The relevance judge on LoCoMo and the everyday set's train split: injection figures and ``--fit-judge``.

``memroute eval recall`` reports, beside the ranking figures, what the calibrated judge
(:mod:`memroute.retrieval.judge`) injects on LoCoMo (the first five of each question, seed 001's rule):
with the shipped judge, and leave-one-conversation-out (with ``--loo``: the judge refitted without the
conversation it is scored on, on the other six and the everyday train split). ``--fit-judge`` fits the judge of the
run's embedder on all seven conversations and the everyday train split (its feature set and L2 first chosen by
leave-one-group-out, :func:`memroute.retrieval.judge_fit.select`) and writes it into
``retrieval/judge_weights.json`` (the ``any`` model too, when the embedder is the default use-m3).
Stacking: the judges fitted here read the interaction model's logits cross-fitted (each question scored by
an interaction model fitted without its store or conversation, :func:`memroute.eval.interaction_fit.stacked`),
and ``--fit-judge`` writes the interaction model fitted on everything beside the judge (what a recall runs),
only when the chosen feature set reads it (otherwise it removes the encoder's model: no recall pays for
logits nobody reads).
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
from memroute.embed.tokens import ranking_id
from memroute.eval.interaction_fit import FIRST, L2, Pairs, TrainingQuestion, stacked
from memroute.retrieval import interaction, judge
from memroute.retrieval.interaction import InteractionModel
from memroute.retrieval.judge import JUDGE_FEATURES
from memroute.retrieval.judge_fit import COSINE_FREE, FEATURE_SETS, add, fit_judge, select, shares

JUDGE_PATH = Path(__file__).resolve().parent.parent / "retrieval" / "judge_weights.json"
INTERACTION_PATH = Path(__file__).resolve().parent.parent / "retrieval" / interaction.WEIGHTS_FILE
INTERACTION_METHOD = ("logistic regression over the question's and the memory's vectors (cosine, product, "
                      "distance; memroute.eval.interaction_fit), fitted on the judge's training data by "
                      "`memroute eval recall --fit-judge`")
METHOD = ("logistic regression over the judge's features (memroute.retrieval.judge), the data sets weighed "
          "equally, feature set and L2 chosen by leave-one-group-out (judge_fit.select); cut-offs by a grid over "
          "the fitted probabilities maximising, summed over the data sets, the mean of answer-injected, "
          "precision and abstention (seed 001's injection rule)")


def everyday_train(embedder: str, stack: bool = False) -> list[TrainingQuestion]:
    """The everyday set's train split as the judge's training questions, grouped by store, with their
    interaction rows when ``stack`` (empty when the set is not installed)."""
    try:
        data: Any = importlib.import_module("memroute.eval.everyday")
        runner: Any = importlib.import_module("memroute.eval.everyday_eval")
    except ImportError:
        return []
    pairs: list[Pairs | None] = []
    outcomes = runner.run_everyday(data.load_everyday(data.data_path("train")), embedder,
                                   pairs=pairs if stack else None)
    out = []
    for k, o in enumerate(outcomes):
        q = o.question
        out.append(TrainingQuestion(o.recall.trace, frozenset(q.answers), "everyday", q.store, q.answerable,
                                    frozenset(q.stale | q.related), pairs=pairs[k] if stack else None))
    return out


def injection(locomo: Sequence[TrainingQuestion], embedder: str, fit: bool = False, loo: bool = False,
              stack: bool = False, features: Sequence[str] | None = None,
              l2s: Sequence[float] | None = None) -> dict[str, Any]:
    """The shipped judge's shares on ``locomo``; with ``loo`` also leave-one-conversation-out (refitted with
    the everyday train split), with ``fit`` the judge refitted on everything and written. ``stack``: the
    refitted judges read cross-fitted interaction logits (:func:`memroute.eval.interaction_fit.stacked`;
    the questions carry their interaction rows), and with ``fit`` the interaction model fitted on everything
    is written beside the judge; without, they read the logits the recall traced. ``features`` and ``l2s``
    narrow the selection (:func:`memroute.retrieval.judge_fit.select`; one of each holds it fixed, and the
    written judge's ``fitted_on`` says so)."""
    model_id = ranking_id(get_embedder(embedder))  # the key its judge is read and written under
    shipped = judge.judge_for(model_id)
    tally: dict[str, list[int]] = {}
    if shipped is not None:
        for t in locomo:
            q = t.judged(None)
            add(tally, q, shipped.probability(q.x), shipped)
    out: dict[str, Any] = {"shipped": shares(tally)["locomo"] if tally else None}
    if not loo and not fit:
        return out
    training = list(locomo) + everyday_train(embedder, stack)
    sets = f"LoCoMo ({len(locomo)} questions)" + (f" and everyday train ({len(training) - len(locomo)})"
                                                  if len(training) > len(locomo) else "")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    if stack:
        every, inter_model = stacked(training, f"{sets}; first {FIRST} candidates; embedder {embedder}; L2 {L2:g}; "
                                     f"{stamp}")
    else:
        every, inter_model = [t.judged(None) for t in training], None
    groups = [t.group for t in training]
    chosen = select(every, groups, features=features, l2s=l2s)
    use, l2 = FEATURE_SETS[chosen.features], chosen.l2
    out["selection"] = {"features": chosen.features, "l2": l2, "objective": round(chosen.objective, 4),
                        "shares": chosen.shares, "tried": chosen.tried, "interaction": "cross-fitted" if stack
                        else "as traced"}
    held: dict[str, list[int]] = {}
    n = len(locomo)
    for conv in dict.fromkeys(groups[:n]):
        rest = [q for q, g in zip(every[:n], groups[:n], strict=True) if g != conv] + every[n:]
        model = fit_judge(rest, f"all but {conv}", use, l2)
        for q, g in zip(every[:n], groups[:n], strict=True):
            if g == conv:
                add(held, q, model.probability(q.x), model)
    out["leave_one_conversation_out"] = shares(held).get("locomo")
    out["everyday_train_questions"] = len(training) - n
    if fit:
        narrowed = "; ".join(part for part in (
            f"--judge-features {' '.join(features)}" if features is not None else "",
            f"--judge-l2 {' '.join(f'{x:g}' for x in l2s)}" if l2s is not None else "") if part)
        how = (f"features {chosen.features!r}, L2 {l2:g} ("
               + (f"selection narrowed by {narrowed}; " if narrowed else "")
               + f"leave-one-group-out objective {chosen.objective:.3f})")
        if stack:
            how += ", interaction logits cross-fitted"
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
        reads = any(u for u, f in zip(use, JUDGE_FEATURES, strict=True) if f.startswith("interaction"))
        write_interaction(model_id, inter_model if reads else None)
        out["fitted"]["interaction"] = {"path": str(INTERACTION_PATH), "fitted_on": inter_model.fitted_on} \
            if reads and inter_model is not None else None
    return out


def write_interaction(model_id: str, model: InteractionModel | None) -> None:
    """``model`` as the encoder's entry of ``retrieval/interaction_weights.json``; None removes the entry (a
    judge that does not read the interaction: a recall would compute its logits for nothing)."""
    current = json.loads(INTERACTION_PATH.read_text("utf-8")) if INTERACTION_PATH.exists() else {}
    encoders = {k: v for k, v in current.get("encoders", {}).items() if k != model_id}
    if model is not None:
        encoders[model_id] = model.to_dict()
    INTERACTION_PATH.write_text(json.dumps({"method": INTERACTION_METHOD, "encoders": encoders}) + "\n", "utf-8")
    interaction.clear_cache()
