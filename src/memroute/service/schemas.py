"""The JSON the HTTP API reads and writes, as pydantic models (they make the OpenAPI schema).

Requests refuse unknown fields and bound every number and list, so a mistyped field or an absurd value
is a 422 that names it, not a surprise later. The answers' memory, hit and message shapes convert back to
the library's dataclasses (:meth:`MemoryOut.to_item`, ...), which is how :class:`memroute.Client` returns
the same types as :class:`memroute.Memory`. This module needs pydantic only, not FastAPI.
"""

from __future__ import annotations

import functools
import re
import typing
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from memroute import validate
from memroute.errors import InputError
from memroute.retrieval import RecallOptions
from memroute.types import Hit, MemoryItem, MemoryKind, Message, Sensitivity

Kind = Literal["episode", "note", "fact", "message"]
SensitivityName = Literal["public", "private", "secret"]
StrategyName = Literal["semantic_only", "keyword_boost", "temporal", "hybrid"]
LanguageName = Literal["en", "ja", "ko", "und"]
# The schema states every rule on strings as a pattern (the same in Python's re and ECMAScript: character
# classes with \xHH / \uHHHH escapes, no lookaround), checked here in plain Python or by the library; a test
# checks that each pattern and its check agree.
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""The characters Python's ``str.isspace`` (hence ``strip``) treats as white space."""
NO_NUL = r"^[^\x00]*$"
NOT_BLANK = rf"^[^\x00]*[^\x00{_SPACE}][^\x00]*$"
"""Some character other than white space, and no NUL."""
_YEAR = r"(?:1(?:10[1-9]|1[1-9]\d|[2-9]\d\d)|[2-7]\d{3}|8(?:[0-7]\d\d|8[0-8]\d|89[0-8]))"
TIME_PATTERN = (rf"^{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
                r"(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$")
"""An RFC 3339 time with its offset, in the years 1101 to 8898: inside the range the library accepts in
UTC (1100 to 8899, :mod:`memroute.times`) whatever the offset."""

_TIME = re.compile(TIME_PATTERN)


def _not_blank(value: str) -> str:
    if "\x00" in value or not value.strip():
        raise ValueError("must have a character other than white space, and no NUL")
    return value


def _time(value: str) -> str:
    if not _TIME.fullmatch(value):
        raise ValueError("must be an RFC 3339 time with its offset in the years 1101-8898, e.g. "
                         "2026-11-20T10:00:00+09:00 or 2026-11-20T01:00:00Z")
    return value


Name = Annotated[str, Field(min_length=1, max_length=256, json_schema_extra={"pattern": NOT_BLANK}),
                 AfterValidator(_not_blank)]
"""Ids, sessions, roles and other names: not blank, no NUL (422 otherwise)."""
Time = Annotated[str, Field(max_length=64, json_schema_extra={"pattern": TIME_PATTERN, "format": "date-time"},
                            description="RFC 3339 time with its offset, years 1101-8898, e.g. "
                            "2026-11-20T10:00:00+09:00"), AfterValidator(_time)]
# The library refuses these itself, with a 400 that says why: the schema states its rule.
Text = Annotated[str, Field(json_schema_extra={"pattern": NO_NUL})]
"""Text that may be empty (no NUL)."""
NonBlank = Annotated[str, Field(json_schema_extra={"pattern": NOT_BLANK})]
"""Text with some words (not only white space), no NUL."""
_SENSITIVITY: dict[Sensitivity, SensitivityName] = {Sensitivity.PUBLIC: "public", Sensitivity.PRIVATE: "private",
                                                   Sensitivity.SECRET: "secret"}
Words = Annotated[list[Annotated[str, Field(max_length=256)]], Field(max_length=200)]


def _metadata(value: dict[str, Any]) -> dict[str, Any]:
    """The library's metadata rules (JSON values, 64-bit integers, no NUL, depth and size): a 422 per item.

    JSON has one kind of number: ``1e20`` is an integer to JSON Schema, outside 64 bits, though Python reads
    it as a float. The schema's rule (:data:`METADATA_VALUE_SCHEMA`) is the one enforced here."""
    try:
        out = validate.metadata(value)
    except InputError as exc:
        raise ValueError(str(exc)) from None
    stack: list[Any] = [out]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and item.is_integer() and not -validate.INT64_LIMIT <= item < validate.INT64_LIMIT:
            raise ValueError(f"metadata holds {item:g}, an integer outside the 64-bit range; store it as a string")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


METADATA_VALUE = "MetadataValue"
"""The name of the schema component that states a metadata value's rules, at any depth."""
_VALUE_REF = {"$ref": f"#/components/schemas/{METADATA_VALUE}"}
METADATA_VALUE_SCHEMA: dict[str, Any] = {
    "title": METADATA_VALUE,
    "description": "A JSON value in metadata: integers within 64 bits, strings and keys without NUL.",
    "anyOf": [{"type": "null"}, {"type": "boolean"},
              {"type": "integer", "minimum": -validate.INT64_LIMIT, "maximum": validate.INT64_LIMIT - 1},
              {"type": "number", "not": {"type": "integer"}},
              {"type": "string", "pattern": NO_NUL},
              {"type": "array", "items": _VALUE_REF},
              {"type": "object", "propertyNames": {"pattern": NO_NUL}, "additionalProperties": _VALUE_REF}]}
"""Added to the OpenAPI document's components by :func:`memroute.service.app.create_app`."""
Metadata = Annotated[dict[str, Any], Field(json_schema_extra={"propertyNames": {"pattern": NO_NUL},
                                                              "additionalProperties": _VALUE_REF},
                                           description="A JSON object: keys without NUL, integers within 64 bits, "
                                           "at most 32 levels deep and 1 MB as JSON."), AfterValidator(_metadata)]


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
    """Strict, as the schema says: 0 is not false and "5" not 5; but 5.0 is the integer 5, as in JSON Schema."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        _check_unicode(data)
        if isinstance(data, dict):
            whole = _integer_fields(cls)
            data = {k: int(v) if k in whole and isinstance(v, float) and v.is_integer() else v for k, v in data.items()}
        return data


@functools.cache
def _integer_fields(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(name for name, field in model.model_fields.items()
                     if field.annotation is int or int in typing.get_args(field.annotation))


# --------------------------------------------------------------------------------------------- requests
class MemoryIn(RequestBody):
    """A memory to remember (the keyword arguments of :meth:`memroute.Memory.remember`)."""

    text: NonBlank = Field(description="What to remember (for an episode: what the user said).")
    session: Name | None = None
    kind: Kind = "note"
    reply: Text | None = Field(None, description="For an episode: the assistant's answer, kept apart.")
    occurred_at: Time | None = None
    expires_at: Time | None = None
    sensitivity: SensitivityName = "public"
    source_type: Name | None = None
    metadata: Metadata = Field(default_factory=dict)
    id: Name | None = Field(None, description="Your id for it (default: a new random id).")
    context: str | None = Field(None, description="Surrounding text (e.g. neighbouring turns), indexed for BM25 "
                                "with a lower weight.")
    embed_text: NonBlank | None = Field(None, description="Text to embed instead of `text` (e.g. the turn with "
                                        "its neighbours).")
    supersedes: list[Name] | None = Field(None, max_length=100, description="Ids of stored memories this one "
                                          "replaces (a fact that changed); they are kept and marked superseded "
                                          "in recalls.")

    def fields(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class ImportIn(RequestBody):
    """Items are read one by one (:meth:`memories`): with ``skip_invalid`` any object is taken and one that is
    not a valid memory is reported; without, every item must be one, as the schema's ``else`` says."""

    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"skip_invalid": {"const": True}}, "required": ["skip_invalid"]},
        "else": {"properties": {"items": {"items": {"$ref": "#/components/schemas/MemoryIn"}}}}})

    items: list[dict[str, Any]] = Field(max_length=1000, description="At most 1,000 memories (MemoryIn) per "
                                        "request; stored in one transaction.")
    skip_invalid: bool = Field(False, description="Store the valid items and report the others (by position), "
                               "instead of refusing the whole request.")

    def memories(self) -> tuple[list[tuple[int, MemoryIn]], list[tuple[int, str]]]:
        """The items that are valid memories (with their positions), and the reasons of the others."""
        valid: list[tuple[int, MemoryIn]] = []
        invalid: list[tuple[int, str]] = []
        for index, item in enumerate(self.items):
            try:
                valid.append((index, MemoryIn.model_validate(item)))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                invalid.append((index, f"{where}: {first['msg']}" if where else str(first["msg"])))
        return valid, invalid


class MemoryPatch(RequestBody):
    """Fields to change; a field left out keeps its value, ``null`` clears it (``text`` and ``archived`` cannot be
    cleared: give ``false`` to unarchive)."""

    text: NonBlank = Field(None)  # type: ignore[assignment]  # may be left out, never null
    session: Name | None = None
    kind: Kind | None = None
    reply: Text | None = None
    occurred_at: Time | None = None
    expires_at: Time | None = None
    archived: bool = Field(None)  # type: ignore[assignment]  # may be left out, never null
    sensitivity: SensitivityName | None = None
    source_type: Name | None = None
    metadata: Metadata | None = None
    context: str | None = None
    embed_text: NonBlank | None = None


class MessageIn(RequestBody):
    role: Name = Field(description="user, assistant, system, tool, ...")
    text: Text
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
    text: Text = Field(description="The user's message of this turn.")
    session: Name | None = Field(None, description="The conversation it belongs to: its last turns are read "
                                 "from the conversation log unless recent_messages is given.")
    recent_messages: list[Turn] | None = Field(None, max_length=50)
    now: Time | None = Field(None, description="When the message was sent (default: now); time ranges such as "
                             "'last week' are resolved in its time zone.")
    options: RecallOptionsIn | None = None
    trace: bool = Field(True, description="Include the trace (strategy, expanded queries, searches, candidates, "
                        "per-stage milliseconds).")


class RouteIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={  # stated for clients; the server answers 400
        "if": {"properties": {"session": {"type": "string"}}, "required": ["session"]},
        "then": {"properties": {"hints": {"maxItems": 0}, "tags": {"maxItems": 0}}},
        "description": "hints and tags only without a session (with one, they must be left out or empty)."})

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
    metadata: Metadata = Field(default_factory=dict)


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
