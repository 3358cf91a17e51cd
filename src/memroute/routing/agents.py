"""Agent catalogues: load and save TOML / YAML / JSON, validate, and version each agent by content.

A catalogue file holds a list of agents under ``agents`` (TOML ``[[agents]]``; JSON or YAML may also be a
bare list). Fields are those of :class:`memroute.types.Agent`; ``capabilities`` (short descriptions of
what the agent can do, e.g. its intents and slots) is kept in ``metadata["capabilities"]`` and scored
piece by piece, like ``examples``. A syntax error names the file, line and column.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memroute.errors import CatalogueError, InputError
from memroute.types import Agent, AgentStatus, as_tuple, as_utc

_LIST_FIELDS = ("keywords", "categories", "tools", "input_types", "examples")
_KNOWN = {"id", "name", "description", "status", "version", "usage_count", "last_used", "threshold", "prompt",
          "capabilities", "metadata", *_LIST_FIELDS}
INPUT_TYPES = ("text", "image", "audio", "video", "file")


def capabilities(agent: Agent) -> tuple[str, ...]:
    """The agent's capability descriptions (``metadata["capabilities"]``), as strings."""
    raw = agent.metadata.get("capabilities", ()) if agent.metadata else ()
    return as_tuple(raw) if isinstance(raw, str | list | tuple) else ()


def agent_version(agent: Agent) -> str:
    """A content hash of everything routing reads from an agent: the key of every per-agent cache.

    Status and usage are left out on purpose: they change often and only affect gating and tie-breaks,
    which are computed per call, not cached.
    """
    content = {
        "id": agent.id, "name": agent.name, "description": agent.description, "keywords": agent.keywords,
        "categories": agent.categories, "tools": agent.tools, "input_types": agent.input_types,
        "examples": agent.examples, "prompt": agent.prompt, "capabilities": capabilities(agent),
        "version": agent.version,
    }
    blob = json.dumps(content, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def agent_from_dict(data: Mapping[str, Any], where: str = "agent") -> Agent:
    """Build an :class:`Agent` from a mapping (a catalogue entry); ``where`` prefixes error messages."""
    if not isinstance(data, Mapping):
        raise CatalogueError(f"{where}: an agent must be a table/object with at least an id, got {type(data).__name__}")
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise CatalogueError(f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN))}")
    agent_id = str(data.get("id", "")).strip()
    if not agent_id:
        raise CatalogueError(f"{where}: every agent needs a non-empty id")
    lists: dict[str, tuple[str, ...]] = {}
    for name in _LIST_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str | list | tuple):
            raise CatalogueError(f"{where} ({agent_id}): {name} must be a list of strings")
        lists[name] = tuple(s.strip() for s in as_tuple(value) if s.strip())
    if not lists["input_types"]:
        lists["input_types"] = ("text",)
    bad_types = [t for t in lists["input_types"] if t not in INPUT_TYPES]
    if bad_types:
        raise CatalogueError(f"{where} ({agent_id}): unknown input type(s) {', '.join(bad_types)}; "
                             f"use {', '.join(INPUT_TYPES)}")
    try:
        status = AgentStatus(str(data.get("status", "active")).strip().lower())
    except ValueError:
        raise CatalogueError(f"{where} ({agent_id}): status must be one of "
                             f"{', '.join(s.value for s in AgentStatus)}") from None
    threshold = data.get("threshold")
    if threshold is not None:
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise CatalogueError(f"{where} ({agent_id}): threshold must be a number in [0, 1]") from None
        if not 0.0 <= threshold <= 1.0:
            raise CatalogueError(f"{where} ({agent_id}): threshold {threshold} is outside [0, 1]")
    try:
        usage = int(data.get("usage_count", 0) or 0)
        last_used = as_utc(data.get("last_used"))
    except (TypeError, ValueError, InputError) as exc:
        raise CatalogueError(f"{where} ({agent_id}): {exc}") from None
    metadata = dict(data.get("metadata") or {})
    caps = data.get("capabilities")
    if caps is not None:
        if not isinstance(caps, str | list | tuple):
            raise CatalogueError(f"{where} ({agent_id}): capabilities must be a list of strings")
        metadata["capabilities"] = [s.strip() for s in as_tuple(caps) if s.strip()]
    return Agent(
        id=agent_id, name=str(data.get("name") or agent_id).strip(), description=str(data.get("description") or ""),
        keywords=lists["keywords"], categories=lists["categories"], tools=lists["tools"],
        input_types=lists["input_types"], status=status, version=str(data.get("version") or ""),
        usage_count=usage, last_used=last_used, examples=lists["examples"], threshold=threshold,
        prompt=str(data.get("prompt") or ""), metadata=metadata,
    )


def agent_to_dict(agent: Agent) -> dict[str, Any]:
    """The catalogue form of an agent (empty fields left out, so files stay short)."""
    out: dict[str, Any] = {"id": agent.id, "name": agent.name}
    if agent.description:
        out["description"] = agent.description
    for name in _LIST_FIELDS:
        value = list(getattr(agent, name))
        if value and not (name == "input_types" and value == ["text"]):
            out[name] = value
    caps = capabilities(agent)
    if caps:
        out["capabilities"] = list(caps)
    if agent.status is not AgentStatus.ACTIVE:
        out["status"] = agent.status.value
    for name in ("version", "prompt"):
        if getattr(agent, name):
            out[name] = getattr(agent, name)
    if agent.usage_count:
        out["usage_count"] = agent.usage_count
    if agent.last_used is not None:
        out["last_used"] = agent.last_used.isoformat()
    if agent.threshold is not None:
        out["threshold"] = agent.threshold
    extra = {k: v for k, v in (agent.metadata or {}).items() if k != "capabilities"}
    if extra:
        out["metadata"] = extra
    return out


def check_agents(agents: Iterable[Agent]) -> tuple[Agent, ...]:
    """Agents as a tuple, after checking that ids are unique (a duplicate is an error, not a guess)."""
    out = tuple(agents)
    seen: dict[str, int] = {}
    for pos, agent in enumerate(out):
        if not isinstance(agent, Agent):
            raise InputError(f"agents[{pos}] is a {type(agent).__name__}, not a memroute Agent; "
                             "build it with Agent(...) or load_catalogue()")
        if agent.id in seen:
            raise InputError(f"duplicate agent id {agent.id!r} (agents {seen[agent.id]} and {pos}): "
                             "give every agent its own id")
        seen[agent.id] = pos
    return out


def _format_of(path: Path, fmt: str | None) -> str:
    name = (fmt or path.suffix.lstrip(".")).lower()
    if name in ("yml", "yaml"):
        return "yaml"
    if name in ("toml", "json"):
        return name
    raise CatalogueError(f"{path}: cannot tell the catalogue format from the suffix {path.suffix!r}; "
                         "use .toml, .yaml, .yml or .json")


def parse_catalogue(text: str, fmt: str, source: str = "<catalogue>") -> tuple[Agent, ...]:
    """Parse catalogue text in ``toml``, ``yaml`` or ``json``; errors say line and column."""
    data: Any
    if fmt == "toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:  # its message already ends "(at line L, column C)"
            raise CatalogueError(f"{source}: TOML syntax error: {exc}") from None
    elif fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CatalogueError(f"{source}: JSON syntax error at line {exc.lineno}, column {exc.colno}: "
                                 f"{exc.msg}") from None
    elif fmt == "yaml":
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise CatalogueError(f"{source}: YAML syntax error{where}: {exc.problem or exc}") from None
        except yaml.YAMLError as exc:
            raise CatalogueError(f"{source}: YAML error: {exc}") from None
    else:
        raise CatalogueError(f"unknown catalogue format {fmt!r}; use toml, yaml or json")
    entries = data.get("agents") if isinstance(data, Mapping) else data
    if data is None or entries is None:
        raise CatalogueError(f"{source}: no agents found; put them in a list named 'agents' "
                             "(TOML: [[agents]] tables)")
    if not isinstance(entries, list):
        raise CatalogueError(f"{source}: 'agents' must be a list of agents")
    agents = [agent_from_dict(entry, f"{source}: agents[{i}]") for i, entry in enumerate(entries)]
    try:
        return check_agents(agents)
    except InputError as exc:
        raise CatalogueError(f"{source}: {exc}") from None


def load_catalogue(path: str | Path, fmt: str | None = None) -> tuple[Agent, ...]:
    """Load agents from a TOML, YAML or JSON file (format from the suffix unless ``fmt`` is given)."""
    path = Path(path)
    kind = _format_of(path, fmt)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogueError(f"catalogue file {path} does not exist (in {Path.cwd()}); `memroute init` writes a "
                             "commented starter agents.toml in the current folder") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogueError(f"cannot read catalogue file {path}: {exc}") from None
    return parse_catalogue(text, kind, str(path))


def dump_catalogue(agents: Sequence[Agent], fmt: str) -> str:
    """Catalogue text in ``toml``, ``yaml`` or ``json``; :func:`parse_catalogue` reads it back unchanged."""
    data = {"agents": [agent_to_dict(a) for a in check_agents(agents)]}
    if fmt == "json":
        return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    if fmt == "yaml":
        import yaml

        return str(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    if fmt == "toml":
        import tomli_w

        return tomli_w.dumps(data)
    raise CatalogueError(f"unknown catalogue format {fmt!r}; use toml, yaml or json")


def save_catalogue(agents: Sequence[Agent], path: str | Path, fmt: str | None = None) -> None:
    """Write agents to a TOML, YAML or JSON file (format from the suffix unless ``fmt`` is given)."""
    path = Path(path)
    text = dump_catalogue(agents, _format_of(path, fmt))
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CatalogueError(f"cannot write catalogue file {path}: {exc}") from None
