"""``create_app``: the FastAPI application of the memroute service.

Endpoints (JSON; the schema is at ``/openapi.json``, the docs page at ``/docs``)::

    GET    /healthz  /readyz                      no key needed
    GET    /metrics                               Prometheus text format
    POST   /v1/memories            remember       GET /v1/memories (list)    GET /v1/search?q=
    POST   /v1/memories/import     many at once   GET|PATCH|DELETE /v1/memories/{id}
    DELETE /v1/sessions/{session}  forget a session        DELETE /v1/owner   forget everything
    POST   /v1/sessions/{session}/messages        GET /v1/sessions/{session}/messages
    POST   /v1/recall  /v1/route  /v1/analyze     one user turn
    GET    /v1/agents              PUT|DELETE /v1/agents/{id}

Every ``/v1`` request and ``/metrics`` need an API key (``Authorization: Bearer <key>`` or
``X-API-Key``), except in development mode (no keys configured: loopback clients only). ``?owner=``
names the owner a request acts for (default: the key's only owner); another owner's memory answers 404,
exactly like a memory that does not exist.

Mounting more beside the API is one line, after ``create_app``::

    app.mount("/mcp", mcp_asgi_app)                      # routes registered first win, so
    app.mount("/console", StaticFiles(directory=...))    # a mount at "/" goes last
    app.state.lifespans.append(session_manager.run)      # started with the app, stopped after it

A mounted app reaches the same memory, keys, limits and threads through ``app.state.service``
(:class:`memroute.service.core.Service`), and shares the body limits and HTTP metrics middleware.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI

from memroute import __version__
from memroute.config import Settings
from memroute.memory import Memory
from memroute.routing import load_catalogue
from memroute.service import errors
from memroute.service.api import ROUTERS
from memroute.service.auth import KeyRing
from memroute.service.console import mount_console
from memroute.service.core import Service
from memroute.service.mcp_mount import mount_mcp
from memroute.service.middleware import BodyLimit, HttpMetrics, RequestIds
from memroute.service.schemas import METADATA_VALUE, METADATA_VALUE_SCHEMA
from memroute.types import Agent

Lifespan = Callable[[], AbstractAsyncContextManager[Any]]
"""A context entered at startup and left at shutdown (``app.state.lifespans``)."""


def create_app(settings: Settings | None = None, memory: Memory | None = None, *,
               agents: Sequence[Agent] | None = None, keys: KeyRing | None = None) -> FastAPI:
    """The service over ``memory`` (default: ``Memory.open`` on ``settings.store``, closed at shutdown).

    ``agents`` is the default catalogue (default: the ``agents`` setting's file, else none); ``keys``
    the API keys (default: from the settings). Raises :class:`~memroute.errors.ConfigError` for a
    configuration that cannot be served safely, e.g. no keys on a non-loopback ``settings.host``.
    """
    settings = settings or Settings.load()
    if agents is None:
        agents = load_catalogue(settings.agents) if settings.agents else ()
    owned = memory is None
    memory = memory if memory is not None else Memory.open(settings.store, settings=settings)
    try:
        service = Service(memory, settings, tuple(agents), keys)
    except BaseException:
        if owned:
            memory.close()
        raise

    hooks: list[Lifespan] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if owned:
                stack.callback(memory.close)
            for hook in hooks:
                await stack.enter_async_context(hook())
            yield

    app = FastAPI(title="memroute", version=__version__, lifespan=lifespan, default_response_class=errors.Json,
                  redoc_url=None, docs_url=None,  # /docs: offline, served by mount_console
                  description="Conversation-aware routing and memory recall in English, Japanese and Korean.")
    app.state.service = service
    app.state.lifespans = hooks
    _state_metadata_values(app)
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router)
    mount_mcp(app, service)
    mount_console(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes, timeout_s=settings.request_timeout_s)
    app.add_middleware(HttpMetrics)
    app.add_middleware(RequestIds)  # outermost: every answer has an id, and no exception reaches the server
    return app


def _state_metadata_values(app: FastAPI) -> None:
    """The schema names the rules of a metadata value at any depth (a recursive component pydantic does not
    make from ``dict[str, Any]``)."""
    make = app.openapi

    def openapi() -> dict[str, Any]:
        schema = make()
        schema.setdefault("components", {}).setdefault("schemas", {}).setdefault(METADATA_VALUE, METADATA_VALUE_SCHEMA)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
