"""The memory tools of the MCP server: ``remember``, ``recall``, ``route``, ``analyze``, ``forget``.

Each tool's docstring is its description and its annotated parameters are its JSON schema, written so
that an agent can use the tools without being told how.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from memroute.analysis import analyze as _analyze
from memroute.embed import routing_embedder
from memroute.errors import InputError
from memroute.mcp.server import OwnerScope, guard, owner_of
from memroute.memory import Memory
from memroute.retrieval import RecallOptions
from memroute.routing import AgentRouter, ConversationRouter
from memroute.types import Agent, Message, utcnow


class Turn(BaseModel):
    """One turn of the conversation before the message, oldest first."""

    role: Annotated[str, Field(description="who spoke: user or assistant", max_length=40)]
    text: Annotated[str, Field(description="what was said", max_length=20_000)]


Owner = Annotated[str | None, Field(description="the owner (user or tenant id) to act for; leave it out to use "
                                                "the one this connection is bound to", max_length=256)]
Session = Annotated[str | None, Field(description="the conversation (session) id the message belongs to",
                                      max_length=256)]
Text = Annotated[str, Field(description="the text", min_length=1, max_length=100_000)]
Recent = Annotated[list[Turn] | None, Field(description="the turns before this message, oldest first "
                                                        "(instead of reading the session's log)", max_length=50)]
Now = Annotated[str | None, Field(description="when the message is sent, ISO 8601 with offset "
                                              "(e.g. 2025-03-12T15:00:00+09:00); default: now")]


class MemoryTools:
    def __init__(self, memory: Memory, agents: Sequence[Agent], scope: OwnerScope) -> None:
        self.memory = memory
        self.agents = tuple(agents)
        self.scope = scope
        self.router: AgentRouter | None = None
        self.conversations: ConversationRouter | None = None
        if self.agents:  # index the catalogue now, so that the first call is as fast as the others
            self.router = AgentRouter(embedder=routing_embedder(memory.embedder), bank=memory.settings.routing_bank)
            self.conversations = ConversationRouter(memory, self.agents, router=self.router)

    def register(self, server: MCPServer[Any]) -> None:
        for tool in (self.remember, self.recall, self.route, self.analyze, self.forget):
            server.add_tool(guard(tool), name=tool.__name__)

    def remember(self, ctx: Context[Any, Any], text: Annotated[str, Field(
                     description="what to remember, in the user's words (any language)", min_length=1,
                     max_length=100_000)],
                 kind: Annotated[Literal["note", "fact", "episode", "message"], Field(
                     description="fact: a stable fact about the user; note: anything else worth keeping; "
                                 "episode: an exchange (text = the user's words, reply = the answer)")] = "note",
                 reply: Annotated[str | None, Field(description="for an episode: the assistant's answer",
                                                    max_length=100_000)] = None,
                 session: Session = None,
                 occurred_at: Annotated[str | None, Field(description="when it happened, ISO 8601; default: "
                                                                     "now")] = None,
                 sensitivity: Annotated[Literal["public", "private", "secret"], Field(
                     description="how private it is; recall returns secret memories only when asked "
                                 "for them")] = "public",
                 metadata: Annotated[dict[str, Any] | None, Field(description="free JSON object kept with the "
                                                                              "memory")] = None,
                 owner: Owner = None) -> dict[str, Any]:
        """Store one memory so that `recall` can find it later (a fact about the user, a decision, a note,
        or an episode: the user's words with the assistant's reply). Returns the new memory's id."""
        item = self.memory.remember(text, owner=owner_of(self.scope, ctx, owner), session=session, kind=kind,
                                    reply=reply, occurred_at=occurred_at or utcnow(), sensitivity=sensitivity,
                                    metadata=metadata, source_type="mcp")
        return {"id": item.id, "kind": str(item.kind), "session_id": item.session_id, "language": item.language,
                "occurred_at": item.occurred_at.isoformat() if item.occurred_at else None}

    def recall(self, ctx: Context[Any, Any], text: Annotated[str, Field(
                   description="the user's current message, as written", min_length=1, max_length=100_000)],
               session: Session = None, recent_messages: Recent = None, now: Now = None,
               limit: Annotated[int, Field(description="most memories to return", ge=1, le=50)] = 5,
               max_sensitivity: Annotated[Literal["public", "private", "secret"], Field(
                   description="the most private memories that may be returned (secret ones only when "
                               "asked for)")] = "private",
               owner: Owner = None) -> dict[str, Any]:
        """Find the memories that matter for the user's message, in English, Japanese or Korean, taking the
        conversation into account ("that one", 「あれどうなった？」, "지난주"). Returns the memories with scores
        and reasons, `should_inject`, and `memory_pack`: an [EPISODE_EVIDENCE] block to paste into the prompt
        (empty when nothing is relevant enough)."""
        resolved = owner_of(self.scope, ctx, owner)
        turns = None if recent_messages is None else [{"role": t.role, "text": t.text} for t in recent_messages]
        result = self.memory.recall(text, session=session, owner=resolved, recent_messages=turns, now=now,
                                    options=RecallOptions(limit=limit, max_sensitivity=max_sensitivity))
        return {**result.to_dict(trace=False), "memory_pack": result.memory_pack()}

    def route(self, ctx: Context[Any, Any], text: Annotated[str, Field(
                  description="the user's message", min_length=1, max_length=100_000)],
              session: Annotated[str | None, Field(
                  description="the conversation id: the message is routed in its conversation (follow-ups stay "
                              "with the current agent) and the session's route is remembered", max_length=256)] = None,
              top_k: Annotated[int, Field(description="how many candidates to list", ge=1, le=20)] = 3,
              owner: Owner = None) -> dict[str, Any]:
        """Pick the agent (or tool) of the catalogue that should handle the user's message, with every
        candidate's score and the reason. `agent` is null when no agent is confident enough: ask the user."""
        resolved = owner_of(self.scope, ctx, owner)
        if self.router is None or self.conversations is None:
            raise InputError("no agent catalogue is loaded: start the server with --agents FILE (TOML/YAML/JSON)")
        if session is not None:
            return self.conversations.route(text, session, owner=resolved).as_dict()
        return self.router.route(text, self.agents, top_k=top_k, include_scores=True).as_dict()

    def analyze(self, text: Annotated[str, Field(description="the message to analyse", min_length=1,
                                                 max_length=100_000)],
                recent_messages: Recent = None, now: Now = None) -> dict[str, Any]:
        """Explain how memroute understands a message: language, references ("it", 「それ」, "그거") and what
        they resolve to in the recent turns, follow-up or topic switch, query type, time range ("last week",
        「先週」), keywords, compound parts, and the code-request intent and question category."""
        turns = [Message("", t.role, t.text, utcnow()) for t in recent_messages or ()]
        return _analyze(text, turns, now).to_dict()

    def forget(self, ctx: Context[Any, Any],
               ids: Annotated[list[Annotated[str, Field(min_length=1, max_length=256)]] | None, Field(
                   description="ids of the memories to delete", max_length=1000)] = None,
               session: Annotated[str | None, Field(description="delete every memory of this session (and its "
                                                                "conversation log)", max_length=256)] = None,
               owner: Owner = None) -> dict[str, Any]:
        """Delete memories for good, by id or by session, from every index at once. Returns how many were
        deleted (0 for ids that do not exist)."""
        resolved = owner_of(self.scope, ctx, owner)
        if (ids is None) == (session is None):
            raise InputError("forget needs either ids or a session (not both, not neither)")
        deleted = self.memory.forget(ids, owner=resolved) if ids is not None else \
            self.memory.forget(session=session, owner=resolved)
        return {"deleted": deleted}

