"""The agent catalogue of the caller's owner: list, put one, delete one (kept in the store)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from memroute.routing.agents import agent_to_dict
from memroute.service.api.deps import ERRORS, CallerDep, ServiceDep
from memroute.service.schemas import AgentIn, DeletedOut, ErrorOut, Name

router = APIRouter(prefix="/v1", tags=["agents"], responses=ERRORS)

AgentId = Annotated[Name, Path()]


@router.get("/agents", summary="The owner's agent catalogue")
async def list_agents(caller: CallerDep, service: ServiceDep) -> dict[str, Any]:
    """``source`` is ``default`` while the owner uses the service's catalogue, ``owner`` once it has its own."""
    catalogue = await service.run(lambda: service.catalogues.get(caller.owner))
    return {"source": catalogue.source, "revision": catalogue.revision,
            "agents": [agent_to_dict(a) for a in catalogue.agents]}


@router.put("/agents/{agent_id}", summary="Add or replace an agent (201 when new)", responses={
    201: {"description": "The agent is new"},
    409: {"model": ErrorOut, "description": "The body's id names another agent than the path (Conflict)"}})
async def put_agent(agent_id: AgentId, body: AgentIn, caller: CallerDep, service: ServiceDep,
                    response: Response) -> dict[str, Any]:
    fields = body.model_dump()
    agent, created = await service.run(lambda: service.catalogues.put(caller.owner, agent_id, fields))
    response.status_code = 201 if created else 200
    return agent_to_dict(agent)


@router.delete("/agents/{agent_id}", summary="Remove an agent from the owner's catalogue")
async def delete_agent(agent_id: AgentId, caller: CallerDep, service: ServiceDep) -> DeletedOut:
    await service.run(lambda: service.catalogues.delete(caller.owner, agent_id))
    return DeletedOut(deleted=1)
