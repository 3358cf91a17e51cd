"""Health, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from memroute import __version__
from memroute.errors import ServiceError
from memroute.observability.metrics import exposition
from memroute.service.api.deps import ERRORS, PrincipalDep, ServiceDep

router = APIRouter(tags=["system"])


@router.get("/healthz", summary="The process answers (no key needed)")
async def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/readyz", summary="The store answers (no key needed); 503 otherwise")
async def readyz(service: ServiceDep) -> dict[str, str]:
    try:
        await service.run(lambda: service.memory.store.count(service.settings.owner))
    except ServiceError:
        raise
    except Exception as exc:  # whatever the store raises, the answer is "not ready", and why
        raise ServiceError(f"the store does not answer: {exc}", status=503, kind="NotReady", retry_after=1) from None
    return {"status": "ready"}


@router.get("/metrics", summary="Prometheus metrics (text format; any valid key, none in development mode)",
            response_class=Response, responses={k: v for k, v in ERRORS.items() if k in (401, 429)})
async def metrics(principal: PrincipalDep) -> Response:
    return Response(exposition(), media_type=CONTENT_TYPE_LATEST)
