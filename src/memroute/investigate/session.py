"""An investigation session and the answers of its steps, as frozen pydantic models (stored as JSON).

Phases (seed 002): FRAME (waiting for the query frame) → EXPLORATION (using the code tools) → READY, or
→ SEMANTIC (missing or unmatched slots are stated as HYPOTHESIS) → VERIFICATION (each hypothesis is
confirmed by tool evidence) → READY. A slot's source is FACT (backed by what exploration found),
HYPOTHESIS (stated, not yet confirmed) or UNRESOLVED; a HYPOTHESIS slot blocks READY.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from memroute.analysis import Intent
from memroute.investigate.risk import RiskLevel


class Phase(enum.StrEnum):
    FRAME = "FRAME"
    EXPLORATION = "EXPLORATION"
    SEMANTIC = "SEMANTIC"
    VERIFICATION = "VERIFICATION"
    READY = "READY"


class SlotSource(enum.StrEnum):
    FACT = "FACT"
    HYPOTHESIS = "HYPOTHESIS"
    UNRESOLVED = "UNRESOLVED"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class PhaseChange(_Model):
    source: Phase | None
    target: Phase
    step: str
    at: datetime
    reason: str = ""

    def label(self) -> str:
        return f"{self.source.value if self.source else 'START'}→{self.target.value}"


class Hypothesis(_Model):
    slot: str
    value: str
    symbols: list[str] = []
    files: list[str] = []
    verified: bool = False
    evidence: list[dict[str, Any]] = []
    """Summaries of the tool results that confirmed it."""


class Understanding(_Model):
    """What the agent submitted, split into what the repository confirmed and what it did not."""

    symbols: list[str] = []
    entry_points: list[str] = []
    patterns: list[str] = []
    files: list[str] = []
    unconfirmed: list[dict[str, str]] = []
    """``{"kind", "item", "reason"}`` for every symbol, entry point or file the repository does not have."""


class InvestigationSession(_Model):
    id: str
    owner: str
    query: str
    language: str
    intent: Intent
    intent_source: str
    """``caller`` (given to start_session) or ``rules`` (classified from the query)."""
    rule_intent: Intent
    category: str | None
    category_confidence: float
    repo: str | None
    phase: Phase
    history: list[PhaseChange]
    query_frame: dict[str, Any] | None = None
    rejected_slots: list[dict[str, Any]] = []
    missing_slots: list[str] = []
    risk_level: RiskLevel | None = None
    risk_reason: str = ""
    requirements: dict[str, int] | None = None
    guidance: list[dict[str, Any]] = []
    recommended_tools: list[str] = []
    slot_source: dict[str, SlotSource] = {}
    slot_evidence: dict[str, list[dict[str, Any]]] = {}
    mapped_symbols: dict[str, list[str]] = {}
    understanding: Understanding | None = None
    blocking_slots: list[str] = []
    """Slots that need a verified hypothesis before READY (set when the session goes to SEMANTIC)."""
    hypotheses: list[Hypothesis] = []
    tool_calls: int = 0
    log_count: int = 0
    created_at: datetime
    updated_at: datetime

    def ready_blockers(self) -> list[str]:
        """Seed 002's ``validate_for_ready``: what still stands between the session and READY."""
        errors = [f"slot {slot!r} is still HYPOTHESIS" for slot, source in self.slot_source.items()
                  if source == SlotSource.HYPOTHESIS]
        errors += [f"slot {slot!r} has no verified hypothesis" for slot in self.blocking_slots
                   if self.slot_source.get(slot) != SlotSource.HYPOTHESIS
                   and not any(h.slot == slot and h.verified for h in self.hypotheses)]
        return errors

    def summary(self) -> dict[str, Any]:
        return {"session_id": self.id, "query": self.query, "intent": self.intent.value, "phase": self.phase.value,
                "risk_level": self.risk_level.value if self.risk_level else None, "repo": self.repo,
                "updated_at": self.updated_at.isoformat()}


class StepResult(_Model):
    """The answer of every step: where the session is now, what was decided, and what to do next."""

    session_id: str
    step: str
    phase: Phase
    next_step: str
    detail: dict[str, Any] = {}
    """The step's own results (extraction prompt, validated frame, requirement check, verification, ...)."""

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "step": self.step, "phase": self.phase.value,
                **self.model_dump(mode="json")["detail"], "next_step": self.next_step}
