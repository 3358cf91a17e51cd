"""Memories and conversation logs: remember, import, get, list, search, update, forget; messages."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Path, Query
from fastapi.exceptions import RequestValidationError

from memroute.errors import NotFoundError, ServiceError
from memroute.routing.conversation import REPLY_ROLES
from memroute.service.api.deps import ERRORS, CallerDep, ServiceDep
from memroute.service.schemas import (
    NOT_BLANK,
    DeletedOut,
    ErrorOut,
    HitOut,
    ImportIn,
    ImportOut,
    Kind,
    MemoryIn,
    MemoryOut,
    MemoryPatch,
    MessageIn,
    MessageOut,
    Name,
    Rejected,
    SensitivityName,
    Time,
)

router = APIRouter(prefix="/v1", tags=["memories"], responses=ERRORS)

MemoryId = Annotated[Name, Path()]
SessionId = Annotated[Name, Path()]
Limit = Annotated[int, Query(ge=1, le=1000)]


def _filters(session: str | None, kinds: list[Kind] | None, max_sensitivity: SensitivityName,
             start: str | None, end: str | None, include_expired: bool, include_archived: bool) -> dict[str, Any]:
    return {"session": session, "kinds": kinds or None, "max_sensitivity": max_sensitivity, "start": start,
            "end": end, "include_expired": include_expired, "include_archived": include_archived}


Session = Annotated[Name | None, Query(description="Only this session.")]
Kinds = Annotated[list[Kind] | None, Query(max_length=4, description="Only these kinds (repeat the parameter).")]
MaxSensitivity = Annotated[SensitivityName, Query(description="The most sensitive memories to return.")]
Start = Annotated[Time | None, Query(description="Occurred at or after (RFC 3339); not after `end` (400).")]
End = Annotated[Time | None, Query(description="Occurred before (RFC 3339).")]


@router.post("/memories", status_code=201, summary="Remember one memory", responses={409: {
    "model": ErrorOut, "description": "A memory with this id exists (Conflict): PATCH it, or ?replace=true"}})
async def remember(body: MemoryIn, caller: CallerDep, service: ServiceDep,
                   replace: Annotated[bool, Query(description="Replace a memory with the same id instead of "
                                                  "answering 409.")] = False) -> MemoryOut:
    fields = body.fields()
    text = fields.pop("text")

    def work() -> MemoryOut:
        if body.id is not None and not replace and service.memory.store.get([body.id], caller.owner):
            raise ServiceError(f"memory {body.id!r} already exists: PATCH /v1/memories/{{id}} changes it, "
                               "?replace=true replaces it", status=409, kind="Conflict")
        return MemoryOut.of(service.memory.remember(text, owner=caller.owner, **fields))

    return await service.run(work)


@router.post("/memories/import", summary="Remember many memories in one transaction")
async def import_memories(body: ImportIn, caller: CallerDep, service: ServiceDep) -> ImportOut:
    valid, invalid = body.memories()
    if invalid and not body.skip_invalid:
        index, reason = invalid[0]
        raise RequestValidationError([{"loc": ("body", "items", index), "msg": reason, "type": "memory_invalid"}])
    items = [memory.fields() for _, memory in valid]
    report = await service.run(lambda: service.memory.remember_many(
        items, owner=caller.owner, batch_size=max(len(items), 1), skip_invalid=body.skip_invalid))
    rejected = invalid + [(valid[i][0], reason) for i, reason in report.rejected]  # positions in the request
    return ImportOut(stored=report.stored, rejected=[Rejected(index=i, reason=r) for i, r in sorted(rejected)])


@router.get("/memories/{memory_id}", summary="One memory by id")
async def get_memory(memory_id: MemoryId, caller: CallerDep, service: ServiceDep) -> MemoryOut:
    return MemoryOut.of(await service.run(lambda: service.memory.get(memory_id, owner=caller.owner)))


@router.get("/memories", summary="List memories, newest first")
async def list_memories(caller: CallerDep, service: ServiceDep, session: Session = None, kinds: Kinds = None,
                        max_sensitivity: MaxSensitivity = "public", start: Start = None, end: End = None,
                        include_expired: bool = False, include_archived: bool = False, limit: Limit = 100,
                        offset: Annotated[int, Query(ge=0, le=10**9)] = 0) -> list[MemoryOut]:
    filters = _filters(session, kinds, max_sensitivity, start, end, include_expired, include_archived)
    items = await service.run(lambda: service.memory.list(owner=caller.owner, limit=limit, offset=offset, **filters))
    return [MemoryOut.of(m) for m in items]


@router.get("/search", summary="Search memories (BM25, vectors, or both fused)")
async def search(caller: CallerDep, service: ServiceDep,
                 q: Annotated[str, Query(min_length=1, json_schema_extra={"pattern": NOT_BLANK},
                                         description="What to search for.")],
                 mode: Literal["hybrid", "bm25", "vector"] = "hybrid", limit: Annotated[int, Query(ge=1, le=100)] = 10,
                 session: Session = None, kinds: Kinds = None, max_sensitivity: MaxSensitivity = "public",
                 start: Start = None, end: End = None, include_expired: bool = False,
                 include_archived: bool = False) -> list[HitOut]:
    filters = _filters(session, kinds, max_sensitivity, start, end, include_expired, include_archived)
    hits = await service.run(lambda: service.memory.search(q, mode=mode, limit=limit, owner=caller.owner, **filters))
    return [HitOut.of(h) for h in hits]


@router.patch("/memories/{memory_id}", summary="Change fields of a memory (re-indexed everywhere)")
async def update_memory(memory_id: MemoryId, body: MemoryPatch, caller: CallerDep, service: ServiceDep) -> MemoryOut:
    changes = body.model_dump(exclude_unset=True)
    return MemoryOut.of(await service.run(lambda: service.memory.update(memory_id, owner=caller.owner, **changes)))


@router.delete("/memories/{memory_id}", summary="Forget one memory")
async def forget_memory(memory_id: MemoryId, caller: CallerDep, service: ServiceDep) -> DeletedOut:
    deleted = await service.run(lambda: service.memory.forget(memory_id, owner=caller.owner))
    if not deleted:
        raise NotFoundError(f"no memory {memory_id!r} for owner {caller.owner!r}")
    return DeletedOut(deleted=deleted)


@router.delete("/sessions/{session_id}", summary="Forget a session: its memories and its conversation log")
async def forget_session(session_id: SessionId, caller: CallerDep, service: ServiceDep) -> DeletedOut:
    return DeletedOut(deleted=await service.run(lambda: service.memory.forget(session=session_id,
                                                                              owner=caller.owner)))


@router.delete("/owner", summary="Forget everything of the owner: memories, logs, routing state, agents")
async def forget_owner(caller: CallerDep, service: ServiceDep) -> DeletedOut:
    return DeletedOut(deleted=await service.run(lambda: service.memory.forget(everything=True, owner=caller.owner)))


@router.post("/sessions/{session_id}/messages", status_code=201, tags=["messages"],
             summary="Append a turn to a session's conversation log")
async def add_message(session_id: SessionId, body: MessageIn, caller: CallerDep, service: ServiceDep,
                      after: BackgroundTasks) -> MessageOut:
    message = await service.run(lambda: service.memory.add_message(
        session_id, body.role, body.text, owner=caller.owner, at=body.at))
    if body.role.lower() in REPLY_ROLES:  # encoded after the answer, before the session's next routed turn
        after.add_task(service.run, lambda: service.prepare_reply(body.text))
    return MessageOut.of(message)


@router.get("/sessions/{session_id}/messages", tags=["messages"], summary="The last turns of a session, oldest first")
async def recent_messages(session_id: SessionId, caller: CallerDep, service: ServiceDep,
                          limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> list[MessageOut]:
    messages = await service.run(lambda: service.memory.recent_messages(session_id, owner=caller.owner, limit=limit))
    return [MessageOut.of(m) for m in messages]
