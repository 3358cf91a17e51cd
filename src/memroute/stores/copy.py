"""Copy everything from one store to another (SQLite -> PostgreSQL and back), resumable and verified.

Memories are copied in batches with their tokens and vectors as they are (nothing is re-embedded), then
the conversation log and the named state. Progress is recorded in the target after every batch, so an
interrupted copy resumes where it stopped; upserts by (owner, id) make a repeated batch harmless. At the
end both stores are compared: counts, and an order-independent checksum over every memory's content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memroute.errors import ModelMismatchError, StoreError
from memroute.stores.base import MemoryRecord, Store

_NAMESPACE = "copy"


@dataclass(frozen=True, slots=True)
class CopyReport:
    memories: int
    messages: int
    state: int
    resumed_from: int
    checksum: str


def record_digest(rec: MemoryRecord) -> int:
    m = rec.memory
    h = hashlib.sha256()
    for part in (m.owner, m.id, m.text, m.reply or "", str(m.kind), m.session_id or "",
                 m.occurred_at.isoformat() if m.occurred_at else "", str(int(m.sensitivity)), " ".join(rec.tokens),
                 " ".join(rec.context_tokens)):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    h.update(np.round(np.asarray(rec.vector, dtype=np.float64), 5).tobytes())
    return int.from_bytes(h.digest()[:8], "big")


def store_checksum(store: Store) -> tuple[int, str]:
    """(number of memories, order-independent checksum of their content and vectors)."""
    total, count = 0, 0
    for rec in store.iter_records():
        total = (total + record_digest(rec)) % (1 << 64)
        count += 1
    return count, f"{total:016x}"


def copy_store(source: Store, target: Store, batch_size: int = 500,
               progress: Callable[[int], Any] | None = None) -> CopyReport:
    src_model = source.stats()
    if src_model.model_id is None or src_model.dimension is None:
        raise StoreError(f"{source.url} holds no embedding model yet: nothing to copy")
    try:
        target.bind_model(src_model.model_id, src_model.dimension)
    except ModelMismatchError as exc:
        raise ModelMismatchError(f"cannot copy: {exc}") from exc
    key = source.url
    done = int((target.get_state(_NAMESPACE, key) or {}).get("memories", 0))
    batch: list[MemoryRecord] = []
    copied = 0
    for rec in source.iter_records(batch_size):
        copied += 1
        if copied <= done:
            continue
        batch.append(rec)
        if len(batch) >= batch_size:
            target.upsert(batch)
            target.put_state(_NAMESPACE, key, {"memories": copied})
            if progress:
                progress(len(batch))
            batch = []
    if batch:
        target.upsert(batch)
        target.put_state(_NAMESPACE, key, {"memories": copied})
        if progress:
            progress(len(batch))
    messages = 0
    if not (target.get_state(_NAMESPACE, key) or {}).get("messages_done"):
        chunk = []
        for msg in source.iter_messages(batch_size):
            chunk.append(msg)
            if len(chunk) >= batch_size:
                target.add_messages(chunk)
                messages += len(chunk)
                chunk = []
        target.add_messages(chunk)
        messages += len(chunk)
        target.put_state(_NAMESPACE, key, {"memories": copied, "messages_done": True})
    state = 0
    for namespace, owner, skey, value in source.iter_state():
        if namespace != _NAMESPACE:
            target.put_state(namespace, skey, value, owner)
            state += 1
    src_count, src_sum = store_checksum(source)
    dst_count, dst_sum = store_checksum(target)
    if (src_count, src_sum) != (dst_count, dst_sum):
        raise StoreError(f"copy verification failed: source has {src_count} memories (checksum {src_sum}), target "
                         f"{dst_count} ({dst_sum}); the target held other memories before, or a write happened "
                         "during the copy")
    target.put_state(_NAMESPACE, key, {"memories": 0, "messages_done": False, "finished": True})
    return CopyReport(copied, messages, state, done, src_sum)
