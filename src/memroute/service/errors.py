"""Every error answer of the HTTP API: a status code and ``{"type", "message", "detail"}``.

``type`` is the memroute error class (``InputError``, ``NotFoundError``, ``AuthError``, ...) or, for
refusals of the HTTP layer itself, a precise name (``ValidationError``, ``MalformedJSON``,
``PayloadTooLarge``, ``RequestTimeout``, ``ServiceBusy``, ``NotFound`` for an unknown path). Bad input is
always a 4xx; a 500 means a bug, and its answer says nothing about the internals (the log has the trace,
once, under the request id that the answer's ``X-Request-ID`` and ``detail.request_id`` give: see
:class:`memroute.service.middleware.RequestIds`).
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from memroute.errors import (
    ConfigError,
    DependencyError,
    EmbeddingError,
    InputError,
    MemrouteError,
    NotFoundError,
    ServiceError,
    StoreError,
)

log = logging.getLogger("memroute.service")

# First match wins: subclasses before their bases.
_STATUS: tuple[tuple[type[MemrouteError], int], ...] = (
    (ServiceError, 0),  # carries its own status
    (NotFoundError, 404),
    (InputError, 400),
    (StoreError, 503),  # locked, read-only, newer schema, unreachable: the store, not the request
    (ConfigError, 500),
    (DependencyError, 500),
    (EmbeddingError, 500),
)
_HTTP_KINDS = {400: "MalformedJSON", 404: "NotFound", 405: "MethodNotAllowed", 406: "NotAcceptable",
               415: "UnsupportedMediaType"}


class Json(JSONResponse):
    """Compact JSON in UTF-8 with times, enums, tuples, sets and numpy numbers encoded, by orjson: 4x faster
    than the standard library's C encoder on a recall with its trace (0.3 against 1.3 ms for 33 kB). What
    orjson refuses (an integer beyond 64 bits, e.g. in a memory's metadata) goes through the standard
    library's encoder instead. A NaN or infinity, which JSON cannot hold, is written as ``null``.

    Keys that are not strings (a number, a time, an enum) are written as strings. orjson is asked for them
    only when a key is not a string: its option for them cost 0.03-0.09 ms on every 36 kB recall with its trace
    (five rounds of 200, docs/benchmarks.md), and without it orjson refuses such a dict instead of writing
    something else, so both attempts give the same bytes."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content, default=_plain, option=_ORJSON)
        except orjson.JSONEncodeError:
            pass
        try:
            return orjson.dumps(content, default=_plain, option=_ORJSON | orjson.OPT_NON_STR_KEYS)
        except orjson.JSONEncodeError:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                              default=_plain).encode("utf-8")


_ORJSON = orjson.OPT_SERIALIZE_NUMPY


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def error_response(status: int, kind: str, message: str, detail: Any = None,
                   headers: Mapping[str, str] | None = None) -> Response:
    return Json({"type": kind, "message": message, "detail": detail}, status_code=status, headers=headers)


def memroute_error_response(exc: MemrouteError, request_id: str | None = None) -> Response:
    if isinstance(exc, ServiceError):
        headers: dict[str, str] = {}
        if exc.retry_after is not None:
            headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        if exc.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        if exc.status in (408, 413):  # the rest of the body is not wanted: stop reading it, close
            headers["Connection"] = "close"
        return error_response(exc.status, exc.kind, str(exc), exc.detail, headers)
    status = next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)
    if status == 500:
        log.error("memroute error answered with 500 (request %s): %s", request_id, exc, exc_info=exc)
    return error_response(status, type(exc).__name__, str(exc), None, {"Retry-After": "1"} if status == 503 else None)


class RefusedRequest(HTTPException):
    """A refusal raised while the body is being read (too large, too slow). It is an ``HTTPException`` so
    that FastAPI's body parser passes it on instead of turning it into a generic 400."""

    def __init__(self, error: ServiceError) -> None:
        super().__init__(error.status, str(error))
        self.error = error


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _allowed_methods(request: Request) -> list[str]:
    """Every method the OpenAPI schema documents for the request's path (the router's 405 names only the first
    route that matched the path, e.g. GET of GET / PATCH / DELETE /v1/memories/{memory_id})."""
    app = request.app
    table: list[tuple[re.Pattern[str], set[str]]] | None = getattr(app.state, "allowed_methods", None)
    if table is None:
        table = [(re.compile(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$"),
                  {m.upper() for m in operations if m.upper() in _METHODS})
                 for path, operations in sorted(app.openapi().get("paths", {}).items(),
                                                key=lambda item: item[0].count("{"))]
        app.state.allowed_methods = table
    path = request.url.path  # the most literal path that matches: /v1/memories/import, not /v1/memories/{id}
    return sorted(next((methods for pattern, methods in table if pattern.match(path)), set()))


def install(app: FastAPI) -> None:
    """Register the handlers that give every error its status and shape."""

    async def on_memroute(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, MemrouteError)
        state = request.scope.get("state")
        return memroute_error_response(exc, state.get("request_id") if isinstance(state, dict) else None)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if isinstance(exc, RefusedRequest):
            return memroute_error_response(exc.error)
        kind = _HTTP_KINDS.get(exc.status_code, "HTTPError")
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        headers = exc.headers
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path} (see /docs)"
        elif exc.status_code == 405:  # the router names the first route of the path only: name them all
            allowed = _allowed_methods(request)
            headers = {**(headers or {}), "Allow": ", ".join(allowed)}
            message = f"{request.method} is not allowed on {request.url.path}; allowed: {', '.join(allowed)}"
        elif exc.status_code == 400:  # FastAPI's body parser: not UTF-8, or nested too deeply
            message = "the request body could not be read as JSON: send UTF-8 JSON, not nested too deeply"
        return error_response(exc.status_code, kind, message, None, headers)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = [e for e in exc.errors() if isinstance(e, Mapping)]
        broken = next((e for e in errors if e.get("type") == "json_invalid"), None)
        if broken is not None:
            ctx = broken.get("ctx") or {}
            loc: Sequence[Any] = broken.get("loc") or ()
            where = f" at character {loc[1]}" if len(loc) > 1 else ""
            return error_response(400, "MalformedJSON", f"the request body is not valid JSON: "
                                  f"{ctx.get('error', 'decode error')}{where}")
        detail = [{"loc": [str(part) for part in e.get("loc", ())], "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in errors]
        first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
        where = ".".join(first["loc"])
        more = f" (and {len(detail) - 1} more problems)" if len(detail) > 1 else ""
        return error_response(422, "ValidationError", f"{where}: {first['msg']}{more}", detail)

    app.add_exception_handler(MemrouteError, on_memroute)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
