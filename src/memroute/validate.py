"""The rules every argument of the public API meets, checked once where it comes in.

:class:`memroute.Memory` (and so the HTTP service, which calls it) checks its arguments here before anything
is embedded or written, so a bad value is an :class:`~memroute.errors.InputError` that names it, never a
``TypeError``, ``UnicodeEncodeError`` or a store's error after part of a call has run:

- strings are valid Unicode (no unpaired UTF-16 surrogate such as ``"\\ud800"``: no store, tokenizer or
  JSON encoder can take one), and names (owner, session, id, role, source type) and metadata strings have no
  NUL (PostgreSQL's ``text`` and ``jsonb`` cannot hold one);
- whole numbers are ``int`` (not ``bool``, ``float`` or ``str``) within a stated range;
- metadata is a JSON object: string keys, values ``None``, ``bool``, 64-bit integers, finite floats, strings,
  lists and objects, at most :data:`MAX_METADATA_DEPTH` deep and :data:`MAX_METADATA_BYTES` as JSON;
- times are checked by :mod:`memroute.times`.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from memroute.errors import InputError
from memroute.types import Message

MAX_NAME_CHARS = 256
"""Owners, sessions, ids, roles and source types (the HTTP API's limit too)."""
MAX_METADATA_DEPTH = 32
MAX_METADATA_BYTES = 1_000_000
INT64_LIMIT = 2**63
"""Metadata integers lie in [-INT64_LIMIT, INT64_LIMIT): 64-bit signed, as JSON stores and SQLite keep them."""


def _unicode(value: str, what: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what} contains an unpaired UTF-16 surrogate ({value[exc.start]!r} at position "
                         f"{exc.start}); pass valid Unicode text") from None
    return value


def text(value: object, what: str, max_chars: int, *, allow_empty: bool = False) -> str:
    """A text to store or search: a string of valid Unicode without NUL, at most ``max_chars`` long."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InputError(f"{what} contains a NUL character; remove it")
    if not allow_empty and not value.strip():
        raise InputError(f"{what} is empty; a memory needs some words")
    if len(value) > max_chars:
        raise InputError(f"{what} has {len(value):,} characters, more than the limit of {max_chars:,} "
                         "(MEMROUTE_MAX_TEXT_CHARS)")
    return _unicode(value, what)


def name(value: object, what: str) -> str:
    """An owner, session, id, role or source type: a non-blank string of at most 256 characters, no NUL."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InputError(f"{what} is empty")
    if len(value) > MAX_NAME_CHARS:
        raise InputError(f"{what} has {len(value):,} characters; at most {MAX_NAME_CHARS} are allowed")
    if "\x00" in value:
        raise InputError(f"{what} contains a NUL character; remove it")
    return _unicode(value, what)


def optional_name(value: object, what: str) -> str | None:
    """:func:`name`, or ``None`` for ``None``."""
    return None if value is None else name(value, what)


def count(value: object, what: str, low: int, high: int) -> int:
    """A whole number (an ``int``, not a ``bool``, ``float`` or string) in ``low`` .. ``high``."""
    if isinstance(value, bool):
        raise InputError(f"{what} must be a whole number, not a bool")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InputError(f"{what} must be a whole number, got {type(value).__name__} {value!r:.40}") from None
    if not low <= number <= high:
        raise InputError(f"{what} must be between {low:,} and {high:,}, got {number:,}")
    return number


def flag(value: object, what: str) -> bool:
    """``True`` or ``False`` (``"no"`` would be true in Python: it is refused)."""
    if not isinstance(value, bool):
        raise InputError(f"{what} must be True or False, got {type(value).__name__} {value!r:.40}")
    return value


def metadata(value: object) -> dict[str, Any]:
    """A JSON object as a new plain ``dict`` (tuples become lists), or :class:`InputError` saying what is wrong."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"metadata must be a JSON object (a mapping), got {type(value).__name__}")
    out = _json(value, "metadata", 0)
    size = len(json.dumps(out, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InputError(f"metadata is {size:,} bytes as JSON, more than the limit of {MAX_METADATA_BYTES:,}")
    return out  # type: ignore[no-any-return]


def _json(value: object, where: str, depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -INT64_LIMIT <= value < INT64_LIMIT:
            raise InputError(f"{where} is an integer outside the 64-bit range; store it as a string")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"{where} is {value}, which JSON cannot hold; use null or a string")
        return float(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise InputError(f"{where} contains a NUL character; remove it")
        return _unicode(value, where)
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_METADATA_DEPTH:
        raise InputError(f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep (at {where})")
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError(f"{where} has a key {key!r:.40} of type {type(key).__name__}; JSON keys are strings")
            if "\x00" in key:
                raise InputError(f"{where} has a key with a NUL character; remove it")
            _unicode(key, f"a key of {where}")
            out[key] = _json(item, f"{where}[{key!r:.40}]", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_json(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise InputError(f"{where} is a {type(value).__name__}, which JSON cannot hold; use a string, number, bool, "
                     "null, list or object")


def turns(value: object, max_chars: int) -> list[Message | Mapping[str, Any]] | None:
    """Recent conversation for a recall: ``Message`` values or ``{"role", "text"}`` mappings, oldest first."""
    if value is None:
        return None
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise InputError("recent_messages must be a list of messages (Message values or {'role', 'text'} dicts), "
                         f"got {type(value).__name__}")
    out: list[Message | Mapping[str, Any]] = list(value)
    for i, turn in enumerate(out):
        if isinstance(turn, Message):
            role, said = turn.role, turn.text
        elif isinstance(turn, Mapping):
            role, said = turn.get("role", "user"), turn.get("text", turn.get("content", ""))
        else:
            raise InputError(f"recent_messages[{i}] must be a Message or a {{'role', 'text'}} dict, "
                             f"got {type(turn).__name__}")
        name(role, f"recent_messages[{i}].role")
        text(said, f"recent_messages[{i}].text", max_chars, allow_empty=True)
    return out
