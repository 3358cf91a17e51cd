"""Recent messages as the analyser reads them: a role and a text per turn.

``recent_messages`` may hold :class:`memroute.types.Message` values or mappings such as
``{"role": "user", "text": "..."}`` (``"content"`` is accepted for ``"text"``, as chat APIs name it).
A malformed entry is an :class:`~memroute.errors.InputError` that names its index and says what is wrong:
silently skipping it would resolve "it" against the wrong turn. Only the last :data:`MAX_TURNS` turns
are read, each cut to :data:`MAX_TURN_CHARS` characters, so a long history costs no more than a short one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memroute.errors import InputError
from memroute.types import Message

MAX_TURNS = 8
MAX_TURN_CHARS = 2000
USER_ROLES = frozenset({"user", "human", "customer"})


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    text: str

    @property
    def is_user(self) -> bool:
        return self.role in USER_ROLES


def coerce_history(recent_messages: Iterable[Message | Mapping[str, Any]] | None) -> tuple[Turn, ...]:
    """The last turns of ``recent_messages``, oldest first, validated and normalised."""
    if recent_messages is None:
        return ()
    if isinstance(recent_messages, str | bytes | Mapping):
        raise InputError("recent_messages must be a sequence of messages (Message or {'role', 'text'} dicts), "
                         f"not a single {type(recent_messages).__name__}")
    try:
        items = list(recent_messages)
    except TypeError:
        raise InputError(f"recent_messages must be a sequence of messages, not {type(recent_messages).__name__}"
                         ) from None
    start = max(0, len(items) - MAX_TURNS)
    return tuple(_turn(i, items[i]) for i in range(start, len(items)))


def _turn(index: int, item: object) -> Turn:
    if isinstance(item, Message):
        role, text = item.role, item.text
    elif isinstance(item, Mapping):
        text = item.get("text", item.get("content"))
        role = item.get("role", "user")
    else:
        raise InputError(f"recent_messages[{index}] is a {type(item).__name__}: expected a Message or a dict "
                         "with 'role' and 'text'")
    if not isinstance(text, str):
        what = "has no 'text'" if text is None else f"has a {type(text).__name__} 'text'"
        raise InputError(f"recent_messages[{index}] {what}: expected a string (example: "
                         "{'role': 'user', 'text': 'translate this to English'})")
    if not isinstance(role, str):
        raise InputError(f"recent_messages[{index}] has a {type(role).__name__} 'role': expected 'user' or "
                         "'assistant'")
    return Turn(role.strip().lower(), _normalise(text[:MAX_TURN_CHARS]))


@lru_cache(maxsize=4096)
def _normalise(text: str) -> str:
    """NFKC of a history turn; cached, since each turn comes back with every later turn of its conversation."""
    return text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)
