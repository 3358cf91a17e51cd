"""The data memroute works on (SPEC section 1), as frozen dataclasses.

Times are timezone-aware UTC ``datetime`` values; a naive datetime passed in is taken as UTC, and
:mod:`memroute.times` states the range accepted.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from memroute.times import checked_time

Language = Literal["en", "ja", "ko", "und"]
"""A detected language: English, Japanese, Korean, or undetermined (no letters, or another script)."""


class Sensitivity(enum.IntEnum):
    """How private a memory is; a search names the highest level it may return."""

    PUBLIC = 0
    PRIVATE = 1
    SECRET = 2

    @classmethod
    def parse(cls, value: Sensitivity | str | int) -> Sensitivity:
        """A sensitivity, its name (``"private"``) or its number (0, 1, 2); anything else is an ``InputError``."""
        if isinstance(value, Sensitivity):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value in cls._value2member_map_:
            return cls(value)
        if isinstance(value, str) and value.strip().upper() in cls.__members__:
            return cls[value.strip().upper()]
        from memroute.errors import InputError

        names = ", ".join(f"{s.name.lower()} ({s.value})" for s in cls)
        raise InputError(f"unknown sensitivity {value!r:.40}: use one of {names}")


class MemoryKind(enum.StrEnum):
    EPISODE = "episode"
    NOTE = "note"
    FACT = "fact"
    MESSAGE = "message"


class AgentStatus(enum.StrEnum):
    ACTIVE = "active"
    IDLE = "idle"
    INACTIVE = "inactive"
    ERROR = "error"


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime | str | None, what: str = "time") -> datetime | None:
    """A datetime (naive taken as UTC) or ISO 8601 string as aware UTC; ``None`` stays ``None``.

    Anything else, or a time outside the accepted range (:mod:`memroute.times`), is an ``InputError``.
    """
    return checked_time(value, what)


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One retrievable unit: an episode, a note, a fact or a message.

    For an episode, ``text`` is what the user said and ``reply`` what the assistant answered (kept
    apart, as seed 001's memory pack shows them separately).
    """

    id: str
    owner: str
    text: str
    kind: MemoryKind = MemoryKind.NOTE
    session_id: str | None = None
    reply: str | None = None
    occurred_at: datetime | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
    archived: bool = False
    sensitivity: Sensitivity = Sensitivity.PUBLIC
    source_type: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    language: Language = "und"

    @property
    def full_text(self) -> str:
        """The text that is indexed: the user's words and, for an episode, the reply."""
        return self.text if not self.reply else f"{self.text}\n{self.reply}"


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of a session's conversation log."""

    session_id: str
    role: str
    text: str
    created_at: datetime
    owner: str = ""
    id: int | None = None


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """What every search honours (SPEC section 3). ``owner`` is required: reads are per owner."""

    owner: str
    session_id: str | None = None
    kinds: tuple[MemoryKind, ...] | None = None
    max_sensitivity: Sensitivity = Sensitivity.PUBLIC
    start: datetime | None = None
    end: datetime | None = None
    include_expired: bool = False
    include_archived: bool = False
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ScoredId:
    """A store search result before the memory is loaded: higher ``score`` is better."""

    id: str
    score: float


@dataclass(frozen=True, slots=True)
class Hit:
    """A memory with its score and the per-source scores that produced it."""

    memory: MemoryItem
    score: float
    scores: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Agent:
    """An agent or tool a message can be routed to (SPEC section 1, seed 004)."""

    id: str
    name: str
    description: str = ""
    keywords: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    input_types: tuple[str, ...] = ("text",)
    status: AgentStatus = AgentStatus.ACTIVE
    version: str = ""
    usage_count: int = 0
    last_used: datetime | None = None
    examples: tuple[str, ...] = ()
    threshold: float | None = None
    prompt: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


def as_tuple(values: Sequence[str] | str | None) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        return (values,)
    return tuple(str(v) for v in values)
