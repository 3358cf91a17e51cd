"""What every API endpoint depends on: the service, the authenticated caller and its owner."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from memroute.service.auth import MAX_OWNER_CHARS, Principal
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


def _presented(bearer: HTTPAuthorizationCredentials | None, header: str | None) -> str | None:
    return bearer.credentials if bearer is not None else header


def _host(request: Request) -> str | None:
    return request.client.host if request.client else None


async def principal(request: Request, bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                    header: Annotated[str | None, Depends(_header)]) -> Principal:
    """An authenticated request that acts for no particular owner (``/metrics``)."""
    return service_of(request).authenticate(_presented(bearer, header), _host(request))


async def caller(request: Request, bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                 header: Annotated[str | None, Depends(_header)],
                 owner: Annotated[str | None, Query(max_length=MAX_OWNER_CHARS, description=(
                     "The owner to act for; default: the API key's only owner"))] = None) -> Caller:
    return service_of(request).authorize(_presented(bearer, header), _host(request), owner)


ServiceDep = Annotated[Service, Depends(service_of)]
CallerDep = Annotated[Caller, Depends(caller)]
PrincipalDep = Annotated[Principal, Depends(principal)]
