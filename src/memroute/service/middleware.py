"""ASGI middleware of the service: request ids and unexpected errors, body limits (size and time), HTTP metrics.

All wrap the whole application, so whatever is mounted beside the API (the MCP endpoint, the console)
gets the same ids, limits and error answers and is counted in the same metrics.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memroute.errors import ServiceError
from memroute.observability.metrics import HTTP_LATENCY, HTTP_REQUESTS
from memroute.service.errors import RefusedRequest, error_response, memroute_error_response

log = logging.getLogger("memroute.service")
_CLIENT_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")


class BodyLimit:
    """Refuse a body larger than ``max_bytes`` (413) and a body not sent within ``timeout_s`` (408).

    A declared ``Content-Length`` above the limit is refused before anything is read; a chunked or
    under-declared body is counted while it streams in and refused as soon as it passes the limit, so the
    service never holds more than ``max_bytes`` of one request in memory.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    def _too_large(self) -> ServiceError:
        return ServiceError(f"the request body is larger than the limit of {self.max_bytes:,} bytes "
                            "(max_request_bytes); send less at once, e.g. smaller import batches", status=413,
                            kind="PayloadTooLarge", detail={"limit_bytes": self.max_bytes})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            await memroute_error_response(self._too_large())(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        received = 0
        complete = False
        deadline: float | None = None
        started = False

        async def limited_receive() -> Message:
            nonlocal received, complete, deadline
            if complete:  # the body is in: later receives only wait for a disconnect, without a deadline
                return await receive()
            if deadline is None:
                deadline = loop.time() + self.timeout_s
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise RefusedRequest(ServiceError(
                    f"the request body did not arrive within {self.timeout_s:g} s (request_timeout_s)",
                    status=408, kind="RequestTimeout")) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise RefusedRequest(self._too_large())
                complete = not message.get("more_body", False)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except RefusedRequest as exc:  # raised outside a FastAPI route (e.g. a mounted app): answer here
            if started:
                raise
            await memroute_error_response(exc.error)(scope, receive, send)


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class HttpMetrics:
    """Count requests and time them, labelled with the route's path pattern (never the raw path).

    A request is counted before the last part of its answer goes out, so that a client which asks
    ``/metrics`` next always finds it there (counting after the answer raced that next request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500
        root = str(scope.get("root_path", ""))
        recorded = False

        def record() -> None:
            nonlocal recorded
            recorded = True
            # a route's pattern; else the mount that served it (the router extends root_path in place:
            # /console, /mcp); else "unmatched"
            mount = str(scope.get("root_path", ""))[len(root):]
            label = str(getattr(scope.get("route"), "path", "")) or mount or "unmatched"
            method = scope["method"] if scope["method"] in _METHODS else "other"  # a client cannot add labels
            HTTP_REQUESTS.labels(method, label, str(status)).inc()
            HTTP_LATENCY.labels(method, label).observe((time.perf_counter() - start) * 1000.0)

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body", False) and not recorded:
                record()
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            if not recorded:
                record()


class RequestIds:
    """Give every request an id and answer an unexpected exception with a 500 on a connection that stays open.

    The id is the client's ``X-Request-ID`` when it is a plain token (at most 64 of ``A-Z a-z 0-9 . _ : -``),
    else a new one; the answer carries it in ``X-Request-ID`` and the log names it. An exception that no
    handler turned into an answer is logged here, once, with its trace and the request id, and answered
    ``500 {"type": "InternalError", ...}``: the exception does not reach the server, which would log it a
    second time and close the keep-alive connection. Only when the answer had already begun (nothing
    correct can follow it) is the connection left for the server to close.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"")
        rid = given.decode("ascii") if _CLIENT_ID.fullmatch(given) else uuid.uuid4().hex
        state = scope.get("state")
        scope["state"] = {**state, "request_id": rid} if isinstance(state, dict) else {"request_id": rid}
        started = False

        async def identified_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", ()), (b"x-request-id", rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, identified_send)
        except Exception as exc:
            log.error("unexpected error in %s %s (request %s)", scope["method"], scope["path"], rid, exc_info=exc)
            if started:
                return  # the answer is cut short: the server closes this connection
            await error_response(500, "InternalError", f"the service failed on this request (request {rid}); the "
                                 "server log has the details", {"request_id": rid})(scope, receive, identified_send)
