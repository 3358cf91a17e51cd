"""``ConversationRouter``: route a message in its conversation (seed 000's ``MemoryAwareRouter``, done right).

- A self-contained message is routed on its own text; history never takes part in that decision.
- A later message keeps the current agent unless another one clearly wins on the message's own text
  (:mod:`memroute.routing.policy`): the bar drops for a long message, a new request, "also", an explicit
  switch or after the assistant finished a task, and rises for a bare answer ("the 2nd", "I want four").
- A first message that needs context ("and for two people?") is routed with the recent turns and, when
  the memory can search, the related memories.
- The assistant's replies are read from the conversation log as evidence about the current task.

The session's route (current agent, task evidence, last message read) is kept in the store under the
``routing`` namespace, so a restarted process continues exactly where the last one stopped.
"""

from __future__ import annotations

import base64
import hashlib
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from memroute.embed.base import Vectors
from memroute.embed.by_language import reads_strong
from memroute.errors import InputError
from memroute.routing.agents import check_agents
from memroute.routing.composite import EMBED_CHARS, AgentRouter, ScoredQuery
from memroute.routing.cues import Cues, read_cues
from memroute.routing.fitted import FittedRouting
from memroute.routing.index import F32, CatalogueIndex
from memroute.routing.llm_assist import assist
from memroute.routing.policy import Action, PolicyParams, Step, TurnFeatures, catalogue_scale, normalised, user_step
from memroute.routing.query import AgentScore, RouterQuery
from memroute.routing.strategies import PreparedQuery
from memroute.text import tokenize
from memroute.types import Agent, Message

STATE_NAMESPACE = "routing"
_EVIDENCE_KEEP = 200
"""Evidence is stored for at most this many agents (the best ones): enough to revise, small to store."""
REPLY_ROLES = frozenset({"assistant", "system", "bot", "agent"})
"""Roles of the conversation log whose turns the router reads as the agent's replies."""
_PREPARED_KEEP = 1024
"""Replies encoded ahead (:meth:`ConversationRouter.add_reply`) kept for at most this many (~4 KB each)."""


@dataclass(frozen=True, slots=True)
class _Pair:
    """A Japanese or Korean message read together with the previous user turn (``"previous\nmessage"``)."""

    text: str
    previous: str
    encoded: Future[Vectors] | None = None
    """Its own encoding, started ahead (``PolicyParams.pair_encoded``)."""
    previous_vector: F32 | None = None
    """Otherwise the previous turn's vector as that turn stored it, to be joined with the message's."""


class ConversationLog(Protocol):
    """What the router needs from a store: named state and the conversation log (``memroute.stores.Store``
    has all of it)."""

    def put_state(self, namespace: str, key: str, value: dict[str, Any], owner: str = "") -> None: ...

    def get_state(self, namespace: str, key: str, owner: str = "") -> dict[str, Any] | None: ...

    def recent_messages(self, session_id: str, owner: str, limit: int = 20) -> list[Message]: ...

    def add_messages(self, messages: Sequence[Message]) -> None: ...


@dataclass(frozen=True, slots=True)
class ConversationDecision:
    """Where a message went and why.

    ``action``: ``routed`` (first message, on its own text), ``stayed`` (kept the current agent),
    ``revised`` (the task's evidence now favours another agent), ``switched`` (another agent clearly won),
    ``kept`` (nothing to route on, e.g. only an emoji: the current agent stays) or ``no_route``.
    ``candidates`` are the best agents on this message's own text with their strategy scores.
    """

    agent: Agent | None
    action: Action
    reason: str
    previous: str | None
    used_context: bool
    continuation: str
    cues: tuple[str, ...]
    confidence: float
    candidates: tuple[AgentScore, ...] = ()
    gap: float = 0.0
    margin: float = 0.0
    latency_ms: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)
    """Every allowed candidate's score on this message's own text (the best 1,000 in huge catalogues)."""
    llm: tuple[dict[str, Any], ...] = ()
    """What each LLM step did (keywords, intents, route_rerank), when the router has an LLM."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent.id if self.agent else None, "action": self.action, "reason": self.reason,
            "previous": self.previous, "used_context": self.used_context, "continuation": self.continuation,
            "cues": list(self.cues), "confidence": round(self.confidence, 4), "gap": round(self.gap, 3),
            "margin": None if self.margin == float("inf") else round(self.margin, 3),
            "candidates": [c.as_dict() for c in self.candidates], "scores": self.scores,
            "latency_ms": round(self.latency_ms, 3), "llm": list(self.llm),
        }


def _analysis(text: str, recent: Sequence[Message]) -> tuple[str, bool, str | None]:
    """(continuation, needs context, cue) from the query-understanding package when it is there."""
    try:
        from memroute import analysis
    except ImportError:  # pragma: no cover - the package is part of memroute
        return "unknown", False, None
    analyze = getattr(analysis, "analyze", None)
    if analyze is None:
        return "unknown", False, None
    try:
        result: Any = analyze(text, list(recent), datetime.now(UTC))
    except Exception:  # query understanding is advisory here: a failure must not stop routing
        return "unknown", False, None
    cont: Any = getattr(result, "continuation", None)
    kind = getattr(cont, "kind", None) or getattr(cont, "value", None) or (cont if isinstance(cont, str) else None)
    cue = getattr(cont, "cue", None)
    return str(kind or "unknown"), bool(getattr(result, "needs_context", False)), str(cue) if cue else None


class ConversationRouter:
    """Route each user message of a session to an agent, taking the conversation into account.

    ``memory`` is a :class:`memroute.Memory` (its store keeps the state and the log, and its ``search``
    supplies related memories) or a bare store. ``agents`` is the catalogue. ``log_messages`` appends each
    routed user message to the session's log (turn it off if the application logs them itself).
    ``fitted`` is a fit from the team's own labelled conversations (:func:`memroute.routing.load_fit`,
    ``memroute fit --dialogues``): its examples join the agents, its rule and calibration replace the
    zero-shot ones (``params`` given explicitly still win).
    """

    lazy_replies = True
    """Encode the assistant's replies only for a turn that stays (the switch test never reads them)."""
    encode_ahead = True
    """Encode a Japanese or Korean message on a worker thread while the rest of the turn is read (same
    vectors, less waiting; see :meth:`AgentRouter.encode_ahead`)."""

    def __init__(self, memory: Any, agents: Sequence[Agent], *, router: AgentRouter | None = None,
                 params: PolicyParams | None = None, owner: str | None = None, context_window: int = 8,
                 use_memories: bool = True, log_messages: bool = True, candidates: int = 10,
                 fitted: FittedRouting | None = None) -> None:
        self.memory = memory
        store = getattr(memory, "store", memory)
        for method in ("get_state", "put_state", "recent_messages", "add_messages"):
            if not callable(getattr(store, method, None)):
                raise InputError(f"ConversationRouter needs a Memory or a store with {method}(); "
                                 f"got {type(memory).__name__}")
        self.store: ConversationLog = store
        self.owner = owner if owner is not None else str(getattr(memory, "owner", "") or "")
        if fitted is not None and not fitted.usable(check_agents(agents)):
            fitted = None  # an agent the fit knows nothing about: zero-shot (the warning says why)
        if router is None:
            router = AgentRouter(calibration=fitted.calibration if fitted is not None else None)
        if fitted is not None:  # a fit from the team's own conversations (memroute fit --dialogues)
            fitted.check(router)
            agents = fitted.apply(check_agents(agents))
            params = params or fitted.policy
        self.fitted = fitted
        """The routing fit in use (``None``: zero-shot)."""
        self.agents = check_agents(agents)
        if not self.agents:
            raise InputError("no agents to route to: pass at least one Agent (or load a catalogue)")
        self.router = router
        self.params = params or PolicyParams()
        self.context_window = context_window
        self.use_memories = use_memories and callable(getattr(memory, "search", None))
        self.log_messages = log_messages
        self.candidates = candidates
        self.index: CatalogueIndex = self.router.index(self.agents)
        emb_weight = sum(s.weight for s in self.router.strategies if s.name == "embedding")
        scale = catalogue_scale(self.index.piece_matrix, self.index.piece_owner, self.index.piece_starts)
        # Scores are sums over the total weight, so the floor follows the embedding's share of it.
        self.floor = self.params.scale_floor * scale * emb_weight / self.router.total_weight or 0.01
        self._prepared: OrderedDict[str, PreparedQuery] = OrderedDict()
        self._prepared_lock = threading.Lock()
        embedder = self.router.embedder
        self._encoder_id = f"{embedder.model_id}/{embedder.dimension}" if embedder is not None else ""
        """Whose vectors the session's state stores (the key of a stored vector names it)."""

    # --------------------------------------------------------------------------------- public API
    def route(self, text: str, session: str, *, owner: str | None = None) -> ConversationDecision:
        """Route one user message of ``session`` (an unknown session simply starts a new conversation)."""
        start = time.perf_counter()
        if not isinstance(session, str) or not session.strip():
            raise InputError("route needs a session id (any non-empty string; a new one starts a conversation)")
        if not isinstance(text, str) or not text.strip():
            raise InputError("the message is empty: route needs the user's text")
        owner = self.owner if owner is None else owner
        # A slow encoding (e5) starts first, on another core: state, analysis and cues are read meanwhile.
        vector = self.router.encode_ahead(text, frame=True) if self.encode_ahead else None
        state = self.store.get_state(STATE_NAMESPACE, session, owner) or {}
        recent = self.store.recent_messages(session, owner, self.context_window)
        current = self.index.position.get(str(state.get("current") or ""))
        evidence = self._load_evidence(state) if current is not None else None
        # The message read with the previous user turn (task evidence if the turn stays): the previous turn's
        # stored vector, or, with ``pair_encoded``, the pair's own encoding started now beside the message's.
        pair = self._pair_ahead(text, recent, state) if current is not None and self.params.with_previous else None
        last_seen = int(state.get("last_message_id") or 0)
        # The assistant's replies since the last routed message: their text is read now (cues), their
        # encoding only when the task's evidence is needed (below): a turn that switches starts new evidence.
        replies = [m.text for m in recent if (m.id is None or m.id > last_seen) and m.text.strip()
                   and m.role.lower() in REPLY_ROLES]
        assistant_text = replies[-1] if replies else None
        continuation, needs_context, analysis_cue = _analysis(text, recent)
        # Only the explicit switch phrases of :mod:`cues` lower the bar: query understanding also calls
        # "something else" a switch, which in a task means another option of the same kind (on SGD dev, 4 %
        # of the turns it marked moved to another service, against 11 % of all turns).
        cues = read_cues(text, assistant_text, [m.text for m in recent])
        prepared = self.router.prepare(RouterQuery(text=text), vector=vector, frame=True)
        scored = self.router.score(prepared, self.index)
        records: tuple[dict[str, Any], ...] = ()
        if self.router.llm is not None and scored.has_signal:
            scored, records = assist(self.router, self.router.llm, scored, needs_context=needs_context)
        previous = self.agents[current].id if current is not None else None
        used_context = False
        if not scored.has_signal:
            evidence = self._with_replies(evidence, replies)
            decision = self._decide_without_words(scored, current, previous, continuation, cues)
        else:
            scores = scored.total
            if current is None and needs_context:
                scores, used_context = self._with_context(text, scored, recent, session, owner)
            features = TurnFeatures(cues, len(scored.query.tokens), "?" in text or "？" in text,
                                    continuation == "follow_up", reads_strong(self.router.embedder, text))
            # The switch test never reads the evidence, so only a turn that stays pays for the replies and
            # for reading the message with the previous user turn.
            stays = current is not None and (not self.lazy_replies or user_step(
                self.params, scores, scored.allowed, current, evidence, features, self.floor).action
                in ("stayed", "revised"))
            if replies and stays:
                evidence = self._with_replies(evidence, replies)
            if stays and pair is not None:
                features = self._with_previous(features, pair, scored.query)
            step = self._step(scores, scored.allowed, current, evidence, features)
            current, evidence = step.current, step.evidence
            decision = self._decision(scored, step.action, current, previous, step.gap, step.margin,
                                      step.challenger, used_context, continuation, cues, analysis_cue)
        if pair is not None and pair.encoded is not None:
            pair.encoded.cancel()  # a turn that switched (or had no words) does not need it: not started, not run
        own = scored.query.vector if self.params.with_previous and reads_strong(self.router.embedder, text) else None
        self._save(session, owner, state, current, evidence, recent, text, own)
        return _with_latency(replace(decision, llm=records) if records else decision, start)

    def _step(self, scores: F32, allowed: npt.NDArray[np.bool_], current: int | None, evidence: F32 | None,
              features: TurnFeatures) -> Step:
        """The policy's decision on one user turn (a method, so that fitting can record what it was given)."""
        return user_step(self.params, scores, allowed, current, evidence, features, self.floor)

    def add_reply(self, session: str, text: str, *, owner: str | None = None) -> None:
        """Log the assistant's reply to ``session`` and encode it now, while the user reads it.

        The next :meth:`route` of the session reads the reply as evidence about the task; encoding it
        here takes that work off the path the user waits on (multilingual-e5 costs ~20-30 ms a Japanese or
        Korean text on one core). Logging the reply with ``Memory.add_message`` instead routes the same
        way, with the encoding paid in the next ``route``; so does a reply logged on another process."""
        if not isinstance(session, str) or not session.strip():
            raise InputError("add_reply needs the session id the reply belongs to")
        if not isinstance(text, str) or not text.strip():
            raise InputError("the reply is empty: add_reply needs the assistant's text")
        owner = self.owner if owner is None else owner
        self.store.add_messages([Message(session, "assistant", text, datetime.now(UTC), owner)])
        self.prepare_reply(text)

    def prepare_reply(self, text: str) -> None:
        """Encode an assistant reply ahead of the next :meth:`route` (for an application that logs its
        replies itself): decisions are the same, only the time moves. At most the last 1,024 are kept."""
        if not text.strip():
            return
        prepared = self.router.prepare(text)
        with self._prepared_lock:
            self._prepared[text] = prepared
            self._prepared.move_to_end(text)
            while len(self._prepared) > _PREPARED_KEEP:
                self._prepared.popitem(last=False)

    def reset(self, session: str, *, owner: str | None = None) -> None:
        """Forget a session's route (the next message is routed as a first message)."""
        self.store.put_state(STATE_NAMESPACE, session, {}, self.owner if owner is None else owner)

    # --------------------------------------------------------------------------------- internals
    def _with_replies(self, evidence: F32 | None, replies: Sequence[str]) -> F32 | None:
        """The task evidence with the assistant's replies added (each scored on its own text)."""
        if evidence is None:
            return None
        for reply in replies:
            with self._prepared_lock:
                prepared = self._prepared.pop(reply, None)
            a = self.router.score(prepared or reply, self.index)
            evidence = evidence + self.params.assistant_weight * normalised(a.total, self.floor)
        return evidence

    def _pair_ahead(self, text: str, recent: Sequence[Message], state: dict[str, Any]) -> _Pair | None:
        """A Japanese or Korean message with the previous user turn ("내일 세 시에 치과 잡아 줘\n응 그렇게 해"):
        with ``pair_encoded`` its own encoding started on a worker thread beside the message's, otherwise the
        previous turn's stored vector (``None`` for other messages or a session without a user turn)."""
        prior = [m.text for m in recent if m.role.lower() == "user" and m.text.strip()]
        if not prior or not reads_strong(self.router.embedder, text):
            return None
        joined = f"{prior[-1]}\n{text}"
        if self.params.pair_encoded:
            return _Pair(joined, prior[-1], encoded=self.router.encode_ahead(joined) if self.encode_ahead else None)
        return _Pair(joined, prior[-1], previous_vector=_stored_vector(state, prior[-1], self._encoder_id))

    def _with_previous(self, features: TurnFeatures, pair: _Pair, message: PreparedQuery) -> TurnFeatures:
        """The message read together with the previous user turn: its scores as task evidence (only a turn that
        stays reads it). Its vector is the pair's own encoding (``pair_encoded``: one more e5 encoding, started
        by :meth:`_pair_ahead`) or, by default, the two turns' own vectors joined (:func:`joined`): nothing is
        encoded (the previous turn's vector is the one it stored; a turn this router did not route, e.g. after
        the log was written by another program, is encoded or read from the embedding cache)."""
        embedder = self.router.embedder
        if self.params.pair_encoded or message.vector is None or embedder is None:
            prepared = self.router.prepare(RouterQuery(text=pair.text), vector=pair.encoded)
        else:
            previous = pair.previous_vector
            if previous is None or previous.shape != message.vector.shape:
                previous = embedder.embed([pair.previous[:EMBED_CHARS]], side="query")[0]
            vector = joined(previous, len(tokenize(pair.previous)), message.vector, len(message.tokens))
            prepared = self.router.prepare(RouterQuery(text=pair.text), vector=vector)
        scored = self.router.score(prepared, self.index)
        return replace(features, with_previous=normalised(scored.total, self.floor))

    def _load_evidence(self, state: dict[str, Any]) -> F32:
        """The stored evidence; agents beyond the stored best ``_EVIDENCE_KEEP`` get the lowest stored value."""
        stored = state.get("evidence") or {}
        values = {i: float(v) for k, v in stored.items() if (i := self.index.position.get(str(k))) is not None
                  and isinstance(v, int | float)} if isinstance(stored, dict) else {}
        evidence = np.full(self.index.n, min(values.values(), default=0.0), dtype=np.float32)
        for i, value in values.items():
            evidence[i] = value
        return evidence

    def _with_context(self, text: str, scored: ScoredQuery, recent: Sequence[Message], session: str,
                      owner: str) -> tuple[F32, bool]:
        """A first message that needs context: add the previous user turn and related memories, each
        with a smaller weight than the message itself."""
        scores = scored.total.copy()
        used = False
        prior = [m for m in recent if m.role.lower() == "user" and m.text.strip()]
        if prior:
            scores += self.params.context_weight * self.router.score(prior[-1].text, self.index).total
            used = True
        if self.use_memories:
            try:
                hits = self.memory.search(text, limit=2, owner=owner, mode="hybrid")
            except Exception:  # related memories are a bonus; a store without them must still route
                hits = []
            for hit in hits:
                scores += 0.25 * self.router.score(hit.memory.text, self.index).total
                used = True
        return scores.astype(np.float32), used

    def _decide_without_words(self, scored: ScoredQuery, current: int | None, previous: str | None,
                              continuation: str, cues: Cues) -> ConversationDecision:
        if current is not None:
            return ConversationDecision(self.agents[current], "kept", "the message has no words to route on; "
                                        "kept the current agent", previous, False, continuation, cues.names, 0.0)
        return ConversationDecision(None, "no_route", "the message has no words to route on (emoji or "
                                    "punctuation only) and the session has no agent yet: ask the user",
                                    previous, False, continuation, cues.names, 0.0)

    def _decision(self, scored: ScoredQuery, action: Action, current: int, previous: str | None, gap: float,
                  margin: float, challenger: int | None, used_context: bool, continuation: str, cues: Cues,
                  analysis_cue: str | None) -> ConversationDecision:
        ranked = self.router.order(scored, limit=min(self.candidates, self.index.n))
        conf = self.router.calibration.confidence(self.router.confidence_features(scored, ranked))
        candidates = tuple(
            AgentScore(self.agents[i], float(scored.total[i]), conf if r == 0 else 0.0,
                       self.router.calibration.threshold_for(self.agents[i]), r + 1, self.router.explain(scored, i))
            for r, i in enumerate(ranked))
        agent = self.agents[current]
        cue_text = ", ".join(cues.names) or "none"
        other = self.agents[challenger].id if challenger is not None else None
        if action == "routed":
            context = " with recent context" if used_context else ""
            reason = f"first message of the session, routed on its own text{context} to {agent.id!r}"
        elif action == "switched":
            reason = (f"{agent.id!r} leads {previous!r} by {gap:.1f} on this message's own words, more than "
                      f"the margin {margin:.1f} a switch needs here (cues: {cue_text})")
        elif action == "revised":
            reason = (f"the task's evidence so far (user and assistant turns) now favours {agent.id!r} over "
                      f"{previous!r}")
        else:
            bar = "a closing never switches" if margin == float("inf") else f"a switch needs a lead of {margin:.1f}"
            lead = f"; best other {other!r} leads by {gap:.1f}" if other else ""
            reason = f"follow-up kept {agent.id!r} ({bar}{lead}; cues: {cue_text})"
        if analysis_cue:
            reason += f"; analysis cue {analysis_cue!r}"
        everyone = self.router.order(scored, limit=min(1000, self.index.n))
        scores = {self.agents[i].id: round(float(scored.total[i]), 5) for i in everyone}
        return ConversationDecision(agent, action, reason, previous, used_context, continuation, cues.names,
                                    conf, candidates, gap, margin, scores=scores)

    def _save(self, session: str, owner: str, state: dict[str, Any], current: int | None, evidence: F32 | None,
              recent: Sequence[Message], text: str, vector: F32 | None = None) -> None:
        last_id = max([int(state.get("last_message_id") or 0), *(m.id for m in recent if m.id is not None)])
        if self.log_messages:
            self.store.add_messages([Message(session, "user", text, datetime.now(UTC), owner)])
            after = self.store.recent_messages(session, owner, 1)
            if after and after[-1].id is not None:
                last_id = max(last_id, after[-1].id)
        value: dict[str, Any] = {"last_message_id": last_id, "updated_at": datetime.now(UTC).isoformat()}
        if current is not None:
            value["current"] = self.agents[current].id
            if evidence is not None:
                keep = np.argsort(-evidence, kind="stable")[:_EVIDENCE_KEEP]
                value["evidence"] = {self.agents[int(i)].id: round(float(evidence[i]), 5) for i in keep}
        if vector is not None:  # the next turn reads the two turns together without encoding this one again
            value["vector"] = base64.b64encode(vector.astype("<f2").tobytes()).decode("ascii")
            value["vector_of"] = _text_key(text, self._encoder_id)
        self.store.put_state(STATE_NAMESPACE, session, value, owner)


def joined(previous: F32, previous_words: int, message: F32, message_words: int) -> F32:
    """The vector of two turns read together, from their own vectors: each weighted by the square root of its
    token count (mean pooling over the joined text weighs a longer turn more, but its tokens also attend to each
    other), normalised."""
    out = math.sqrt(max(previous_words, 1)) * previous + math.sqrt(max(message_words, 1)) * message
    norm = float(np.linalg.norm(out))
    result: F32 = (out / norm if norm > 0 else out).astype(np.float32)
    return result


def _text_key(text: str, encoder: str) -> str:
    """The key a stored vector is kept under: its text and the encoder that made it (a session routed before the
    catalogue's encoder changed must not join a vector of the old model's space with one of the new)."""
    return hashlib.sha1(f"{encoder}\0{text}".encode()).hexdigest()[:16]


def _stored_vector(state: dict[str, Any], text: str, encoder: str) -> F32 | None:
    """The vector the session's last routed message stored, if that message is ``text`` encoded by ``encoder``."""
    stored = state.get("vector")
    if not isinstance(stored, str) or state.get("vector_of") != _text_key(text, encoder):
        return None
    try:
        raw = base64.b64decode(stored.encode("ascii"), validate=True)
    except ValueError:
        return None
    if not raw or len(raw) % 2:
        return None
    vector: F32 = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    return vector


def _with_latency(decision: ConversationDecision, start: float) -> ConversationDecision:
    return replace(decision, latency_ms=(time.perf_counter() - start) * 1000.0)
