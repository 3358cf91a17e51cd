"""The MCP server inside the HTTP service: streamable HTTP at ``/mcp/``, behind the service's API keys.

An MCP client sends the same key as an API client (``Authorization: Bearer <key>`` or ``X-API-Key``) on
every request: :class:`KeyGate` authenticates each one before the MCP transport sees it (``initialize``
and ``tools/list`` included), with the API's rate limits (per key; per client address without a valid
key), and answers a refusal as the API does (401 / 429 ``{"type", "message", "detail"}``). Each tool call
acts for the key's owner, or for the ``owner`` argument if the key may act for it. The tools route against
the service's default catalogue (the ``agents`` setting); per-owner catalogues edited through
``/v1/agents`` are an HTTP API feature.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from memroute.errors import AuthError, MemrouteError
from memroute.mcp import create_mcp_server, mcp_http_app
from memroute.service.auth import Principal
from memroute.service.core import Service
from memroute.service.errors import memroute_error_response

PATH = "/mcp"
_PRINCIPAL = "mcp_principal"


def _presented_key(headers: dict[bytes, bytes]) -> str | None:
    scheme, _, value = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = headers.get(b"x-api-key")
    return key.decode("latin-1") if key is not None else None


class KeyGate:
    """Authenticate every HTTP request before ``app`` sees it; the principal goes to the request's state."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        try:
            principal = self.service.authenticate(_presented_key(dict(scope["headers"])),
                                                  client[0] if client else None)
        except MemrouteError as exc:
            await memroute_error_response(exc)(scope, receive, send)
            return
        state = scope.get("state")
        scope["state"] = {**state, _PRINCIPAL: principal} if isinstance(state, dict) else {_PRINCIPAL: principal}
        await self.app(scope, receive, send)


def mount_mcp(app: FastAPI, service: Service) -> None:
    """Serve the memory tools over streamable HTTP at ``/mcp/`` and start their session manager with the app."""

    def scope(request: Request | None, requested: str | None) -> str:
        principal = request.scope.get("state", {}).get(_PRINCIPAL) if request is not None else None
        if not isinstance(principal, Principal):  # KeyGate lets nothing through without one
            raise AuthError("an API key is required", status=401)
        return principal.owner_for(requested)

    server = create_mcp_server(service.memory, service.catalogues.default.agents, scope)
    # on a loopback address the MCP transport also refuses other Host headers (DNS rebinding)
    inner = mcp_http_app(server, path="/", host=service.settings.host)
    app.mount(PATH, KeyGate(inner, service))
    app.state.lifespans.append(server.session_manager.run)
