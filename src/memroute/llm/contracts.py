"""The JSON each LLM step must return, as pydantic models, plus the checks a schema cannot express.

A model answer is parsed leniently as JSON (code fences and prose around one JSON value are tolerated:
small local models add them), then validated strictly: too many items, unknown ids, quotes that are not
in the user's text, relevance outside the allowed labels — all are contract violations, and the step falls
back to its rule-based result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memroute.llm.client import LLMError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class DetectedReference(_Strict):
    type: Literal["anaphora", "temporal", "ellipsis", "topic"]
    surface: str = Field(min_length=1, max_length=200)
    resolved: str | None = Field(default=None, max_length=500)


class Expansion(_Strict):
    """Seed 001 phase 1: at most 5 expanded queries and the references found."""

    expanded_queries: list[str] = Field(default_factory=list, max_length=5)
    detected_references: list[DetectedReference] = Field(default_factory=list, max_length=10)

    @field_validator("expanded_queries")
    @classmethod
    def _queries(cls, value: list[str]) -> list[str]:
        cleaned = [q.strip() for q in value if q.strip()]
        if any(len(q) > 300 for q in cleaned):
            raise ValueError("an expanded query is longer than 300 characters")
        return cleaned


class RerankItem(_Strict):
    id: str = Field(min_length=1, max_length=256)
    relevance: Literal["high", "medium"]
    reason: str = Field(min_length=1, max_length=300)


class Rerank(_Strict):
    """Seed 001 phase 3: at most 5 relevant memories (ids from the candidates only) and how to inject them."""

    relevant: list[RerankItem] = Field(default_factory=list, max_length=5)
    injection_strategy: Literal["quote_key_parts", "summarize", "full"] = "quote_key_parts"


class SlotValue(_Strict):
    value: str = Field(min_length=1, max_length=500)
    quote: str = Field(min_length=1, max_length=500)


class Slots(_Strict):
    """Seed 002: query-frame slots, each with the exact quote it came from."""

    target_feature: SlotValue | None = None
    trigger_condition: SlotValue | None = None
    observed_issue: SlotValue | None = None
    desired_action: SlotValue | None = None


class Keywords(_Strict):
    """Seed 004: at most 16 keywords for routing."""

    keywords: list[str] = Field(default_factory=list, max_length=16)


class Intents(_Strict):
    """Seed 004: intent labels (translate, summarize, code, vision, ...) added to the query's tags."""

    intents: list[str] = Field(default_factory=list, max_length=8)


class AgentScore(_Strict):
    id: str = Field(min_length=1, max_length=256)
    score: float = Field(ge=0.0, le=1.0)


class AgentScores(_Strict):
    """Seed 004: 0..1 scores for the top-N candidates of the rule-based router."""

    scores: list[AgentScore] = Field(default_factory=list, max_length=16)


class ContractError(LLMError):
    def __init__(self, message: str) -> None:
        super().__init__("contract", message)


M = TypeVar("M", bound=BaseModel)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_json(text: str, model: type[M]) -> M:
    """The first JSON object in ``text`` validated against ``model``; ``ContractError`` otherwise."""
    stripped = _FENCE.sub("", text.strip())
    start = stripped.find("{")
    if start < 0:
        raise ContractError(f"the answer has no JSON object: {text[:80]!r}")
    try:
        value, _ = json.JSONDecoder().raw_decode(stripped[start:])
    except json.JSONDecodeError as exc:
        raise ContractError(f"the answer is not valid JSON ({exc.msg} at {exc.pos})") from exc
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ContractError(f"the answer breaks the {model.__name__} contract at {where}: {first['msg']}") from exc


def check_ids(ids: Collection[str], allowed: Collection[str]) -> None:
    """An LLM may reorder or drop candidates, never invent them."""
    unknown = [i for i in ids if i not in allowed]
    if unknown:
        raise ContractError(f"the answer names ids that were not among the candidates: {unknown[:3]}")
    if len(set(ids)) != len(list(ids)):
        raise ContractError("the answer names the same id twice")
