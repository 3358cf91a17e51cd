"""``fit``: choose confidence weights and no-route thresholds from labelled examples.

Examples are routed against the agents as they would be in production, except that an example never
sees itself: agents whose example utterances include held-out texts are rebuilt without them, fold by
fold (k-fold cross-fitting), so thresholds are not fitted on memorised answers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memroute.errors import InputError
from memroute.routing.calibration import FitExample, FitReport, fit_calibration
from memroute.routing.composite import AgentRouter
from memroute.types import Agent


@dataclass(frozen=True, slots=True)
class LabelledExample:
    """A message and the id of the agent that should get it; ``None`` means it should get no route."""

    text: str
    agent_id: str | None


def _fold(text: str, folds: int) -> int:
    return int(hashlib.md5(text.encode("utf-8")).hexdigest()[:8], 16) % folds


def fit(router: AgentRouter, agents: Sequence[Agent], examples: Sequence[LabelledExample], folds: int = 5,
        max_examples: int = 5000, min_oos_recall: float | None = None) -> FitReport:
    """Fit the router's calibration on labelled examples (see :mod:`memroute.routing.calibration`).

    At most ``max_examples`` in-scope and ``max_examples`` no-route examples are used (deterministic subsets),
    which keeps a fit on 15,000 training utterances to a few minutes. The two are capped apart because
    no-route examples are usually few (CLINC150: 100 of 15,100) and the threshold rests on them: a cap on
    the whole set would drop most of them. ``min_oos_recall``: choose the threshold that keeps at
    least this out-of-scope recall with the best in-scope accuracy, instead of balanced accuracy.
    """
    if not agents:
        raise InputError("fit needs agents")
    if min_oos_recall is not None and not 0.0 <= min_oos_recall <= 1.0:
        raise InputError(f"min_oos_recall must be between 0 and 1 (a share of the no-route examples), "
                         f"got {min_oos_recall}")
    known = {a.id for a in agents}
    unknown = sorted({e.agent_id for e in examples if e.agent_id is not None and e.agent_id not in known})
    if unknown:
        raise InputError(f"labelled examples name unknown agent(s): {', '.join(unknown[:5])}; "
                         "use the catalogue's ids, or an empty label for 'no route'")
    ordered = sorted(examples, key=lambda e: hashlib.md5(e.text.encode("utf-8")).hexdigest())
    chosen = ([e for e in ordered if e.agent_id is not None][:max_examples]
              + [e for e in ordered if e.agent_id is None][:max_examples])
    outcomes: list[FitExample] = []
    for fold in range(folds):
        held = [e for e in chosen if _fold(e.text, folds) == fold]
        if not held:
            continue
        held_texts = {e.text for e in held}
        fold_agents = [replace(a, examples=tuple(x for x in a.examples if x not in held_texts))
                       if any(x in held_texts for x in a.examples) else a for a in agents]
        index = router.index(fold_agents)
        for e in held:
            scored = router.score(router.prepare(e.text, frame=True), index)  # as route() reads a request
            ranked = router.order(scored, limit=2)
            if not ranked:
                continue
            predicted = index.agents[ranked[0]].id
            outcomes.append(FitExample(router.confidence_features(scored, ranked), predicted,
                                       predicted == e.agent_id, e.agent_id is not None))
    return fit_calibration(outcomes, min_oos_recall=min_oos_recall)
