"""Seed 002's query frame from an LLM: slots with quotes, checked by :func:`memroute.analysis.validate_frame`.

The model's slots are kept only when every quote is in the user's text and every value fits its quote; a
single hallucinated quote means the answer is not trusted, and the rule result (an empty frame: every slot
missing, so an investigation asks for it) stands with the ``contract`` fallback naming the slot.
"""

from __future__ import annotations

import html
from typing import Any

from memroute.analysis import FrameValidation, QueryFrame, validate_frame
from memroute.llm.contracts import ContractError, Slots
from memroute.llm.policy import Budget
from memroute.llm.prompts import slots_prompt
from memroute.llm.steps import LlmAssistant, StepOutcome
from memroute.text import detect_language


def query_frame(assistant: LlmAssistant, text: str, budget: Budget | None = None) -> StepOutcome[FrameValidation]:
    """The validated frame of ``text`` (step ``slots``, on only when the policy's steps include it)."""

    def convert(slots: Slots) -> FrameValidation:
        # The prompt escapes angle brackets; the model may quote them escaped.
        extracted: dict[str, Any] = {
            name: None if slot is None else {"value": html.unescape(slot.value), "quote": html.unescape(slot.quote)}
            for name, slot in ((n, getattr(slots, n)) for n in Slots.model_fields)}
        checked = validate_frame(text, extracted)
        if checked.rejected:
            raise ContractError("; ".join(f"{r.slot}: {r.reason}" for r in checked.rejected))
        return checked

    return assistant.run("slots", slots_prompt(text, detect_language(text)), Slots, convert,
                         FrameValidation(QueryFrame(text)), budget or assistant.budget())
