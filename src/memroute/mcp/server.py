"""The MCP server factory, owner scoping and error translation.

Owner scoping works as in the library: every tool call acts for exactly one owner, and nothing it does
can read or change another owner's data. Which owner is decided by an :data:`OwnerScope`, called on every
call with the transport's request and the ``owner`` argument the call named (if any):

- over stdio there is no request; :func:`single_owner` binds the server to one owner (``--owner``);
- mounted in the HTTP service, the scope authenticates the request (its API key) and returns the owner
  the key may act for, or raises ``AuthError`` / ``InputError`` to refuse, e.g.
  ``lambda request, owner: keyring.authenticate(api_key(request), host(request)).owner_for(owner)``.

Errors come back as MCP tool errors (``isError``) with the memroute error's class and message; an
unexpected failure is logged with its traceback and answered with a short message, never a crash.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request

from memroute import __version__
from memroute.errors import AuthError, MemrouteError
from memroute.memory import Memory
from memroute.types import Agent

log = logging.getLogger("memroute.mcp")

OwnerScope = Callable[[Request | None, str | None], str]
"""``(request, requested_owner) -> owner``: the owner a tool call acts for, or a ``MemrouteError`` to refuse.

``request`` is the Starlette request of the call over streamable HTTP and ``None`` over stdio;
``requested_owner`` is the tool's ``owner`` argument (``None`` when the call named none)."""

INSTRUCTIONS = (
    "memroute keeps an assistant's long-term memory and routes messages to agents. Call `recall` with the "
    "user's message at the start of a turn to get the memories that matter (with a ready-to-paste memory "
    "pack); call `remember` to keep a fact, note or episode worth recalling later; `route` picks the agent "
    "for a message; `analyze` explains how a message is understood; `forget` deletes memories. Every call "
    "acts for one owner: leave `owner` out unless you were told which owner to use."
)
INVESTIGATION_INSTRUCTIONS = (
    " Before changing code in a repository, run a guided investigation: `start_session` with the request, "
    "then `set_query_frame` with the slots you extract (each with an exact quote of the request), explore "
    "with the code tools (`find_definitions`, `find_references`, `search_text`, `get_symbols`, "
    "`analyze_structure`, `query`) passing the session id, and `submit_understanding` until the session is "
    "READY. If it goes to SEMANTIC, state hypotheses (`submit_hypotheses`) and confirm each with tool "
    "evidence (`verify_hypothesis`)."
)

F = TypeVar("F", bound=Callable[..., Any])


def single_owner(owner: str) -> OwnerScope:
    """A scope that acts for ``owner`` only: a call naming any other owner is refused."""
    if not isinstance(owner, str) or not owner.strip():
        raise AuthError("the MCP server needs an owner to act for: pass --owner or set MEMROUTE_OWNER", status=401)

    def scope(request: Request | None, requested: str | None) -> str:
        if requested is None or requested == owner:
            return owner
        raise AuthError(f"this MCP server acts for owner {owner!r} only; it cannot reach owner {requested!r}",
                        status=403)

    return scope


def owner_of(scope: OwnerScope, ctx: Context[Any, Any], requested: str | None) -> str:
    """The owner this call acts for (the scope decides; an empty answer is refused)."""
    request = ctx.request_context.request
    owner = scope(request if isinstance(request, Request) else None, requested)
    if not isinstance(owner, str) or not owner:
        raise AuthError("this caller may not act for any owner", status=403)
    return owner


def guard(fn: F) -> F:
    """Run a tool so that every failure becomes an MCP tool error with a clear message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except MemrouteError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # a bug: the caller gets a short answer, the log the traceback
            log.exception("tool %s failed", getattr(fn, "__name__", "?"))
            raise ToolError(f"internal error in {getattr(fn, '__name__', 'the tool')} ({type(exc).__name__}); "
                            "the server log has the details") from exc

    return wrapper  # type: ignore[return-value]


class _Server(MCPServer[Any]):
    """The MCP server, with argument errors said the way memroute says them: ``InputError: recall: text:
    Input should be a valid string (got 5)`` instead of a validation dump with a link."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                + ("" if e["type"] == "missing" else f" (got {e.get('input')!r:.60})") for e in cause.errors())
            raise ToolError(f"InputError: {name}: {problems}") from None


def create_mcp_server(memory: Memory, agents: Sequence[Agent] | None, owner_scope: OwnerScope | str, *,
                      repos: Sequence[str | Path] = (), name: str = "memroute") -> MCPServer[Any]:
    """An MCP server over ``memory``: ``remember``, ``recall``, ``route``, ``analyze``, ``forget``.

    ``agents`` is the catalogue ``route`` chooses from (``None`` or empty: ``route`` answers with an error
    saying how to load one). ``owner_scope`` is an :data:`OwnerScope`, or an owner id for a server that acts
    for that owner only. ``repos`` are the repository roots the code-investigation tools may read (seed 002);
    without any, those tools are not offered. The tools are synchronous and run in worker threads.
    """
    from memroute.mcp.memory_tools import MemoryTools

    scope = single_owner(owner_scope) if isinstance(owner_scope, str) else owner_scope
    instructions = INSTRUCTIONS + (INVESTIGATION_INSTRUCTIONS if repos else "")
    server: MCPServer[Any] = _Server(name, instructions=instructions, version=__version__, log_level="WARNING")
    MemoryTools(memory, agents or (), scope).register(server)
    if repos:
        from memroute.investigate import Investigator, Workspace
        from memroute.mcp.investigate_tools import InvestigationTools

        investigator = Investigator(memory.store, Workspace(repos), embedder=memory.embedder, llm=memory.llm)
        InvestigationTools(investigator, scope).register(server)
    return server


def mcp_http_app(server: MCPServer[Any], *, path: str = "/mcp", host: str = "127.0.0.1",
                 allowed_hosts: Sequence[str] | None = None, stateless: bool = False,
                 json_response: bool = False) -> Starlette:
    """The ASGI app serving ``server`` over streamable HTTP at ``path``.

    Run on its own, the app's lifespan starts the MCP session manager. Mounted in another app
    (``app.mount("/", mcp_http_app(server, path="/mcp"))``), run ``server.session_manager.run()`` in that app's
    lifespan instead, since Starlette does not run the lifespans of mounted apps. DNS-rebinding protection
    is on for loopback ``host``; behind another name, list the ``Host`` values to accept in
    ``allowed_hosts`` (``["memroute.example.com", "memroute.example.com:*"]``).
    """
    security = None
    if allowed_hosts is not None:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=list(allowed_hosts),
                                             allowed_origins=[f"https://{h}" for h in allowed_hosts]
                                             + [f"http://{h}" for h in allowed_hosts])
    return server.streamable_http_app(streamable_http_path=path, host=host, transport_security=security,
                                      stateless_http=stateless, json_response=json_response)
