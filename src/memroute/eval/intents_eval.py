"""``memroute eval intents``: intent sets as routing (CLINC150, BANKING77, the Korean set).

The training utterances become the agents' examples, out-of-scope (``oos`` / ``OOD``) is the no-route
answer, and the thresholds are chosen by :func:`memroute.routing.fit` on the training side only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memroute.errors import InputError
from memroute.eval.datasets import holdout_split, intent_agents, is_out_of_scope, load_intents
from memroute.routing.composite import AgentRouter
from memroute.routing.fit import LabelledExample, fit


@dataclass(frozen=True, slots=True)
class IntentsEvalReport:
    examples: int
    accuracy: float
    in_scope_accuracy: float
    oos_recall: float | None
    latency_ms: dict[str, float]
    fit: dict[str, Any]
    split: str

    def as_dict(self) -> dict[str, Any]:
        return {"examples": self.examples, "accuracy": self.accuracy, "in_scope_accuracy": self.in_scope_accuracy,
                "oos_recall": self.oos_recall, "latency_ms": self.latency_ms, "fit": self.fit, "split": self.split}


def run_intents_eval(train: str | Path, test: str | Path | None = None, holdout: float = 0.2,
                     limit: int | None = None, fit_thresholds: bool = True,
                     min_oos_recall: float | None = None) -> IntentsEvalReport:
    """Route every test utterance; ``min_oos_recall`` is passed to :func:`fit` (the out-of-scope recall the
    thresholds must keep on the training side, in-scope accuracy maximised under it)."""
    train_examples = load_intents(train)
    if test is not None:
        test_examples = load_intents(test)
        split = f"train={Path(train).name} test={Path(test).name}"
    else:
        train_examples, test_examples = holdout_split(train_examples, holdout)
        split = f"{Path(train).name} split by md5(text): {1 - holdout:.0%} train / {holdout:.0%} held out"
    if limit is not None:
        test_examples = test_examples[:limit]
    agents = intent_agents(train_examples)
    if not agents:
        raise InputError(f"{train}: no in-scope training examples")
    router = AgentRouter()
    fit_info: dict[str, Any] = {}
    if fit_thresholds:
        labelled = [LabelledExample(e.text, None if is_out_of_scope(e.label) else e.label) for e in train_examples]
        report = fit(router, agents, labelled, min_oos_recall=min_oos_recall)
        router.calibration = report.calibration
        fit_info = report.as_dict()
        fit_info["calibration"].pop("agent_thresholds", None)
        fit_info["agent_thresholds"] = len(report.calibration.agent_thresholds)
    router.index(agents)
    correct: list[bool] = []
    in_scope_hits: list[bool] = []
    oos_hits: list[bool] = []
    lat: list[float] = []
    for ex in test_examples:
        start = time.perf_counter()
        out = router.route(ex.text, agents)
        lat.append((time.perf_counter() - start) * 1000.0)
        pred = out.agent.id if out.agent else None
        oos = is_out_of_scope(ex.label)
        ok = pred is None if oos else pred == ex.label
        correct.append(ok)
        (oos_hits if oos else in_scope_hits).append(ok)
    arr = np.array(lat) if lat else np.zeros(1)
    return IntentsEvalReport(
        examples=len(correct), accuracy=round(float(np.mean(correct)), 4) if correct else 0.0,
        in_scope_accuracy=round(float(np.mean(in_scope_hits)), 4) if in_scope_hits else 0.0,
        oos_recall=round(float(np.mean(oos_hits)), 4) if oos_hits else None,
        latency_ms={"p50": round(float(np.percentile(arr, 50)), 3), "p95": round(float(np.percentile(arr, 95)), 3)},
        fit=fit_info, split=split,
    )
