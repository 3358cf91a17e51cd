"""What a router reads (:class:`RouterQuery`) and what it answers (:class:`RouterOutput`), after seed 004."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memroute.errors import InputError
from memroute.types import Agent

CONTENT_TYPES = ("text", "image", "audio", "video", "file")


@dataclass(frozen=True, slots=True)
class ContentItem:
    """One piece of a multimodal message: its ``type`` (text, image, audio, video, file) and, for text,
    the text; ``name`` / ``mime`` describe a file (its suffix feeds the file-type strategy)."""

    type: str = "text"
    text: str = ""
    name: str = ""
    mime: str = ""

    def __post_init__(self) -> None:
        if self.type not in CONTENT_TYPES:
            raise InputError(f"content type {self.type!r} is unknown; use one of {', '.join(CONTENT_TYPES)}")


@dataclass(frozen=True, slots=True)
class RouterQuery:
    """A routing request. ``text`` alone is enough; the rest are optional signals that an application
    (or an LLM) derived: ``tags`` (intent labels such as "translate"), ``hints`` (from mentions or
    commands, e.g. a tool name), ``locale``, and free ``meta`` that strategies may read."""

    text: str = ""
    content: tuple[ContentItem, ...] = ()
    tags: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    locale: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, query: RouterQuery | str) -> RouterQuery:
        return query if isinstance(query, RouterQuery) else cls(text=str(query))

    def query_text(self) -> str:
        """The one string every strategy reads (seed 004): ``text``, else the text of the content items."""
        if self.text.strip():
            return self.text.strip()
        return "\n".join(c.text.strip() for c in self.content if c.type == "text" and c.text.strip())

    def content_types(self) -> tuple[str, ...]:
        return tuple(sorted({c.type for c in self.content if c.type != "text"}))


@dataclass(frozen=True, slots=True)
class StrategyScore:
    """One strategy's contribution to an agent's score, in [0, its weight], with why (never the user's text:
    only normalised matched terms, tool names, file types, piece kinds)."""

    name: str
    score: float
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentScore:
    """A ranked candidate: its ``score`` in [0, 1] (the strategies' sum over their total weight), the
    ``confidence`` that it is the right agent, the threshold it had to reach, and each strategy's part."""

    agent: Agent
    score: float
    confidence: float
    threshold: float
    rank: int
    strategies: tuple[StrategyScore, ...] = ()

    @property
    def agent_id(self) -> str:
        return self.agent.id

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent.id, "name": self.agent.name, "rank": self.rank, "score": round(self.score, 4),
            "confidence": round(self.confidence, 4), "threshold": round(self.threshold, 4),
            "strategies": {s.name: {"score": round(s.score, 4), **dict(s.details)} for s in self.strategies},
        }


@dataclass(frozen=True, slots=True)
class RouterOutput:
    """The answer of :meth:`AgentRouter.route`.

    ``agents`` are the top-k candidates that passed status gating, best first (deterministic order);
    ``agent`` is the routed one, or ``None`` for **no route** (``no_route``: nothing reached its threshold,
    so the caller should ask the user); ``scores`` are filled when ``include_scores`` was asked for.
    """

    agents: tuple[Agent, ...]
    agent: Agent | None
    confidence: float
    no_route: bool
    reason: str
    scores: tuple[AgentScore, ...] = ()
    latency_ms: float = 0.0
    llm: tuple[Mapping[str, Any], ...] = ()
    """What each LLM step did (keywords, intents, route_rerank), when the router has an LLM."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent.id if self.agent else None, "no_route": self.no_route,
            "confidence": round(self.confidence, 4), "reason": self.reason,
            "agents": [a.id for a in self.agents], "scores": [s.as_dict() for s in self.scores],
            "latency_ms": round(self.latency_ms, 3), "llm": [dict(r) for r in self.llm],
        }


def as_content(items: Sequence[ContentItem | Mapping[str, Any]] | None) -> tuple[ContentItem, ...]:
    """Content items from dataclasses or plain mappings (``{"type": "image", "name": "a.png"}``)."""
    out: list[ContentItem] = []
    for item in items or ():
        if isinstance(item, ContentItem):
            out.append(item)
        else:
            out.append(ContentItem(**{k: str(v) for k, v in item.items() if k in ("type", "text", "name", "mime")}))
    return tuple(out)
