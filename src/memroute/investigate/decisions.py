"""Seed 002's ``DecisionLog``: one record per step of a session, appended to the store.

Records are kept in the store's named state (namespace ``investigate.log``, key ``<session>:<seq>``,
scoped to the owner like everything else), so they survive restarts and move with ``memroute copy``.
They can be filtered and exported as JSON Lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from memroute.stores import Store
from memroute.types import as_utc

NAMESPACE = "investigate.log"


class DecisionRecord(BaseModel):
    """What the router decided at one step, with seed 002's fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    seq: int
    step: str
    query: str
    timestamp: datetime
    intent: str
    category: str | None
    category_confidence: float
    query_frame: dict[str, Any] | None = None
    missing_slots: list[str] = []
    risk_level: str | None = None
    slot_based_tools: list[str] = []
    """Tools recommended for the missing slots."""
    selected_tools: list[str] = []
    """Tools used at this step (a code tool called with the session, or evidence that was re-run)."""
    tool_selection_reason: str = ""
    tool_results: list[dict[str, Any]] = []
    fallback_triggered: bool = False
    fallback_reason: str | None = None
    final_phase: str = ""
    phase_transitions: list[str] = []
    detail: dict[str, Any] = {}

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class DecisionLog:
    def __init__(self, store: Store) -> None:
        self.store = store

    def append(self, owner: str, record: DecisionRecord) -> None:
        self.store.put_state(NAMESPACE, f"{record.session_id}:{record.seq:06d}", record.to_dict(), owner)

    def records(self, owner: str, *, session: str | None = None, step: str | None = None,
                phase: str | None = None, risk_level: str | None = None, since: datetime | str | None = None,
                limit: int | None = None) -> list[DecisionRecord]:
        """The owner's records, oldest first, filtered by session, step, final phase, risk level and time."""
        start = as_utc(since)
        out: list[DecisionRecord] = []
        for key, value in self.store.list_state(NAMESPACE, owner):
            if session is not None and not key.startswith(f"{session}:"):
                continue
            record = DecisionRecord.model_validate(value)
            if (step and record.step != step) or (phase and record.final_phase != phase) \
                    or (risk_level and record.risk_level != risk_level) or (start and record.timestamp < start):
                continue
            out.append(record)
        out.sort(key=lambda r: (r.timestamp, r.session_id, r.seq))
        return out if limit is None else out[-limit:]


def to_jsonl(records: Iterable[DecisionRecord]) -> str:
    return "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in records)
