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
    """Embedding model by name: ``use-m3`` (default), ``e5-small`` or ``use-m3+e5-small``."""
    embed_cache_size: int = 50_000
    """How many embeddings to keep in the per-process cache."""
    busy_timeout_ms: int = 5_000
    """How long a SQLite writer waits for another writer before giving up."""
    max_text_chars: int = 1_000_000
    """Longest text accepted for one memory."""
    # ------------------------------------------------------------------ optional LLM (docs/llm.md)
    llm_url: str = ""
    """Base URL of an OpenAI-compatible chat-completions endpoint (``https://api.openai.com/v1``, Ollama's
    ``http://localhost:11434/v1``, ...); empty: no LLM, everything stays rule-based."""
    llm_model: str = ""
    """The model name the endpoint serves (``gpt-4o-mini``, ``qwen2.5:7b-instruct``, ...)."""
    llm_api_key: str = dataclasses.field(default="", repr=False)
    """The endpoint's API key; ``llm_api_key_env`` keeps it out of files."""
    llm_api_key_env: str = ""
    """Name of the environment variable holding the key (``OPENAI_API_KEY`` is read for api.openai.com)."""
    llm_require_key: bool = False
    """Refuse to start without a key (a gateway that needs one; api.openai.com always does)."""
    llm_steps: str = "expand,rerank,keywords,intents,route_rerank"
    """Steps that may call the LLM: expand, rerank, slots (recall); keywords, intents, route_rerank (routing)."""
    llm_timeout_s: float = 3.0
    """Time limit of one step (one call, its retries included)."""
    llm_request_timeout_s: float = 6.0
    """Time limit of all the LLM steps of one recall or one route."""
    llm_retries: int = 2
    """Retries on 429 / 5xx / refused connections, inside the step's time limit."""
    llm_top_n: int = 6
    llm_recall_top_n: int = 12
    llm_calls_per_request: int = 3
    llm_tokens_per_request: int = 6_000
    llm_calls_per_minute: int = 120
    llm_tokens_per_minute: int = 200_000
    llm_blend: float = 0.4
    """Weight of the LLM in blended rankings (seed 004: 0.6 rule + 0.4 LLM)."""
    llm_only_when_needed: bool = True
    """Call only when the rules are unsure (context needed, short or CJK message, close top scores)."""
    llm_cache_ttl_s: float = 600.0
    # ------------------------------------------------------------------ the service (memroute serve)
    host: str = "127.0.0.1"
    """Address ``memroute serve`` binds; any address other than loopback requires API keys."""
    port: int = 8765
    api_keys: str = ""
    """API keys, stored hashed: ``sha256:<hex>=owner[,owner...]`` entries separated by ``;`` or new lines
    (owner ``*``: any owner); ``memroute new-key OWNER`` makes one. With neither this nor ``api_keys_file``,
    the service runs without keys, for development, and only on a loopback address."""
    api_keys_file: str = ""
    """A file of such entries, one per line (``#`` starts a comment)."""
    agents: str = ""
    """Agent catalogue file (TOML / YAML / JSON) that the service routes to for owners without their own."""
    routing_fit: str = ""
    """Routing fit written by ``memroute fit --dialogues``; empty: ``AGENTS.fit.json`` next to the catalogue
    file when there is one, else zero-shot routing."""
    routing_bank: str = "builtin"
    """Example requests for common assistant capabilities that Japanese and Korean messages are read against
    (``memroute/routing/request_bank.json``): ``builtin``, ``off``, or a comma-separated list of ``builtin`` and
    paths to bank files of the same form (``builtin,my_bank.json`` extends it; ``my_bank.json`` replaces it)."""
    max_request_bytes: int = 10_000_000
    """Largest request body the service reads (413 beyond)."""
    rate_limit_per_minute: int = 600
    """Requests per minute per API key (per client address without keys); 0: no limit."""
    rate_limit_burst: int = 60
    """Requests a key may send at once before the per-minute rate applies."""
    request_timeout_s: float = 30.0
    """Time a client has to send the request headers, and then the whole body (408 beyond)."""
    server_threads: int = 4
    """Library calls (store, embedding, recall) the service runs at once; the others wait."""
    server_queue: int = 64
    """Requests that may wait for a thread; beyond, 503 with Retry-After."""

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
        return check_llm(cls(**{k: _coerce(k, v, cls) for k, v in values.items()}), env)


def check_llm(settings: Settings, env: Mapping[str, str]) -> Settings:
    """Settle the LLM's key now and refuse a configuration that could only fail at the first message."""
    if not settings.llm_url:
        return settings
    from memroute.llm.client import needs_key

    if not settings.llm_url.startswith(("http://", "https://")):
        raise ConfigError(f"llm_url {settings.llm_url!r} must start with http:// or https:// "
                          "(e.g. http://localhost:11434/v1 for Ollama)")
    if not settings.llm_model:
        raise ConfigError(f"llm_url is set ({settings.llm_url}) but llm_model is not: set MEMROUTE_LLM_MODEL "
                          "to a model the endpoint serves")
    key = settings.llm_api_key
    if not key and settings.llm_api_key_env:
        key = env.get(settings.llm_api_key_env, "")
        if not key:
            raise ConfigError(f"llm_api_key_env names {settings.llm_api_key_env}, which is not set: export it, "
                              "or unset MEMROUTE_LLM_API_KEY_ENV")
    if not key and needs_key(settings.llm_url):
        key = env.get("OPENAI_API_KEY", "")
    if not key and (settings.llm_require_key or needs_key(settings.llm_url)):
        raise ConfigError(f"the LLM endpoint {settings.llm_url} needs an API key: set MEMROUTE_LLM_API_KEY, or "
                          "name the variable that holds it with MEMROUTE_LLM_API_KEY_ENV")
    return dataclasses.replace(settings, llm_api_key=key)


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
    kind: type = type(default.default) if default.default is not dataclasses.MISSING else str
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"setting {name} must be true or false, got {value!r}")
    try:
        if kind is int:
            return int(value)
        if kind is float:
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        what = "a whole number" if kind is int else "a number"
        raise ConfigError(f"setting {name} must be {what}, got {value!r}") from None
