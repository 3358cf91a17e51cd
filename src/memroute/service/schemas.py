"""The JSON the HTTP API reads and writes, as pydantic models (they make the OpenAPI schema).

Requests refuse unknown fields and bound every number and list, so a mistyped field or an absurd value
is a 422 that names it, not a surprise later. The answers' memory, hit and message shapes convert back to
the library's dataclasses (:meth:`MemoryOut.to_item`, ...), which is how :class:`memroute.Client` returns
the same types as :class:`memroute.Memory`. This module needs pydantic only, not FastAPI.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memroute.retrieval import RecallOptions
from memroute.types import Hit, MemoryItem, MemoryKind, Message, Sensitivity

Kind = Literal["episode", "note", "fact", "message"]
SensitivityName = Literal["public", "private", "secret"]
StrategyName = Literal["semantic_only", "keyword_boost", "temporal", "hybrid"]
LanguageName = Literal["en", "ja", "ko", "und"]
Name = Annotated[str, Field(min_length=1, max_length=256)]
"""Ids, sessions, roles and other names."""
Time = Annotated[str, Field(max_length=64, description="ISO 8601 time, e.g. 2026-11-20T10:00:00+09:00")]
_SENSITIVITY: dict[Sensitivity, SensitivityName] = {Sensitivity.PUBLIC: "public", Sensitivity.PRIVATE: "private",
                                                   Sensitivity.SECRET: "secret"}
Words = Annotated[list[Annotated[str, Field(max_length=256)]], Field(max_length=200)]


def _check_unicode(data: Any) -> None:
    """Refuse unpaired UTF-16 surrogates (``"\\ud800"`` in JSON): no store or tokenizer can take them.

    Iterative, so that the deepest JSON the parser accepts cannot exhaust the stack here."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("a string contains an unpaired UTF-16 surrogate (e.g. a lone \\ud800 escape); "
                                 "send valid Unicode") from None
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        _check_unicode(data)
        return data


# --------------------------------------------------------------------------------------------- requests
class MemoryIn(RequestBody):
    """A memory to remember (the keyword arguments of :meth:`memroute.Memory.remember`)."""

    text: str = Field(description="What to remember (for an episode: what the user said).")
    session: Name | None = None
    kind: Kind = "note"
    reply: str | None = Field(None, description="For an episode: the assistant's answer, kept apart.")
    occurred_at: Time | None = None
    expires_at: Time | None = None
    sensitivity: SensitivityName = "public"
    source_type: Name | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    id: Name | None = Field(None, description="Your id for it (default: a new random id).")
    context: str | None = Field(None, description="Surrounding text (e.g. neighbouring turns), indexed for BM25 "
                                "with a lower weight.")
    embed_text: str | None = Field(None, description="Text to embed instead of `text` (e.g. the turn with its "
                                   "neighbours).")
    supersedes: list[Name] | None = Field(None, max_length=100, description="Ids of stored memories this one "
                                          "replaces (a fact that changed); they are kept and marked superseded "
                                          "in recalls.")

    def fields(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class ImportIn(RequestBody):
    items: list[MemoryIn] = Field(max_length=1000, description="At most 1,000 memories per request; stored in "
                                  "one transaction.")
    skip_invalid: bool = Field(False, description="Store the valid items and report the others, instead of "
                               "refusing the whole request.")


class MemoryPatch(RequestBody):
    """Fields to change; a field left out keeps its value, ``null`` clears it."""

    text: str | None = None
    session: Name | None = None
    kind: Kind | None = None
    reply: str | None = None
    occurred_at: Time | None = None
    expires_at: Time | None = None
    archived: bool | None = None
    sensitivity: SensitivityName | None = None
    source_type: Name | None = None
    metadata: dict[str, Any] | None = None
    context: str | None = None
    embed_text: str | None = None


class MessageIn(RequestBody):
    role: Name = Field(description="user, assistant, system, tool, ...")
    text: str
    at: Time | None = None


class Turn(RequestBody):
    role: Name = "user"
    text: str


class RecallOptionsIn(RequestBody):
    """The fields of :class:`memroute.retrieval.RecallOptions` a caller may set; left out: the defaults."""

    limit: int | None = Field(None, ge=1, le=50)
    strategy: StrategyName | None = None
    k_per_query: int | None = Field(None, ge=1, le=200)
    max_candidates: int | None = Field(None, ge=1, le=500)
    window_days: int | None = Field(None, ge=1, le=36_500)
    max_expanded_queries: int | None = Field(None, ge=0, le=20)
    recent_turns: int | None = Field(None, ge=0, le=50)
    fusion: Literal["minmax", "rrf"] | None = None
    rrf_k: int | None = Field(None, ge=1, le=1000)
    vector_weight: float | None = Field(None, ge=0.0, le=1.0)
    keyword_weight: float | None = Field(None, ge=0.0, le=1.0)
    context_weight: float | None = Field(None, ge=0.0, le=10.0)
    dedupe_threshold: float | None = Field(None, gt=0.0, le=1.0)
    expand: bool | None = None
    rerank: bool | None = None
    decay: bool | None = None
    session: Name | None = Field(None, description="Only memories of this session.")
    kinds: list[Kind] | None = Field(None, max_length=4)
    max_sensitivity: SensitivityName | None = None
    pack_chars: int | None = Field(None, ge=1, le=100_000)
    llm: bool | None = None

    def to_options(self) -> RecallOptions:
        return RecallOptions(**self.model_dump(exclude_none=True))


class RecallIn(RequestBody):
    text: str = Field(description="The user's message of this turn.")
    session: Name | None = Field(None, description="The conversation it belongs to: its last turns are read "
                                 "from the conversation log unless recent_messages is given.")
    recent_messages: list[Turn] | None = Field(None, max_length=50)
    now: Time | None = Field(None, description="When the message was sent (default: now); time ranges such as "
                             "'last week' are resolved in its time zone.")
    options: RecallOptionsIn | None = None
    trace: bool = Field(True, description="Include the trace (strategy, expanded queries, searches, candidates, "
                        "per-stage milliseconds).")


class RouteIn(RequestBody):
    text: str = Field(min_length=1)
    session: Name | None = Field(None, description="With a session: conversation-aware routing (follow-ups stay, "
                                 "switches move; the message is added to the session's log).")
    top_k: int | None = Field(None, ge=1, le=1000, description="Candidates returned with their scores and "
                              "reasons (default: every agent, at most 50).")
    hints: Words = Field(default_factory=list, description="Tool names or mentions (without a session).")
    tags: Words = Field(default_factory=list, description="Intent labels (without a session).")


class AnalyzeIn(RequestBody):
    text: str
    session: Name | None = Field(None, description="Read the recent turns from this session's log.")
    recent_messages: list[Turn] | None = Field(None, max_length=50)
    now: Time | None = None


class AgentIn(RequestBody):
    """An agent of the catalogue (its id is in the path)."""

    id: Name | None = Field(None, description="Must equal the id in the path when given.")
    name: Name | None = None
    description: Annotated[str, Field(max_length=10_000)] = ""
    keywords: Words = Field(default_factory=list)
    categories: Words = Field(default_factory=list)
    tools: Words = Field(default_factory=list)
    input_types: list[Literal["text", "image", "audio", "video", "file"]] = Field(default_factory=list, max_length=5)
    status: Literal["active", "idle", "inactive", "error"] = "active"
    version: Annotated[str, Field(max_length=256)] = ""
    examples: list[Annotated[str, Field(max_length=2000)]] = Field(default_factory=list, max_length=500)
    capabilities: Words = Field(default_factory=list)
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    prompt: Annotated[str, Field(max_length=10_000)] = ""
    usage_count: int = Field(0, ge=0, le=2**53)
    last_used: Time | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------------- answers
class MemoryOut(BaseModel):
    id: str
    owner: str
    text: str
    kind: Kind
    session_id: str | None
    reply: str | None
    occurred_at: datetime | None
    created_at: datetime | None
    expires_at: datetime | None
    archived: bool
    sensitivity: SensitivityName
    source_type: str | None
    metadata: dict[str, Any]
    language: LanguageName

    @classmethod
    def of(cls, m: MemoryItem) -> MemoryOut:
        return cls(id=m.id, owner=m.owner, text=m.text, kind=m.kind.value, session_id=m.session_id, reply=m.reply,
                   occurred_at=m.occurred_at, created_at=m.created_at, expires_at=m.expires_at, archived=m.archived,
                   sensitivity=_SENSITIVITY[m.sensitivity], source_type=m.source_type, metadata=dict(m.metadata),
                   language=m.language)

    def to_item(self) -> MemoryItem:
        return MemoryItem(id=self.id, owner=self.owner, text=self.text, kind=MemoryKind(self.kind),
                          session_id=self.session_id, reply=self.reply, occurred_at=self.occurred_at,
                          created_at=self.created_at, expires_at=self.expires_at, archived=self.archived,
                          sensitivity=Sensitivity[self.sensitivity.upper()], source_type=self.source_type,
                          metadata=self.metadata, language=self.language)


class HitOut(BaseModel):
    memory: MemoryOut
    score: float
    scores: dict[str, float] = Field(description="Score of each search that found it (bm25, vector).")

    @classmethod
    def of(cls, h: Hit) -> HitOut:
        return cls(memory=MemoryOut.of(h.memory), score=h.score, scores={k: float(v) for k, v in h.scores.items()})

    def to_hit(self) -> Hit:
        return Hit(self.memory.to_item(), self.score, self.scores)


class MessageOut(BaseModel):
    session_id: str
    role: str
    text: str
    created_at: datetime
    owner: str
    id: int | None

    @classmethod
    def of(cls, m: Message) -> MessageOut:
        return cls(session_id=m.session_id, role=m.role, text=m.text, created_at=m.created_at, owner=m.owner, id=m.id)

    def to_message(self) -> Message:
        return Message(self.session_id, self.role, self.text, self.created_at, self.owner, self.id)


class Rejected(BaseModel):
    index: int
    reason: str


class ImportOut(BaseModel):
    stored: int
    rejected: list[Rejected]


class DeletedOut(BaseModel):
    deleted: int


class ErrorOut(BaseModel):
    type: str = Field(description="The error class: InputError, NotFoundError, AuthError, ValidationError, ...")
    message: str
    detail: Any = None
