"""One typed ``Settings``: defaults < ``memroute.toml`` < ``MEMROUTE_*`` environment < explicit arguments.

The TOML file is ``$MEMROUTE_CONFIG`` if set, else ``./memroute.toml`` if it exists. Keys are the field
names below, at the top level of the file; environment variables are the upper-cased field names with the
``MEMROUTE_`` prefix (``MEMROUTE_STORE=sqlite:///tmp/m.db``).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from memroute.errors import ConfigError


def default_store_url() -> str:
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "memroute"
    return f"sqlite:///{base / 'memroute.db'}"


@dataclass(frozen=True, slots=True)
class Settings:
    store: str = dataclasses.field(default_factory=default_store_url)
    """Store URL: ``sqlite:///path/memroute.db``, ``sqlite://:memory:`` or ``postgresql://...``."""
    owner: str = "default"
    """The owner used by the CLI when ``--owner`` is not given."""
    embedder: str = "use-m3"
    """Embedding model by name: ``use-m3`` (default) or ``e5-small``."""
    embed_cache_size: int = 50_000
    """How many embeddings to keep in the per-process cache."""
    busy_timeout_ms: int = 5_000
    """How long a SQLite writer waits for another writer before giving up."""
    max_text_chars: int = 1_000_000
    """Longest text accepted for one memory."""

    @classmethod
    def load(cls, config_file: str | Path | None = None, env: Mapping[str, str] | None = None,
             **overrides: Any) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        path = Path(config_file) if config_file else None
        if path is None and env.get("MEMROUTE_CONFIG"):
            path = Path(env["MEMROUTE_CONFIG"])
        if path is None and Path("memroute.toml").is_file():
            path = Path("memroute.toml")
        if path is not None:
            values.update(_read_toml(path))
        known = {f.name: f for f in fields(cls)}
        for name in known:
            key = f"MEMROUTE_{name.upper()}"
            if key in env:
                values[name] = env[key]
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**{k: _coerce(k, v, cls) for k, v in values.items()})


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; unset MEMROUTE_CONFIG or create it") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    section = data.get("memroute", data)
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: [memroute] must be a table")
    return dict(section)


def _coerce(name: str, value: Any, cls: type[Settings]) -> Any:
    default = next(f for f in fields(cls) if f.name == name)
    kind = type(default.default) if default.default is not dataclasses.MISSING else str
    try:
        if kind is int:
            return int(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name} must be a whole number, got {value!r}") from None
