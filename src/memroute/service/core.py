"""The service's shared state: one :class:`memroute.Memory`, the keys, the limits and the catalogues.

``app.state.service`` holds it, so whatever is mounted beside the HTTP API (the MCP endpoint, the web
console) authenticates, scopes owners, rate-limits and runs library calls exactly as the API does:
``caller = service.authorize(key, client_host, owner)``, then ``await service.run(lambda: ...)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.responses import Response

from memroute.config import Settings
from memroute.embed import CachedEmbedder, routing_embedder
from memroute.errors import AuthError, ConfigError, MemrouteError
from memroute.memory import Memory
from memroute.routing import AgentRouter
from memroute.routing.fitted import load_fit
from memroute.service.auth import KeyRing, Principal, is_loopback
from memroute.service.catalogue import Catalogues
from memroute.service.errors import Json
from memroute.service.limits import RateLimiter, Runner
from memroute.types import Agent

T = TypeVar("T")
log = logging.getLogger("memroute.service")


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request: who sent it and the one owner it acts for."""

    principal: Principal
    owner: str


class Service:
    def __init__(self, memory: Memory, settings: Settings, agents: tuple[Agent, ...] = (),
                 keys: KeyRing | None = None) -> None:
        self.memory = memory
        self.settings = settings
        self.keys = keys if keys is not None else KeyRing.from_settings(settings)
        if self.keys.open and not is_loopback(settings.host):
            raise ConfigError(f"refusing to serve on {settings.host} without API keys: anyone who can reach it "
                              "could read every owner's memories. Configure keys (memroute new-key OWNER, then "
                              "MEMROUTE_API_KEYS or api_keys_file), or bind 127.0.0.1 for development")
        self.rate = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)
        self.strangers = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)
        """Requests without a valid key, per client address."""
        self.runner = Runner(settings.server_threads, settings.server_queue)
        # A routing fit: the routing_fit setting, else AGENTS.fit.json next to the catalogue file.
        fitted = load_fit(settings.routing_fit or None, settings.agents or None)
        self.router = AgentRouter(embedder=routing_embedder(memory.embedder), llm=memory.llm,
                                  calibration=fitted.calibration if fitted is not None else None,
                                  bank=settings.routing_bank)
        if fitted is not None:
            fitted.check(self.router)
        self.catalogues = Catalogues(memory, self.router, agents, fitted)

    def authenticate(self, key: str | None, client_host: str | None) -> Principal:
        """Check ``key`` and take a rate-limit token; raises ``AuthError`` (401) or ``RateLimitError`` (429).

        A request without a valid key takes its token from its client address's bucket (as large as a
        key's) and is answered 429 instead of 401 once that is empty, so guessing keys or calling without
        one is rate-limited like any key. A valid key is limited per key only, never by address: clients
        behind one proxy share an address, and a stranger there must not be able to lock them out.
        """
        try:
            principal = self.keys.authenticate(key, client_host)
        except AuthError:
            self.strangers.check(f"addr:{client_host}", "this client address without a valid API key")
            raise
        self.rate.check(principal.key_id)
        return principal

    def authorize(self, key: str | None, client_host: str | None, owner: str | None) -> Caller:
        """:meth:`authenticate`, then settle the owner the request acts for; raises ``AuthError`` (403) for
        an owner the key may not act for, ``InputError`` for an owner id that cannot be one."""
        principal = self.authenticate(key, client_host)
        return Caller(principal, principal.owner_for(owner))

    def prepare_reply(self, text: str) -> None:
        """Encode an agent's reply as it is logged, so that the next routed turn of its session finds the
        vector in the encoder's cache instead of encoding it while the user waits (run after the answer)."""
        if not isinstance(self.router.embedder, CachedEmbedder) or not text.strip():
            return  # an uncached encoder would encode it again in the route
        try:
            self.router.prepare(text)
        except MemrouteError as exc:  # only time was to be saved: the route encodes it (and reports) itself
            log.warning("encoding a logged reply ahead failed: %s", exc)

    async def run(self, fn: Callable[[], T]) -> T:
        """Run a blocking library call in a worker thread (see :mod:`memroute.service.limits`)."""
        return await self.runner.run(fn)

    async def run_json(self, fn: Callable[[], Any], status_code: int = 200) -> Response:
        """:meth:`run`, with the answer rendered as JSON in the worker thread too: the event loop only sends
        the bytes, and FastAPI does not walk the answer again to validate it against a response model."""
        return await self.runner.run(lambda: Json(fn(), status_code=status_code))
