"""What the LLM steps of many requests cost, from their trace records: the ``llm`` block of the eval reports."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class StepUsage:
    """One step's share: calls sent, tokens, fallbacks (after a call or refused before one), policy skips."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    fallbacks: int = 0
    skipped: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "fallbacks": self.fallbacks, "skipped": self.skipped}


@dataclass
class LlmUsage:
    """What the LLM cost over many requests: per step (:class:`StepUsage`), the totals summed from them."""

    latencies_ms: list[float] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    by_step: dict[str, StepUsage] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.by_step.values())

    @property
    def tokens_in(self) -> int:
        return sum(s.tokens_in for s in self.by_step.values())

    @property
    def tokens_out(self) -> int:
        return sum(s.tokens_out for s in self.by_step.values())

    @property
    def fallbacks(self) -> int:
        """Steps that wanted the LLM and used the rule result (policy skips are not fallbacks)."""
        return sum(s.fallbacks for s in self.by_step.values())

    def add(self, records: Iterable[Mapping[str, Any]]) -> None:
        for r in records:
            step = self.by_step.setdefault(str(r.get("step", "")), StepUsage())
            fallback = r.get("fallback")
            if fallback in ("disabled", "not_needed"):
                self.skipped[fallback] = self.skipped.get(fallback, 0) + 1
                step.skipped += 1
                continue
            if r.get("called"):
                step.calls += 1
                self.latencies_ms.append(float(r.get("latency_ms", 0.0)))
            step.tokens_in += int(r.get("tokens_in", 0))
            step.tokens_out += int(r.get("tokens_out", 0))
            if fallback:
                step.fallbacks += 1
                self.reasons[fallback] = self.reasons.get(fallback, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        lat = np.array(self.latencies_ms) if self.latencies_ms else np.zeros(1)
        return {"calls": self.calls, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "fallbacks": self.fallbacks,
                "latency_ms": {"p50": round(float(np.percentile(lat, 50)), 1),
                               "p95": round(float(np.percentile(lat, 95)), 1)},
                "fallback_reasons": dict(sorted(self.reasons.items())), "skipped": dict(sorted(self.skipped.items())),
                "by_step": {name: s.as_dict() for name, s in sorted(self.by_step.items())}}
