"""Each owner's agent catalogue, kept in the store so that a restart (or another replica) keeps it.

An owner starts with the service's default catalogue (``memroute serve --agents FILE``, setting
``agents``); the first change through the API saves the owner's own copy, as named state
(``service.agents`` / ``catalogue``) of that owner, so one owner's catalogue never routes another's
messages. Parsed catalogues and their conversation routers are cached by revision: the routers' agent
indexes (documents, embeddings) are built once per revision, not per request.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memroute.errors import InputError, NotFoundError, ServiceError
from memroute.memory import Memory
from memroute.routing import AgentRouter, ConversationRouter
from memroute.routing.agents import agent_from_dict, agent_to_dict, check_agents
from memroute.routing.fitted import FittedRouting
from memroute.types import Agent

NAMESPACE = "service.agents"
KEY = "catalogue"
_CACHE = 64


@dataclass(frozen=True, slots=True)
class Catalogue:
    agents: tuple[Agent, ...]
    revision: str
    """``default`` for the service's default catalogue, else a new id at every change."""

    @property
    def source(self) -> str:
        return "default" if self.revision == "default" else "owner"


class Catalogues:
    """Read and change owners' catalogues; hand out the routers that route over them."""

    def __init__(self, memory: Memory, router: AgentRouter, default: Sequence[Agent] = (),
                 fitted: FittedRouting | None = None) -> None:
        self.memory = memory
        self.router = router
        self.fitted = fitted
        """A routing fit (``memroute fit --dialogues``): its examples join every catalogue's agents of the same
        ids when routing (never the stored catalogues), its rule replaces the zero-shot one."""
        self.default = Catalogue(check_agents(default), "default")
        self._parsed: OrderedDict[str, Catalogue] = OrderedDict()
        self._routable: OrderedDict[str, tuple[Agent, ...]] = OrderedDict()
        self._routers: OrderedDict[tuple[str, int], ConversationRouter] = OrderedDict()
        self._lock = threading.RLock()
        if self.default.agents:
            router.index(self.routable(self.default))  # build the default index before the first request

    def get(self, owner: str) -> Catalogue:
        stored = self.memory.store.get_state(NAMESPACE, KEY, owner)
        if not stored:
            return self.default
        revision = str(stored.get("revision", ""))
        with self._lock:
            found = self._parsed.get(revision)
            if found is None:
                found = Catalogue(tuple(agent_from_dict(a, f"stored catalogue of {owner!r}")
                                        for a in stored.get("agents", [])), revision)
                self._parsed[revision] = found
                while len(self._parsed) > _CACHE:
                    self._parsed.popitem(last=False)
            self._parsed.move_to_end(revision)
            return found

    def put(self, owner: str, agent_id: str, fields: dict[str, Any]) -> tuple[Agent, bool]:
        """Add or replace one agent; returns it and whether it is new."""
        if fields.get("id") not in (None, agent_id):
            raise ServiceError(f"the body's id {fields['id']!r} differs from the id in the path {agent_id!r}: leave "
                               "it out, or send the same", status=409, kind="Conflict")
        agent = agent_from_dict({k: v for k, v in fields.items() if v not in (None, [], {}, "")} | {"id": agent_id},
                                f"agent {agent_id!r}")
        with self._lock:  # one change at a time in this process; between replicas the last write wins
            agents = list(self.get(owner).agents)
            position = next((i for i, a in enumerate(agents) if a.id == agent_id), None)
            if position is None:
                agents.append(agent)
            else:
                agents[position] = agent
            self._save(owner, agents)
        return agent, position is None

    def delete(self, owner: str, agent_id: str) -> None:
        with self._lock:
            agents = list(self.get(owner).agents)
            kept = [a for a in agents if a.id != agent_id]
            if len(kept) == len(agents):
                raise NotFoundError(f"no agent {agent_id!r} in the catalogue of owner {owner!r}")
            self._save(owner, kept)

    def conversation_router(self, owner: str, candidates: int) -> tuple[Catalogue, ConversationRouter]:
        catalogue = self.require(owner)
        key = (catalogue.revision, candidates)
        with self._lock:
            found = self._routers.get(key)
            if found is not None:
                self._routers.move_to_end(key)
                return catalogue, found
        agents = self.routable(catalogue)
        fitted = self.fitted if agents is not catalogue.agents else None
        conv = ConversationRouter(self.memory, agents, router=self.router, candidates=candidates,
                                  params=fitted.policy if fitted is not None else None)
        with self._lock:
            self._routers[key] = conv
            while len(self._routers) > _CACHE:
                self._routers.popitem(last=False)
        return catalogue, conv

    def routable(self, catalogue: Catalogue) -> tuple[Agent, ...]:
        """The catalogue's agents as routing sees them: with the fit's examples when the fit covers them (the
        same objects every time, so the router's index is built once per revision)."""
        if self.fitted is None:
            return catalogue.agents
        with self._lock:
            found = self._routable.get(catalogue.revision)
            if found is None:
                usable = self.fitted.usable(catalogue.agents)  # else zero-shot, with a warning in the log
                found = self._routable[catalogue.revision] = (self.fitted.apply(catalogue.agents) if usable
                                                              else catalogue.agents)
                while len(self._routable) > _CACHE:
                    self._routable.popitem(last=False)
            return found

    def require(self, owner: str) -> Catalogue:
        catalogue = self.get(owner)
        if not catalogue.agents:
            raise InputError(f"owner {owner!r} has no agents to route to: add some with PUT /v1/agents/{{id}}, or "
                             "start the service with --agents FILE")
        return catalogue

    # ------------------------------------------------------------------------------------ internals
    def _save(self, owner: str, agents: list[Agent]) -> None:
        check_agents(agents)
        self.memory.store.put_state(NAMESPACE, KEY, {"revision": uuid.uuid4().hex,
                                                     "agents": [agent_to_dict(a) for a in agents]}, owner)
