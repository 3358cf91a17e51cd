"""Confidence, thresholds and the no-route answer; ``fit`` chooses them from labelled examples.

Raw scores are not comparable across catalogues, languages or encoders: an English query and a Japanese
one land at different cosine levels. So the confidence reads the top score's **gap** to the runner-up in
units of the candidate set's own spread (a label-free scale, computed per query from the scores of all
candidates), together with the top score itself, through a logistic function:

    confidence = sigmoid(w_gap * gap / spread + w_top * top + bias)

``fit`` estimates the three weights by logistic regression on labelled examples (was the top agent right?)
and picks the global threshold, and per-agent thresholds where an agent has enough examples, that maximise
accuracy when a wrong or out-of-scope message should get "no route".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memroute.errors import InputError
from memroute.routing.index import F32
from memroute.types import Agent

DEFAULT_WEIGHTS = (0.57, 19.35, -3.45)
"""Confidence weights (gap in spread units, top score, bias) before any fit: logistic regression of "the top
agent is right" on every SGD dev user turn scored on its own text with the default strategies (the only set
routing is tuned on). Binned, the predicted confidence matches the observed accuracy within ~0.05."""
SPREAD_FLOOR = 0.01
"""Smallest spread used as a scale (a catalogue of near-identical agents must not divide by ~0)."""


def gap_scale(scores: F32) -> float:
    """The label-free scale of a candidate set: mean absolute deviation of its scores from their median.

    Robust to the one high score we are measuring, and it moves with the encoder's and language's cosine
    range, which is what lets a margin tuned in English work in Japanese.
    """
    if scores.size < 2:
        return SPREAD_FLOOR * 5
    return max(float(np.mean(np.abs(scores - np.median(scores)))), SPREAD_FLOOR)


@dataclass(frozen=True, slots=True)
class ConfidenceFeatures:
    top: float
    gap: float
    scale: float

    @property
    def z(self) -> float:
        return self.gap / self.scale


def features(scores: F32, best: int, runner_up: int | None) -> ConfidenceFeatures:
    top = float(scores[best])
    gap = top - float(scores[runner_up]) if runner_up is not None else top
    return ConfidenceFeatures(top, gap, gap_scale(scores))


@dataclass(frozen=True, slots=True)
class Calibration:
    """Confidence weights and thresholds. The defaults route everything that matched anything (threshold
    0): set ``threshold`` or run ``memroute fit`` to get real no-route answers."""

    w_gap: float = DEFAULT_WEIGHTS[0]
    w_top: float = DEFAULT_WEIGHTS[1]
    bias: float = DEFAULT_WEIGHTS[2]
    threshold: float = 0.0
    agent_thresholds: Mapping[str, float] = field(default_factory=dict)

    def confidence(self, f: ConfidenceFeatures) -> float:
        x = self.w_gap * min(f.z, 50.0) + self.w_top * f.top + self.bias
        return 1.0 / (1.0 + math.exp(-x))

    def threshold_for(self, agent: Agent) -> float:
        """Per agent: the catalogue's own threshold, else a fitted one, else the global threshold."""
        if agent.threshold is not None:
            return agent.threshold
        return self.agent_thresholds.get(agent.id, self.threshold)

    def as_dict(self) -> dict[str, Any]:
        return {"w_gap": self.w_gap, "w_top": self.w_top, "bias": self.bias, "threshold": self.threshold,
                "agent_thresholds": dict(self.agent_thresholds)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        try:
            return cls(float(data.get("w_gap", DEFAULT_WEIGHTS[0])), float(data.get("w_top", DEFAULT_WEIGHTS[1])),
                       float(data.get("bias", DEFAULT_WEIGHTS[2])), float(data.get("threshold", 0.0)),
                       {str(k): float(v) for k, v in dict(data.get("agent_thresholds") or {}).items()})
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"not a calibration: {exc}; write one with `memroute fit`") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise InputError(f"thresholds file {path} does not exist; write one with `memroute fit`") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"thresholds file {path} is not JSON (line {exc.lineno}, column {exc.colno})") from None


@dataclass(frozen=True, slots=True)
class FitExample:
    """One labelled routing outcome: the confidence features of the top agent, which agent that was, whether
    it was right, and whether the message had any right agent at all (False: it should get no route)."""

    features: ConfidenceFeatures
    predicted: str
    correct: bool
    in_scope: bool


@dataclass(frozen=True, slots=True)
class FitReport:
    calibration: Calibration
    examples: int
    accuracy_before: float
    accuracy_after: float
    in_scope_accuracy: float
    out_of_scope_recall: float

    def as_dict(self) -> dict[str, Any]:
        return {"calibration": self.calibration.as_dict(), "examples": self.examples,
                "accuracy_always_route": round(self.accuracy_before, 4), "accuracy": round(self.accuracy_after, 4),
                "in_scope_accuracy": round(self.in_scope_accuracy, 4),
                "out_of_scope_recall": round(self.out_of_scope_recall, 4)}


def _logistic(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], l2: float = 1e-2,
              steps: int = 50) -> np.ndarray[Any, Any]:
    """L2-regularised logistic regression by Newton's method (three weights: no library needed)."""
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y) + l2 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w


def _accuracy(conf: np.ndarray[Any, Any], correct: np.ndarray[Any, Any], in_scope: np.ndarray[Any, Any],
              t: float) -> float:
    """Balanced accuracy: the mean of in-scope accuracy and out-of-scope recall (plain accuracy when every
    example is in scope). Out-of-scope messages are rare in training sets (CLINC150: 0.7 %), so plain accuracy
    would always pick "never answer no-route"; a wrong route and a missed no-route should weigh alike."""
    routed = conf >= t
    right_in = float(np.mean((routed & correct)[in_scope])) if in_scope.any() else 1.0
    if in_scope.all():
        return right_in
    return 0.5 * (right_in + float(np.mean(~routed[~in_scope])))


def fit_calibration(examples: Sequence[FitExample], min_agent_examples: int = 20,
                    prior_weight: float = 20.0, min_oos_recall: float | None = None) -> FitReport:
    """Fit confidence weights and thresholds (see the module docstring) from labelled outcomes.

    With ``min_oos_recall``, the global threshold is instead the lowest one that rejects at least that share
    of the out-of-scope examples, which maximises in-scope accuracy under that constraint (routed-and-right
    only shrinks as the threshold rises), and no per-agent thresholds are fitted: a handful of out-of-scope
    examples per agent cannot support one.
    """
    if len(examples) < 10:
        raise InputError(f"fit needs at least 10 labelled examples, got {len(examples)}")
    if min_oos_recall is not None and not 0.0 <= min_oos_recall <= 1.0:
        raise InputError(f"min_oos_recall must be between 0 and 1, got {min_oos_recall}")
    x = np.array([[min(e.features.z, 50.0), e.features.top, 1.0] for e in examples])
    y = np.array([e.correct for e in examples], dtype=np.float64)
    correct = y.astype(bool)
    in_scope = np.array([e.in_scope for e in examples], dtype=bool)
    if correct.all() or not correct.any():
        w = np.array(DEFAULT_WEIGHTS)
    else:
        w = _logistic(x, y)
        # Confidence must not fall as the score or the margin rises: drop a feature whose fitted weight
        # came out negative (collinear features can do that) and refit with the rest.
        keep = [i for i in (0, 1) if w[i] > 0] + [2]
        if len(keep) < 3:
            w = np.zeros(3)
            w[keep] = _logistic(x[:, keep], y)
    conf = 1.0 / (1.0 + np.exp(-(x @ w)))
    grid = np.unique(np.r_[0.0, np.round(conf, 4)])
    predicted = np.array([e.predicted for e in examples])
    per_agent: dict[str, float] = {}
    if min_oos_recall is not None and (~in_scope).any():
        threshold = _threshold_for_recall(conf[~in_scope], np.r_[grid, 1.0], min_oos_recall)
    else:
        accs = np.array([_accuracy(conf, correct, in_scope, t) for t in grid])
        # Among equally good thresholds take the middle one: the flat top of the curve is the robust choice.
        best = np.flatnonzero(accs >= accs.max() - 1e-9)
        threshold = float(grid[best[len(best) // 2]])
        for agent in sorted(set(predicted.tolist())):
            mask = predicted == agent
            n = int(mask.sum())
            if n < min_agent_examples:
                continue
            local = np.array([_accuracy(conf[mask], correct[mask], in_scope[mask], t) for t in grid])
            pick = np.flatnonzero(local >= local.max() - 1e-9)
            t_local = float(grid[pick[len(pick) // 2]])
            per_agent[agent] = round((n * t_local + prior_weight * threshold) / (n + prior_weight), 4)
    calibration = Calibration(float(w[0]), float(w[1]), float(w[2]), round(threshold, 4), per_agent)
    thresholds = np.array([per_agent.get(p, threshold) for p in predicted])
    routed = conf >= thresholds
    final = np.where(routed, correct, ~in_scope)
    in_acc = float(np.mean((routed & correct)[in_scope])) if in_scope.any() else 0.0
    oos_rec = float(np.mean(~routed[~in_scope])) if (~in_scope).any() else 0.0
    return FitReport(calibration, len(examples), float(np.mean(np.where(True, correct, ~in_scope))),
                     float(final.mean()), in_acc, oos_rec)


def _threshold_for_recall(out_of_scope_conf: np.ndarray[Any, Any], grid: np.ndarray[Any, Any],
                          target: float) -> float:
    """The lowest threshold whose out-of-scope recall reaches ``target`` (see :func:`fit_calibration`)."""
    recalls = np.array([float(np.mean(out_of_scope_conf < t)) for t in grid])
    return float(grid[int(np.flatnonzero(recalls >= target - 1e-9)[0])])
