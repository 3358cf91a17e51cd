"""The web console, served by the service at ``/console`` (``/`` redirects there).

Three pages over the HTTP API, called from the browser with the user's API key:

- **Playground**: type a conversation turn by turn; each user turn is recalled and routed in its session,
  showing the routing decision with every candidate's score and reasons, the recalled memories, the trace
  (strategy, expanded queries, per-stage latency) and the memory pack.
- **Memories**: browse, search (bm25, vector, hybrid) and forget the owner's memories.
- **Metrics**: ``/metrics`` drawn as latency histograms and strategy usage.

The page is static HTML, CSS and JavaScript modules (``static/``, shipped as package data): no build step,
nothing fetched from another origin. Besides the files, the console adds one endpoint,
``GET /console/whoami``, that tells the page whether it needs a key and which owners the key may act for.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from pydantic import BaseModel
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memroute.errors import InputError
from memroute.service.api.deps import PrincipalDep, ServiceDep
from memroute.service.auth import ANY_OWNER

PATH = "/console"
STATIC = "static"
"""The folder of the page's files inside this package."""
DOCS = "/docs"
"""Where the API docs page is (its files: ``docs/`` here, and Swagger UI's from ``fastapi-offline``)."""

_HEADERS = (
    # Only this origin's own scripts and styles run: data shown on the page (memories, reasons) can never
    # become code, and the key kept in sessionStorage cannot be sent anywhere else.
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                 b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
)


class WhoAmI(BaseModel):
    """What the page needs to know about the caller's key."""

    open: bool
    """Development mode: no keys are configured, loopback clients act for any owner."""
    owners: list[str]
    """The owners the key may act for (``["*"]``: any)."""
    default_owner: str | None
    """The owner of requests that name none; ``None`` when the key has several and one must be chosen."""


async def whoami(principal: PrincipalDep, service: ServiceDep) -> WhoAmI:
    try:
        default: str | None = principal.owner_for(None)
    except InputError:
        default = None
    owners = [ANY_OWNER] if ANY_OWNER in principal.owners else sorted(principal.owners)
    return WhoAmI(open=service.keys.open, owners=owners, default_owner=default)


async def to_console() -> RedirectResponse:
    return RedirectResponse(f"{PATH}/", status_code=307)


async def to_docs() -> RedirectResponse:
    return RedirectResponse(f"{DOCS}/", status_code=307)


class _Hardened:
    """The static files, with headers that keep the page to its own origin's code."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


def mount_console(app: FastAPI) -> None:
    """Serve the console at ``/console/``, its ``whoami`` endpoint, a redirect from ``/``, and the API docs
    (Swagger UI) at ``/docs/`` from files inside the installed packages (ours and ``fastapi-offline``'s), under
    the same content security policy: the docs work offline."""
    app.add_api_route(f"{PATH}/whoami", whoami, methods=["GET"], include_in_schema=False)
    app.add_api_route("/", to_console, methods=["GET"], include_in_schema=False)
    app.mount(PATH, _Hardened(StaticFiles(packages=[(__name__, STATIC)], html=True)), name="console")
    app.add_api_route(DOCS, to_docs, methods=["GET"], include_in_schema=False)
    app.mount(f"{DOCS}/", _Hardened(StaticFiles(packages=[(__name__, "docs"), ("fastapi_offline", "static")],
                                                html=True)), name="docs")
