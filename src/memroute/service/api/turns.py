"""One user turn: recall the memories that matter, route it to an agent, or analyse it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from memroute.analysis import analyze as analyze_text
from memroute.errors import InputError
from memroute.observability.metrics import ROUTING_LATENCY
from memroute.routing import RouterQuery
from memroute.service.api.deps import ERRORS, CallerDep, ServiceDep
from memroute.service.core import Service
from memroute.service.schemas import AnalyzeIn, RecallIn, RouteIn

router = APIRouter(prefix="/v1", tags=["turns"], responses=ERRORS)

DEFAULT_CANDIDATES = 50
"""Candidates a route answer shows with scores and reasons when ``top_k`` is not given."""


def _check_length(service: Service, text: str) -> None:
    limit = service.settings.max_text_chars
    if len(text) > limit:
        raise InputError(f"text has {len(text):,} characters, more than the limit of {limit:,} (max_text_chars)")


@router.post("/recall", response_model=dict[str, Any],
             summary="The memories that matter for this turn, with the memory pack and the trace")
async def recall(body: RecallIn, caller: CallerDep, service: ServiceDep) -> Response:
    """The recall pipeline in one call: analyse and expand the message, choose a strategy, search, fuse,
    rerank, decide whether to inject, and format the ``[EPISODE_EVIDENCE]`` memory pack."""
    recent = None if body.recent_messages is None else [t.model_dump() for t in body.recent_messages]
    options = body.options.to_options() if body.options is not None else None

    def work() -> dict[str, Any]:
        result = service.memory.recall(body.text, session=body.session, owner=caller.owner, recent_messages=recent,
                                       now=body.now, options=options)
        out = result.to_dict(trace=body.trace)
        out["memory_pack"] = result.memory_pack()
        return out

    return await service.run_json(work)


@router.post("/route", response_model=dict[str, Any],
             summary="Route a message to an agent, in its conversation when a session is given")
async def route(body: RouteIn, caller: CallerDep, service: ServiceDep) -> Response:
    """With ``session``: conversation-aware routing (a follow-up stays with the current agent, an explicit
    switch moves; the session's route is kept in the store and the message added to its log). Without:
    the message alone. Either way every candidate's score is returned, the best ones with each strategy's
    part and the matched terms."""
    _check_length(service, body.text)
    if body.session is not None and (body.hints or body.tags):
        raise InputError("hints and tags apply to routing without a session; leave them out, or the session")

    def work() -> dict[str, Any]:
        if body.session is not None:
            catalogue, conv = service.catalogues.conversation_router(
                caller.owner, body.top_k or DEFAULT_CANDIDATES)
            decision = conv.route(body.text, body.session, owner=caller.owner)
            ROUTING_LATENCY.labels("conversation").observe(decision.latency_ms)
            return {"mode": "conversation", "catalogue": catalogue.source, **decision.as_dict()}
        catalogue = service.catalogues.require(caller.owner)
        query = RouterQuery(text=body.text, hints=tuple(body.hints), tags=tuple(body.tags))
        top_k = min(body.top_k or DEFAULT_CANDIDATES, len(catalogue.agents))
        out = service.router.route(query, service.catalogues.routable(catalogue), top_k=top_k, include_scores=True)
        ROUTING_LATENCY.labels("agent").observe(out.latency_ms)
        return {"mode": "message", "catalogue": catalogue.source, **out.as_dict()}

    return await service.run_json(work)


@router.post("/analyze", response_model=dict[str, Any],
             summary="Query understanding of one message in its conversation")
async def analyze(body: AnalyzeIn, caller: CallerDep, service: ServiceDep) -> Response:
    """References and what they resolve to, continuation or switch, query type, time range, keywords,
    named things, compound parts, intent (rule-based, deterministic)."""
    _check_length(service, body.text)

    def work() -> dict[str, Any]:
        recent: list[Any] = []
        if body.recent_messages is not None:
            recent = [t.model_dump() for t in body.recent_messages]
        elif body.session is not None:
            recent = list(service.memory.recent_messages(body.session, owner=caller.owner, limit=8))
        return analyze_text(body.text, recent, body.now).to_dict()

    return await service.run_json(work)
