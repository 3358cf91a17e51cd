"""The MCP server inside the HTTP service: streamable HTTP at ``/mcp/``, scoped by the service's API keys.

An MCP client sends the same key as an API client (``Authorization: Bearer <key>`` or ``X-API-Key``);
each tool call acts for the key's owner, or for the ``owner`` argument if the key may act for it, and is
rate-limited with the key's API calls. The tools route against the service's default catalogue (the
``agents`` setting); per-owner catalogues edited through ``/v1/agents`` are an HTTP API feature.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.requests import Request

from memroute.errors import AuthError
from memroute.mcp import create_mcp_server, mcp_http_app
from memroute.service.core import Service

PATH = "/mcp"


def _presented_key(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key")


def mount_mcp(app: FastAPI, service: Service) -> None:
    """Serve the memory tools over streamable HTTP at ``/mcp/`` and start their session manager with the app."""

    def scope(request: Request | None, requested: str | None) -> str:
        if request is None:  # only stdio calls have no request, and this server is HTTP only
            raise AuthError("an API key is required", status=401)
        host = request.client.host if request.client else None
        return service.authorize(_presented_key(request), host, requested).owner

    server = create_mcp_server(service.memory, service.catalogues.default.agents, scope)
    # on a loopback address the MCP transport also refuses other Host headers (DNS rebinding)
    inner = mcp_http_app(server, path="/", host=service.settings.host)
    app.mount(PATH, inner)
    app.state.lifespans.append(server.session_manager.run)
