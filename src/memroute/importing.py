"""Importing a JSON Lines file of memories or conversations: in batches, resumable, and once.

Each batch (its memories, its conversations' messages, and the line to resume from) is written in one
transaction (:meth:`memroute.stores.base.Store.write_batch`), so an import stopped at any point (Ctrl-C,
``kill -9``, a full disk) resumes exactly after its last written batch: no line is stored twice or skipped.

A file is known by the SHA-256 of its content, not by its path: importing a file that was already imported
to the end adds nothing and says when that was (``again=True`` imports it again), also under another name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.memory import Memory
from memroute.stores.base import StateEntry
from memroute.types import MemoryItem, Message, utcnow

NAMESPACE = "import"


@dataclass(frozen=True, slots=True)
class ImportResult:
    path: str
    sha256: str
    stored: int
    """Memories stored by this run."""
    messages: int
    rejected: list[dict[str, Any]]
    """``{"line", "error"}`` of every line this run did not store."""
    resumed_at_line: int
    already_imported: dict[str, Any] | None = None
    """When the file had been imported to the end before and nothing was done: that import's record
    (``finished_at``, ``stored``, ``messages``, ``rejected``: totals over all its runs)."""
    changed_since: dict[str, Any] | None = field(default=None)
    """When a file at the same path was imported before with other content: that import's record."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def import_jsonl(mem: Memory, path: Path, *, batch_size: int = 256, resume: bool = True, again: bool = False,
                 on_batch: Callable[[int, int, int], Any] | None = None) -> ImportResult:
    """Import ``path`` into ``mem`` (its owner's memories; a line may name another ``owner``).

    A line is a memory (``{"text", ...}``, the fields of :meth:`Memory.remember`) or a conversation
    (``{"session", "messages": [{"role", "text", "at"}]}``: every turn is logged, user turns become memories
    with the stable id ``session#index``). ``resume=False`` starts at line 1 even if an earlier run stopped
    part-way; ``again=True`` imports a file that was already imported. ``on_batch(line, stored, rejected)``
    is called after each written batch.
    """
    if not path.is_file():
        raise InputError(f"{path} does not exist or is not a file")
    if batch_size < 1:
        raise InputError("the batch size must be at least 1")
    resolved = str(path.resolve())
    digest = file_sha256(path)
    key = f"sha256:{digest}"
    before = mem.store.get_state(NAMESPACE, key, mem.owner)
    legacy = mem.store.get_state(NAMESPACE, resolved, mem.owner)  # earlier versions keyed a run by its path
    if before is None and legacy is not None:
        before = {**legacy, "path": resolved}
    before = before or {}
    if before.get("done") and not again:
        return ImportResult(resolved, digest, 0, 0, [], 1, already_imported=before)
    changed = None
    if not before:
        changed = next((v for k, v in mem.store.list_state(NAMESPACE, mem.owner)
                        if k != key and v.get("path") == resolved and v.get("done")), None)
    resuming = resume and not before.get("done") and int(before.get("next_line", 1)) > 1
    start = int(before["next_line"]) if resuming else 1
    totals = {k: int(before.get(k, 0)) if resuming else 0 for k in ("stored", "messages", "rejected")}
    started_at = before.get("started_at") if resuming else None
    started_at = started_at or utcnow().isoformat()

    rejected: list[dict[str, Any]] = []
    stored = messages = 0
    items: list[MemoryItem] = []
    contexts: list[str | None] = []
    embeds: list[str | None] = []
    logged: list[Message] = []

    def flush(next_line: int, done: bool) -> None:
        nonlocal stored, messages
        value = {"path": resolved, "next_line": next_line, "done": done, "started_at": started_at,
                 "stored": totals["stored"] + stored + len(items), "messages": totals["messages"] + messages +
                 len(logged), "rejected": totals["rejected"] + len(rejected)}
        if done:
            value["finished_at"] = utcnow().isoformat()
        mem.store.write_batch(mem.records(items, contexts, embeds), logged, StateEntry(NAMESPACE, key, value,
                                                                                       mem.owner))
        stored += len(items)
        messages += len(logged)
        for pending in (items, contexts, embeds, logged):
            pending.clear()
        if on_batch is not None:
            on_batch(next_line - 1, stored, len(rejected))

    lineno = start - 1
    for lineno, value, error in _read_jsonl(path, start):
        try:
            if error is not None or not isinstance(value, dict):
                raise InputError(error or "a line must be a JSON object")
            if "messages" in value:
                turns, memories = _conversation(mem, value)
                logged.extend(turns)
                items.extend(memories)
                contexts.extend([None] * len(memories))
                embeds.extend([None] * len(memories))
            else:
                item, context, embed = mem.item_of(value)
                items.append(item)
                contexts.append(context)
                embeds.append(embed)
        except InputError as exc:
            rejected.append({"line": lineno, "error": str(exc)})
        if len(items) >= batch_size or len(logged) >= batch_size:
            flush(lineno + 1, done=False)
    flush(lineno + 1, done=True)
    return ImportResult(resolved, digest, stored, messages, rejected, start, changed_since=changed)


def _read_jsonl(path: Path, start: int) -> Iterator[tuple[int, Any | None, str | None]]:
    """(line number, parsed value or None, error or None) for each non-blank line from ``start``."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno < start or not raw.strip():
                continue
            try:
                yield lineno, json.loads(raw.decode("utf-8")), None
            except UnicodeDecodeError as exc:
                yield lineno, None, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
            except json.JSONDecodeError as exc:
                yield lineno, None, f"not valid JSON ({exc.msg}, column {exc.colno})"


def _conversation(mem: Memory, value: dict[str, Any]) -> tuple[list[Message], list[MemoryItem]]:
    """A conversation line's turns (all of them, checked) and the memories of its user turns."""
    session = value.get("session") or value.get("session_id")
    msgs = value.get("messages")
    if not isinstance(session, str) or not session or not isinstance(msgs, list):
        raise InputError("a conversation needs 'session' (string) and 'messages' (list)")
    turns: list[Message] = []
    memories: list[MemoryItem] = []
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict) or not isinstance(msg.get("text"), str) or not isinstance(msg.get("role"), str):
            raise InputError(f"message {i} needs 'role' and 'text' strings")
        try:
            turns.append(mem.message_of(session, msg["role"], msg["text"], at=msg.get("at")))
            if msg["role"] == "user" and msg["text"].strip():
                # a stable id per turn: importing the conversation again replaces its memories
                memories.append(mem.item_of({"text": msg["text"], "session": session, "kind": "message",
                                             "occurred_at": msg.get("at"), "id": f"{session}#{i}"})[0])
        except InputError as exc:
            raise InputError(f"message {i}: {exc}") from exc
    return turns, memories
