"""``Client`` and ``AsyncClient``: :class:`memroute.Memory`'s methods, over the memroute service.

    >>> from memroute import Client
    >>> with Client("http://127.0.0.1:8765", api_key="mr_...", owner="alice") as mem:   # doctest: +SKIP
    ...     item = mem.remember("プロジェクトXは進捗が遅れている", session="standup")
    ...     hits = mem.search("プロジェクトXの進捗")
    ...     r = mem.recall("あれどうなった？", session="standup")

Memories, hits and messages come back as the library's dataclasses (``MemoryItem``, ``Hit``, ``Message``,
``ImportReport``); ``recall``, ``route`` and ``analyze`` return the service's JSON as dicts (the same keys
as ``Recall.to_dict()``, ``ConversationDecision.as_dict()`` / ``RouterOutput.as_dict()`` and
``QueryAnalysis.to_dict()``, plus ``memory_pack`` for a recall). Errors are raised as the memroute error
the service reported (``InputError``, ``NotFoundError``, ...; ``AuthError`` and ``RateLimitError`` with
the HTTP ``status`` and ``retry_after``); an unreachable service is a ``ServiceError``. Every method takes
``owner=`` (default: the client's ``owner``, else the key's only owner).
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from memroute import errors
from memroute.errors import AuthError, InputError, MemrouteError, NotFoundError, RateLimitError, ServiceError
from memroute.memory import ImportReport
from memroute.retrieval import RecallOptions
from memroute.routing.agents import agent_from_dict, agent_to_dict
from memroute.service.schemas import HitOut, ImportOut, MemoryOut, MessageOut, RecallOptionsIn
from memroute.types import Agent, Hit, MemoryItem, Message, Sensitivity
from memroute.validate import count

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8765"
IMPORT_BATCH = 256


@dataclass(frozen=True, slots=True)
class _Call:
    method: str
    path: str
    params: Mapping[str, Any] | None = None
    json: Any = None
    missing_ok: bool = False
    """A 404 answers ``None`` instead of raising (``forget`` of an unknown id deletes nothing)."""


@dataclass(frozen=True, slots=True)
class _Plan(Generic[T]):
    """The calls one client method sends, and how their answers make its result."""

    calls: Sequence[_Call]
    combine: Callable[[list[Any]], T]


def _one(call: _Call, read: Callable[[Any], T]) -> _Plan[T]:
    return _Plan([call], lambda answers: read(answers[0]))


def _wire(value: Any) -> Any:
    """A library value as JSON: times as RFC 3339 (a naive time is UTC, as in the library), sensitivities by
    name, enums by value."""
    if isinstance(value, datetime):
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, Sensitivity):
        return value.name.lower()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _wire(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_wire(v) for v in value]
    return value


def _named(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` with sensitivities as the service names them (the library also takes 0, 1, 2)."""
    out = dict(fields)
    for key in ("sensitivity", "max_sensitivity"):
        if out.get(key) is not None:
            try:
                out[key] = Sensitivity.parse(out[key])
            except ValueError:
                raise InputError(f"unknown {key} {out[key]!r}: use public, private or secret") from None
    return out


def _seg(value: str) -> str:
    """One path segment, every reserved character escaped (ids may contain / ? # %)."""
    return quote(value, safe="")


def _arguments(build: Callable[..., _Plan[T]]) -> Callable[..., _Plan[T]]:
    """A plan builder whose bad arguments (an int where an id goes, a set in metadata) are an ``InputError``:
    building a plan only converts arguments, so anything else it raises is the caller's value."""

    @functools.wraps(build)
    def checked(*args: Any, **kwargs: Any) -> _Plan[T]:
        try:
            return build(*args, **kwargs)
        except MemrouteError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise InputError(f"bad argument to {build.__name__}: {exc}") from None

    return checked


def _request(http: httpx.Client | httpx.AsyncClient, call: _Call) -> httpx.Request:
    """The HTTP request of ``call``, its body as strict JSON (no NaN, valid Unicode) or an ``InputError``."""
    try:
        content = None if call.json is None else json.dumps(call.json, ensure_ascii=False, allow_nan=False,
                                                            separators=(",", ":")).encode("utf-8")
        return http.build_request(call.method, call.path, params=call.params, content=content,
                                  headers={"Content-Type": "application/json"} if content is not None else None)
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InputError(f"cannot send {call.method} {call.path}: {exc} (JSON holds strings of valid Unicode, "
                         "finite numbers, bools, null, lists and objects)") from None


class _Calls:
    """Builds every request and reads every answer; the two clients only send them."""

    def __init__(self, owner: str | None) -> None:
        self.owner = owner

    def _params(self, owner: str | None, **params: Any) -> dict[str, Any]:
        for key in ("limit", "offset"):
            if params.get(key) is not None:
                count(params[key], key, 0, 2**63 - 1)  # its range is the service's to say
        if "q" in params and not isinstance(params["q"], str):
            raise InputError(f"text must be a string, got {type(params['q']).__name__}")
        out = {k: _wire(v) for k, v in _named(params).items() if v is not None and v is not False}
        if owner or self.owner:
            out["owner"] = owner or self.owner
        return out

    # ------------------------------------------------------------------------------ memories
    def remember(self, text: str, *, owner: str | None = None, replace: bool = False,
                 **fields: Any) -> _Plan[MemoryItem]:
        body = _wire(_named({"text": text, **_present(fields)}))
        return _one(_Call("POST", "/v1/memories", self._params(owner, replace=replace), body), _memory)

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, owner: str | None = None,
                      batch_size: int = IMPORT_BATCH, skip_invalid: bool = False) -> _Plan[ImportReport]:
        if not 1 <= batch_size <= 1000:
            raise InputError("batch_size must be between 1 and 1000 (the service's limit per request)")
        rows = [_import_item(i, item, owner or self.owner) for i, item in enumerate(items)]
        starts = range(0, len(rows), batch_size)
        calls = [_Call("POST", "/v1/memories/import", self._params(owner),
                       {"items": rows[s:s + batch_size], "skip_invalid": skip_invalid}) for s in starts]

        def combine(answers: list[Any]) -> ImportReport:
            reports = [ImportOut.model_validate(a) for a in answers]
            return ImportReport(sum(r.stored for r in reports),
                                [(start + x.index, x.reason) for start, r in zip(starts, reports, strict=True)
                                 for x in r.rejected])

        return _Plan(calls, combine)

    def get(self, id: str, *, owner: str | None = None) -> _Plan[MemoryItem]:
        return _one(_Call("GET", f"/v1/memories/{_seg(id)}", self._params(owner)), _memory)

    def update(self, id: str, *, owner: str | None = None, **changes: Any) -> _Plan[MemoryItem]:
        return _one(_Call("PATCH", f"/v1/memories/{_seg(id)}", self._params(owner), _wire(_named(changes))), _memory)

    def forget(self, id: str | Sequence[str] | None = None, *, session: str | None = None,
               owner: str | None = None, everything: bool = False) -> _Plan[int]:
        if id is not None:
            ids = [id] if isinstance(id, str) else list(id)
            calls = [_Call("DELETE", f"/v1/memories/{_seg(i)}", self._params(owner), missing_ok=True) for i in ids]
        elif session is not None:
            calls = [_Call("DELETE", f"/v1/sessions/{_seg(session)}", self._params(owner))]
        elif everything:
            calls = [_Call("DELETE", "/v1/owner", self._params(owner))]
        else:
            raise InputError("forget needs an id, a session, or everything=True (deletes all of the owner's data)")
        return _Plan(calls, lambda answers: sum(int(a["deleted"]) for a in answers if a is not None))

    def list(self, *, owner: str | None = None, session: str | None = None, limit: int = 100, offset: int = 0,
             **filters: Any) -> _Plan[builtins.list[MemoryItem]]:
        params = self._params(owner, session=session, limit=limit, offset=offset or None, **filters)
        return _one(_Call("GET", "/v1/memories", params), lambda rows: [_memory(r) for r in rows])

    def search(self, text: str, *, mode: str = "hybrid", limit: int = 10, owner: str | None = None,
               session: str | None = None, **filters: Any) -> _Plan[builtins.list[Hit]]:
        params = self._params(owner, q=text, mode=mode, limit=limit, session=session, **filters)
        return _one(_Call("GET", "/v1/search", params), lambda rows: [HitOut.model_validate(r).to_hit() for r in rows])

    # ------------------------------------------------------------------------------ messages
    def add_message(self, session: str, role: str, text: str, *, owner: str | None = None,
                    at: datetime | str | None = None) -> _Plan[Message]:
        body = _wire({"role": role, "text": text, **({"at": at} if at is not None else {})})
        return _one(_Call("POST", f"/v1/sessions/{_seg(session)}/messages", self._params(owner), body), _message)

    def recent_messages(self, session: str, *, owner: str | None = None,
                        limit: int = 20) -> _Plan[builtins.list[Message]]:
        return _one(_Call("GET", f"/v1/sessions/{_seg(session)}/messages", self._params(owner, limit=limit)),
                    lambda rows: [_message(r) for r in rows])

    # ------------------------------------------------------------------------------ one turn
    def recall(self, text: str, *, session: str | None = None, owner: str | None = None,
               recent_messages: Iterable[Message | Mapping[str, Any]] | None = None,
               now: datetime | str | None = None, options: RecallOptions | Mapping[str, Any] | None = None,
               trace: bool = True) -> _Plan[dict[str, Any]]:
        body: dict[str, Any] = {"text": text, "session": session, "now": now, "trace": trace,
                                "recent_messages": None if recent_messages is None else _turns(recent_messages),
                                "options": None if options is None else _options(options)}
        return _one(_Call("POST", "/v1/recall", self._params(owner), _wire(_present(body))), dict)

    def route(self, text: str, *, session: str | None = None, owner: str | None = None, top_k: int | None = None,
              hints: Sequence[str] = (), tags: Sequence[str] = ()) -> _Plan[dict[str, Any]]:
        body = {"text": text, "session": session, "top_k": top_k, "hints": list(hints) or None,
                "tags": list(tags) or None}
        return _one(_Call("POST", "/v1/route", self._params(owner), _present(body)), dict)

    def analyze(self, text: str, recent_messages: Iterable[Message | Mapping[str, Any]] | None = None,
                now: datetime | str | None = None, *, session: str | None = None,
                owner: str | None = None) -> _Plan[dict[str, Any]]:
        body = {"text": text, "session": session, "now": now,
                "recent_messages": None if recent_messages is None else _turns(recent_messages)}
        return _one(_Call("POST", "/v1/analyze", self._params(owner), _wire(_present(body))), dict)

    # ------------------------------------------------------------------------------ agents
    def list_agents(self, *, owner: str | None = None) -> _Plan[builtins.list[Agent]]:
        return _one(_Call("GET", "/v1/agents", self._params(owner)),
                    lambda answer: [agent_from_dict(a) for a in answer["agents"]])

    def put_agent(self, agent: Agent | Mapping[str, Any], *, owner: str | None = None) -> _Plan[Agent]:
        body = agent_to_dict(agent) if isinstance(agent, Agent) else dict(agent)
        if not body.get("id"):
            raise InputError("an agent needs an id")
        return _one(_Call("PUT", f"/v1/agents/{_seg(str(body['id']))}", self._params(owner), _wire(body)),
                    agent_from_dict)

    def delete_agent(self, agent_id: str, *, owner: str | None = None) -> _Plan[None]:
        return _one(_Call("DELETE", f"/v1/agents/{_seg(agent_id)}", self._params(owner)), lambda _: None)

    def health(self) -> _Plan[dict[str, Any]]:
        return _one(_Call("GET", "/readyz"), dict)


for _name, _method in list(vars(_Calls).items()):  # every plan builder
    if not _name.startswith("_") and callable(_method):
        setattr(_Calls, _name, _arguments(_method))
del _name, _method


def _memory(answer: Any) -> MemoryItem:
    return MemoryOut.model_validate(answer).to_item()


def _message(answer: Any) -> Message:
    return MessageOut.model_validate(answer).to_message()


def _present(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _turns(messages: Iterable[Message | Mapping[str, Any]]) -> builtins.list[dict[str, Any]]:
    out = []
    for m in messages:
        if isinstance(m, Message):
            out.append({"role": m.role, "text": m.text})
        else:
            out.append({"role": m.get("role", "user"), "text": m.get("text", m.get("content"))})
    return out


def _options(options: RecallOptions | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(options, RecallOptions):
        values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
        return _named({k: v for k, v in values.items() if k in RecallOptionsIn.model_fields})
    return _named(options)


def _import_item(position: int, item: Mapping[str, Any], owner: str | None) -> dict[str, Any]:
    fields = dict(item)
    item_owner = fields.pop("owner", None)
    if item_owner not in (None, owner):
        raise InputError(f"item {position}: its owner {item_owner!r} differs from the call's owner {owner!r}; "
                         "import each owner's memories with remember_many(..., owner=...)")
    if "session_id" in fields:
        fields["session"] = fields.pop("session_id")
    result: dict[str, Any] = _wire(_named(_present(fields)))
    return result


def _error(response: httpx.Response) -> MemrouteError:
    """The memroute error the service reported (same class, same message)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"type": "", "message": f"the service answered HTTP {response.status_code}: "
                f"{response.text[:200]}", "detail": None}
    kind, message, detail = str(body.get("type") or ""), str(body.get("message") or ""), body.get("detail")
    status = response.status_code
    retry = response.headers.get("retry-after")
    retry_after = float(retry) if retry and retry.isdigit() else None
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, ServiceError):
        return cls(message, status=status, kind=kind, detail=detail, retry_after=retry_after)
    if isinstance(cls, type) and issubclass(cls, MemrouteError):
        return cls(message)
    if status in (400, 409, 413, 422):
        return InputError(message)
    if status == 404:
        return NotFoundError(message)
    if status in (401, 403):
        return AuthError(message, status=status, kind=kind, detail=detail)
    if status == 429:
        return RateLimitError(message, status=status, kind=kind, detail=detail, retry_after=retry_after)
    return ServiceError(message, status=status, kind=kind or None, detail=detail, retry_after=retry_after)


def _read(call: _Call, response: httpx.Response) -> Any:
    if response.status_code == 404 and call.missing_ok:
        return None
    if response.is_error:
        raise _error(response)
    try:
        return response.json()
    except ValueError:
        raise ServiceError(f"the service's answer to {call.method} {call.path} is not JSON", status=502,
                           kind="BadAnswer") from None


def _unreachable(base_url: str, exc: httpx.HTTPError) -> ServiceError:
    return ServiceError(f"cannot reach the memroute service at {base_url}: {exc!s} (is `memroute serve` running?)",
                        status=503, kind="Unreachable")


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class Client:
    """The service's client with :class:`memroute.Memory`'s method names (see the module docstring)."""

    def __init__(self, url: str = DEFAULT_URL, *, api_key: str | None = None, owner: str | None = None,
                 timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._calls = _Calls(owner)
        self._http = httpx.Client(base_url=self.url, headers=_headers(api_key), timeout=timeout)

    def _run(self, plan: _Plan[T]) -> T:
        answers = []
        for call in plan.calls:
            try:
                response = self._http.send(_request(self._http, call))
            except httpx.HTTPError as exc:
                raise _unreachable(self.url, exc) from None
            answers.append(_read(call, response))
        return plan.combine(answers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def remember(self, text: str, **kwargs: Any) -> MemoryItem:
        return self._run(self._calls.remember(text, **kwargs))

    def remember_many(self, items: Iterable[Mapping[str, Any]], **kwargs: Any) -> ImportReport:
        return self._run(self._calls.remember_many(items, **kwargs))

    def get(self, id: str, **kwargs: Any) -> MemoryItem:
        return self._run(self._calls.get(id, **kwargs))

    def update(self, id: str, **kwargs: Any) -> MemoryItem:
        return self._run(self._calls.update(id, **kwargs))

    def forget(self, id: str | Sequence[str] | None = None, **kwargs: Any) -> int:
        return self._run(self._calls.forget(id, **kwargs))

    def list(self, **kwargs: Any) -> builtins.list[MemoryItem]:
        return self._run(self._calls.list(**kwargs))

    def search(self, text: str, **kwargs: Any) -> builtins.list[Hit]:
        return self._run(self._calls.search(text, **kwargs))

    def add_message(self, session: str, role: str, text: str, **kwargs: Any) -> Message:
        return self._run(self._calls.add_message(session, role, text, **kwargs))

    def recent_messages(self, session: str, **kwargs: Any) -> builtins.list[Message]:
        return self._run(self._calls.recent_messages(session, **kwargs))

    def recall(self, text: str, **kwargs: Any) -> dict[str, Any]:
        return self._run(self._calls.recall(text, **kwargs))

    def route(self, text: str, **kwargs: Any) -> dict[str, Any]:
        return self._run(self._calls.route(text, **kwargs))

    def analyze(self, text: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self._run(self._calls.analyze(text, *args, **kwargs))

    def list_agents(self, **kwargs: Any) -> builtins.list[Agent]:
        return self._run(self._calls.list_agents(**kwargs))

    def put_agent(self, agent: Agent | Mapping[str, Any], **kwargs: Any) -> Agent:
        return self._run(self._calls.put_agent(agent, **kwargs))

    def delete_agent(self, agent_id: str, **kwargs: Any) -> None:
        self._run(self._calls.delete_agent(agent_id, **kwargs))

    def health(self) -> dict[str, Any]:
        """The service's readiness (``{"status": "ready"}``); raises ``ServiceError`` when it is not."""
        return self._run(self._calls.health())


class AsyncClient:
    """The async twin of :class:`Client`: the same methods, as coroutines."""

    def __init__(self, url: str = DEFAULT_URL, *, api_key: str | None = None, owner: str | None = None,
                 timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._calls = _Calls(owner)
        self._http = httpx.AsyncClient(base_url=self.url, headers=_headers(api_key), timeout=timeout)

    async def _run(self, plan: _Plan[T]) -> T:
        answers = []
        for call in plan.calls:
            try:
                response = await self._http.send(_request(self._http, call))
            except httpx.HTTPError as exc:
                raise _unreachable(self.url, exc) from None
            answers.append(_read(call, response))
        return plan.combine(answers)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def remember(self, text: str, **kwargs: Any) -> MemoryItem:
        return await self._run(self._calls.remember(text, **kwargs))

    async def remember_many(self, items: Iterable[Mapping[str, Any]], **kwargs: Any) -> ImportReport:
        return await self._run(self._calls.remember_many(items, **kwargs))

    async def get(self, id: str, **kwargs: Any) -> MemoryItem:
        return await self._run(self._calls.get(id, **kwargs))

    async def update(self, id: str, **kwargs: Any) -> MemoryItem:
        return await self._run(self._calls.update(id, **kwargs))

    async def forget(self, id: str | Sequence[str] | None = None, **kwargs: Any) -> int:
        return await self._run(self._calls.forget(id, **kwargs))

    async def list(self, **kwargs: Any) -> builtins.list[MemoryItem]:
        return await self._run(self._calls.list(**kwargs))

    async def search(self, text: str, **kwargs: Any) -> builtins.list[Hit]:
        return await self._run(self._calls.search(text, **kwargs))

    async def add_message(self, session: str, role: str, text: str, **kwargs: Any) -> Message:
        return await self._run(self._calls.add_message(session, role, text, **kwargs))

    async def recent_messages(self, session: str, **kwargs: Any) -> builtins.list[Message]:
        return await self._run(self._calls.recent_messages(session, **kwargs))

    async def recall(self, text: str, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._calls.recall(text, **kwargs))

    async def route(self, text: str, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._calls.route(text, **kwargs))

    async def analyze(self, text: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._calls.analyze(text, *args, **kwargs))

    async def list_agents(self, **kwargs: Any) -> builtins.list[Agent]:
        return await self._run(self._calls.list_agents(**kwargs))

    async def put_agent(self, agent: Agent | Mapping[str, Any], **kwargs: Any) -> Agent:
        return await self._run(self._calls.put_agent(agent, **kwargs))

    async def delete_agent(self, agent_id: str, **kwargs: Any) -> None:
        await self._run(self._calls.delete_agent(agent_id, **kwargs))

    async def health(self) -> dict[str, Any]:
        return await self._run(self._calls.health())
