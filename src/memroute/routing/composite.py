"""``AgentRouter``: seed 004's composite router (strategies summed, status gating, deterministic order,
calibrated confidence and a no-route answer)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from memroute.analysis.clauses import find_main_clause
from memroute.analysis.payload import find_payload
from memroute.embed import ROUTING_EMBEDDER, Embedder, Vectors, embed_ahead, get_embedder
from memroute.embed.by_language import runs_strong
from memroute.errors import InputError
from memroute.llm.steps import LlmAssistant
from memroute.routing.bank import BUILTIN, RequestBank, bank_from_setting
from memroute.routing.calibration import Calibration, ConfidenceFeatures, gap_scale
from memroute.routing.index import F32, AgentCache, CatalogueIndex
from memroute.routing.llm_assist import assist
from memroute.routing.query import AgentScore, RouterOutput, RouterQuery, StrategyScore
from memroute.routing.strategies import (
    MentionStrategy,
    PreparedQuery,
    Strategy,
    ToolHintStrategy,
    content_types_of,
    default_strategies,
)
from memroute.text import tokenize
from memroute.text.language import detect_language
from memroute.types import Agent

# Embedding more than this only costs time: the sentence encoders read a few hundred tokens.
EMBED_CHARS = 2000
FRAME_WEIGHT = 0.5
"""``AgentRouter.frame_weight``'s default (docs/benchmarks.md, routing, the twentieth ja/ko pass)."""
_FRAME_LANGUAGES = frozenset({"ja", "ko"})


@dataclass(frozen=True, slots=True)
class ScoredQuery:
    """Every agent's score for one query, before ranking: what :class:`ConversationRouter` builds on."""

    index: CatalogueIndex
    query: PreparedQuery
    parts: dict[str, F32]
    total: F32
    """Sum of the strategies over the sum of their weights, in [0, 1], per agent."""
    allowed: npt.NDArray[np.bool_]
    """Status gating: which agents may be returned for this query."""

    @property
    def has_signal(self) -> bool:
        """False when the message has nothing to route on (no words, content, hints or tags)."""
        q = self.query
        return bool(q.tokens or q.content_types or q.hints or q.tags or any(ch.isalnum() for ch in q.text))


class AgentRouter:
    """Route a query to the best of a list of agents (seed 004's ``AgentRouter``).

    ``strategies`` default to mention, embedding, BM25, keyword boost, tool hint and file type; each
    returns [0, weight] per agent, and an agent's score is their sum over the sum of the weights.
    ``embedder`` is a name (the default ``"use-m3+e5-ja-ko"``: use-m3, plus multilingual-e5-small for
    Japanese and Korean texts), an :class:`Embedder`, or ``None`` for lexical routing only. ``calibration``
    holds the confidence weights and thresholds (``memroute fit``). ``llm``
    adds seed 004's LLM keywords, intent labels and top-N rerank under its policy
    (:mod:`memroute.routing.llm_assist`); the output's ``llm`` records what each step did. ``bank`` is the
    bank of example requests read for Japanese and Korean messages (:mod:`memroute.routing.bank`): a
    :class:`RequestBank`, the ``routing_bank`` setting's form (``"builtin"``, the default; ``"off"``; paths), or
    ``None``; it belongs to the cache, so it is ignored when ``cache`` is given.

    ``frame_weight``: a Japanese or Korean message that carries a payload (a message to pass on, a text to
    translate, reported speech: :func:`memroute.analysis.payload.find_payload`) is also scored on its frame,
    the message without the payload, and every strategy's score becomes ``(1 - w)`` of the message's plus ``w``
    of the frame's: "딸한테 7시에 저녁 먹자고 보내 줘" is a message to send, whatever 저녁 says. A blend, not a
    replacement: in 「夕方から降るって言ってた？」 the payload is the domain and the frame says little, and a flat
    frame barely moves the ranking. English messages, and messages without a payload, are scored as before
    (their frame is never read). 0 turns it off.

    ``clause_weight``: the same blend for a Japanese or Korean message whose request is its main clause after
    subordinate clauses of circumstance (a reason, a time, a purpose, a condition, a background:
    :func:`memroute.analysis.clauses.find_main_clause`): "나갈 거니까 다 꺼 줘" is also read as "다 꺼 줘". A
    message with a payload keeps ``frame_weight`` (its frame loses its leading clauses too). ``None`` (the
    default): ``frame_weight``, one weight for both kinds of frame (docs/benchmarks.md, routing, the twenty-first
    ja/ko pass: the same plateau); 0 turns it off.
    """

    def __init__(self, strategies: Sequence[Strategy] | None = None, *,
                 embedder: Embedder | str | None = ROUTING_EMBEDDER, calibration: Calibration | None = None,
                 cache: AgentCache | None = None, llm: LlmAssistant | None = None,
                 bank: RequestBank | str | None = BUILTIN, frame_weight: float = FRAME_WEIGHT,
                 clause_weight: float | None = None) -> None:
        self.strategies = list(strategies) if strategies is not None else default_strategies()
        if not self.strategies:
            raise InputError("AgentRouter needs at least one strategy; omit strategies to get the defaults")
        names = [s.name for s in self.strategies]
        if len(set(names)) != len(names):
            raise InputError(f"strategy names must be unique, got {names}")
        self.embedder = get_embedder(embedder) if isinstance(embedder, str) else embedder
        self.calibration = calibration or Calibration()
        if isinstance(bank, str):
            bank = bank_from_setting(bank)
        self.cache = cache or AgentCache(self.embedder, bank=bank)
        self.total_weight = float(sum(s.weight for s in self.strategies)) or 1.0
        self.llm = llm
        clause_weight = frame_weight if clause_weight is None else clause_weight
        for name, value in (("frame_weight", frame_weight), ("clause_weight", clause_weight)):
            if not 0.0 <= value <= 1.0:
                raise InputError(f"{name} must be in [0, 1], got {value}")
        self.frame_weight = frame_weight
        self.clause_weight = clause_weight

    # ------------------------------------------------------------------------------------ scoring
    def index(self, agents: Sequence[Agent]) -> CatalogueIndex:
        """The precomputed catalogue (cached by agent id + version); call it to warm the cache."""
        return self.cache.index(agents)

    def prepare(self, query: RouterQuery | str, *, vector: Future[Vectors] | F32 | None = None,
                frame: bool = False) -> PreparedQuery:
        """The query as the strategies read it. ``vector``: its encoding started earlier by
        :meth:`encode_ahead` (the rest is prepared while it runs), or a vector already made (nothing is
        encoded). ``frame``: the query is a user's request as routed, so a Japanese or Korean one with a payload
        is also read on its frame (:meth:`frame_of`); off for what is read beside it (replies, the message
        joined with the previous turn, context), which would otherwise pay an encoding of their own."""
        q = RouterQuery.of(query)
        text = q.query_text()
        types = content_types_of([c.name for c in q.content], [c.mime for c in q.content], [c.type for c in q.content])
        if not text and not types and not q.hints and not q.tags:
            raise InputError("the query is empty: give it text, content, hints or tags")
        prepared = PreparedQuery(text, tokenize(text) if text else [], types, q.tags, q.hints)
        frame_text, frame_weight = (self.frame_of(text) if frame else None) or ("", 0.0)
        frame_query = PreparedQuery(frame_text, tokenize(frame_text), types, q.tags, q.hints) if frame_text else None
        if isinstance(vector, np.ndarray):
            prepared.vector = vector
        elif vector is not None:
            encoded = vector.result()
            prepared.vector = encoded[0]
            if frame_query is not None and len(encoded) > 1:
                frame_query.vector = encoded[1]
        elif self.embedder is not None and text:
            texts = [text[:EMBED_CHARS], *([frame_query.text] if frame_query else [])]  # frame_of reads the head
            encoded = self.embedder.embed(texts, side="query")
            prepared.vector = encoded[0]
            if frame_query is not None:
                frame_query.vector = encoded[1]
        if frame_query is not None and frame_query.vector is None and self.embedder is not None:
            frame_query.vector = self.embedder.embed([frame_query.text], side="query")[0]
        prepared.frame, prepared.frame_weight = frame_query, frame_weight
        return prepared

    def frame_of(self, text: str) -> tuple[str, float] | None:
        """The frame a Japanese or Korean message is also scored on and its weight (see the class docstring),
        else ``None``. Only the first :data:`EMBED_CHARS` are read, as only they are encoded: the readers'
        cost grows faster than the text (a 200k-character message took 22 s to read whole)."""
        text = text[:EMBED_CHARS]
        if not text or (self.frame_weight <= 0 and self.clause_weight <= 0) or (
                detect_language(text) not in _FRAME_LANGUAGES):
            return None
        frame, weight = text, 0.0
        payload = find_payload(text) if self.frame_weight > 0 else None
        if payload is not None:
            frame, weight = payload.frame, self.frame_weight
        main = find_main_clause(frame) if self.clause_weight > 0 else None
        if main is not None:
            frame, weight = main.frame, weight or self.clause_weight
        return (frame, weight) if weight > 0 else None

    def encode_ahead(self, query: RouterQuery | str, *, frame: bool = False) -> Future[Vectors] | None:
        """Start encoding ``query``'s text on a worker thread, for :meth:`prepare` to collect: the strong
        encoder (multilingual-e5, ~20-30 ms a Japanese or Korean text) then runs beside the rest of a turn's
        work on a second core. ``None`` when the encoding is quick (use-m3 alone, or cached): it is done in
        :meth:`prepare`. ``frame``: as :meth:`prepare`'s (its frame's encoding starts too)."""
        text = RouterQuery.of(query).query_text()[:EMBED_CHARS]
        if self.embedder is None or not text or not runs_strong(self.embedder, text, "query"):
            return None
        message = embed_ahead(self.embedder, [text], "query")
        found = self.frame_of(text) if frame else None
        if found is None:
            return message
        frame_text = found[0]  # read from the encoded head, so no longer than it
        # The frame on a second worker, beside the message (the int8 e5 engine runs two calls at once): one
        # batch of both cost 15 ms against 9 ms for the message alone (padding), two workers cost the longer.
        return _both(message, embed_ahead(self.embedder, [frame_text], "query"))

    def score(self, query: RouterQuery | str | PreparedQuery, agents: Sequence[Agent] | CatalogueIndex) -> ScoredQuery:
        """Every agent's score for ``query`` (no ranking): the building block of :meth:`route`."""
        index = agents if isinstance(agents, CatalogueIndex) else self.index(agents)
        prepared = query if isinstance(query, PreparedQuery) else self.prepare(query)
        parts = {s.name: s.scores(prepared, index) for s in self.strategies}
        if prepared.frame is not None and prepared.frame_weight > 0:
            w = np.float32(prepared.frame_weight)
            parts = {s.name: ((1 - w) * parts[s.name] + w * s.scores(prepared.frame, index)).astype(np.float32)
                     for s in self.strategies}
        total = np.zeros(index.n, dtype=np.float32)
        for part in parts.values():
            total += part
        # Rounded so that float noise never decides between agents whose evidence is the same.
        total = np.round(total / np.float32(self.total_weight), 6).astype(np.float32)
        return ScoredQuery(index, prepared, parts, total, self._gate(index, prepared, parts))

    def _gate(self, index: CatalogueIndex, query: PreparedQuery, parts: dict[str, F32]) -> npt.NDArray[np.bool_]:
        """Seed 004's status gating: active always; idle when mentioned or hinted; inactive and error
        only when named explicitly."""
        status = index.status_rank
        allowed = status == 0
        if (status != 0).any():
            named = np.zeros(index.n, dtype=bool)
            hinted = np.zeros(index.n, dtype=bool)
            for s in self.strategies:
                if isinstance(s, MentionStrategy):
                    named |= parts[s.name] > 0
                elif isinstance(s, ToolHintStrategy):
                    hinted |= parts[s.name] > 0
            allowed = allowed | ((status == 1) & (named | hinted)) | ((status >= 2) & named)
        out: npt.NDArray[np.bool_] = allowed
        return out

    def order(self, scored: ScoredQuery, scores: F32 | None = None, limit: int | None = None) -> list[int]:
        """Allowed agents best first: score desc, then seed 004's tie-breaks (status, last used, usage, name,
        id). With ``limit``, only the first ``limit`` (fast at 10,000 agents)."""
        values = scored.total if scores is None else scores
        candidates = np.flatnonzero(scored.allowed)
        if limit is not None and limit < candidates.size:
            vals = values[candidates]
            kth = np.partition(vals, vals.size - limit)[vals.size - limit]
            candidates = candidates[vals >= kth]  # ties with the k-th stay in, so tie-breaks decide
        keys = np.lexsort((scored.index.tiebreak[candidates], -values[candidates]))
        ranked: list[int] = candidates[keys].tolist()
        return ranked if limit is None else ranked[:limit]

    def explain(self, scored: ScoredQuery, agent: int) -> tuple[StrategyScore, ...]:
        return tuple(StrategyScore(s.name, round(float(scored.parts[s.name][agent]), 6),
                                   s.explain(scored.query, scored.index, agent))
                     for s in self.strategies if scored.parts[s.name][agent] > 0)

    def confidence_features(self, scored: ScoredQuery, ranked: Sequence[int]) -> ConfidenceFeatures:
        return _features_from(scored.total[list(ranked[:2])], scored.total[scored.allowed])

    # ------------------------------------------------------------------------------------ routing
    def route(self, query: RouterQuery | str, agents: Sequence[Agent], top_k: int = 1,
              include_scores: bool = False) -> RouterOutput:
        """Rank ``agents`` for ``query``; ``agent`` is ``None`` (no route) when the best agent's confidence is
        below its threshold, when no agent passes status gating, or when the message has nothing to route on."""
        start = time.perf_counter()
        if top_k < 1:
            raise InputError(f"top_k must be at least 1, got {top_k}")
        if not agents:
            raise InputError("no agents to route to: pass at least one Agent (or load a catalogue)")
        scored = self.score(self.prepare(query, frame=True), agents)
        records: tuple[dict[str, object], ...] = ()
        if self.llm is not None and scored.has_signal:
            scored, records = assist(self, self.llm, scored, locale=RouterQuery.of(query).locale)
        ranked = self.order(scored, limit=max(top_k, 2))
        out = self.output(scored, ranked, top_k, include_scores, start)
        return replace(out, llm=records, latency_ms=_ms(start)) if records else out

    def output(self, scored: ScoredQuery, ranked: Sequence[int], top_k: int, include_scores: bool,
               start: float, reason: str | None = None, confidence: float | None = None) -> RouterOutput:
        index = scored.index
        if not ranked:
            return RouterOutput((), None, 0.0, True, "no agent is available: all are idle, inactive or in error "
                                "and none was named", (), _ms(start))
        feats = self.confidence_features(scored, ranked)
        conf = self.calibration.confidence(feats) if confidence is None else confidence
        best = index.agents[ranked[0]]
        threshold = self.calibration.threshold_for(best)
        top = ranked[:top_k]
        scores: tuple[AgentScore, ...] = ()
        if include_scores:
            scores = tuple(
                AgentScore(index.agents[i], float(scored.total[i]),
                           conf if r == 0 else self.calibration.confidence(
                               _features_from(scored.total[[i, ranked[0]]], scored.total[scored.allowed])),
                           self.calibration.threshold_for(index.agents[i]), r + 1, self.explain(scored, i))
                for r, i in enumerate(top))
        agents = tuple(index.agents[i] for i in top)
        if not scored.has_signal:
            return RouterOutput(agents, None, 0.0, True, "the message has no words to route on (emoji or "
                                "punctuation only): ask the user what they need", scores, _ms(start))
        if scored.total[ranked[0]] <= 0:
            return RouterOutput(agents, None, 0.0, True, "no agent matched the message at all", scores, _ms(start))
        if conf < threshold:
            return RouterOutput(agents, None, conf, True, f"best agent {best.id!r} has confidence {conf:.2f}, below "
                                f"its threshold {threshold:.2f}: ask the user", scores, _ms(start))
        why = reason or _why(self, scored, ranked[0])
        return RouterOutput(agents, best, conf, False, why, scores, _ms(start))


def _both(first: Future[Vectors], second: Future[Vectors]) -> Future[Vectors]:
    """A future of ``first``'s rows then ``second``'s, done when both are (the first error wins)."""
    out: Future[Vectors] = Future()
    lock = threading.Lock()

    def done(_: Future[Vectors]) -> None:
        with lock:  # the two callbacks may run at once, on the two workers
            if not (first.done() and second.done()) or out.done():
                return
            try:
                out.set_result(np.vstack([first.result(), second.result()]))
            except BaseException as exc:  # the encoder's error reaches the caller of result()
                out.set_exception(exc)

    first.add_done_callback(done)
    second.add_done_callback(done)
    return out


def _features_from(pair: F32, allowed: F32) -> ConfidenceFeatures:
    """Features of the first score of ``pair`` against the second (or against nothing if alone)."""
    top = float(pair[0])
    gap = top - float(pair[1]) if pair.size > 1 else top
    return ConfidenceFeatures(top, gap, gap_scale(allowed))


def _why(router: AgentRouter, scored: ScoredQuery, agent: int) -> str:
    parts = sorted(((float(scored.parts[s.name][agent]), s.name) for s in router.strategies), reverse=True)
    shown = ", ".join(f"{name} {value:.2f}" for value, name in parts if value > 0)
    return f"highest score {float(scored.total[agent]):.3f} ({shown or 'no signal'})"


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
