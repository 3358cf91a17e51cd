"""What every API endpoint depends on: the service, the authenticated caller and its owner."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from memroute.errors import InputError
from memroute.service.auth import MAX_OWNER_CHARS, OWNER_PATTERN, Principal
from memroute.service.core import Caller, Service
from memroute.service.schemas import ErrorOut

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text} for code, text in (
        (400, "Bad input (InputError, MalformedJSON)"), (401, "No API key, or a wrong one (AuthError)"),
        (403, "The key may not act for this owner (AuthError)"), (404, "Not found, or not this owner's"),
        (413, "Body too large (PayloadTooLarge)"), (422, "A field is missing or has the wrong type"),
        (429, "Rate limit reached (RateLimitError; see Retry-After)"), (503, "Busy or store unavailable"))}
"""The error answers of the authenticated endpoints, for the OpenAPI schema."""

_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: <API key>")


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def _service(request: Request) -> Service:
    """:func:`service_of` as a dependency. It is ``async`` because FastAPI runs a plain ``def`` dependency in a
    worker thread: every request was handed to a thread and back once more just to read this attribute
    (py-spy on a worker under load: ~1/4 of the event loop's time under the GIL was that hand-off)."""
    return service_of(request)


def _presented(bearer: HTTPAuthorizationCredentials | None, header: str | None) -> str | None:
    return bearer.credentials if bearer is not None else header


def _host(request: Request) -> str | None:
    return request.client.host if request.client else None


_LISTS = frozenset({"kinds"})
"""The query parameters that may be repeated (``?kinds=note&kinds=fact``); any other once at most."""


def _single_valued(request: Request) -> None:
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name in seen and name not in _LISTS:
            raise InputError(f"query parameter {name!r} is given more than once; give it once")
        seen.add(name)


async def principal(request: Request, bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                    header: Annotated[str | None, Depends(_header)]) -> Principal:
    """An authenticated request that acts for no particular owner (``/metrics``)."""
    _single_valued(request)
    return service_of(request).authenticate(_presented(bearer, header), _host(request))


async def caller(request: Request, bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                 header: Annotated[str | None, Depends(_header)],
                 owner: Annotated[str | None, Query(max_length=MAX_OWNER_CHARS, json_schema_extra={
                     "pattern": OWNER_PATTERN}, description=(
                     "The owner to act for; default: the API key's only owner. At most 256 characters, "
                     "without , ; = line breaks or NUL, not only white space, and not *"))] = None) -> Caller:
    _single_valued(request)
    return service_of(request).authorize(_presented(bearer, header), _host(request), owner)


ServiceDep = Annotated[Service, Depends(_service)]
CallerDep = Annotated[Caller, Depends(caller)]
PrincipalDep = Annotated[Principal, Depends(principal)]
