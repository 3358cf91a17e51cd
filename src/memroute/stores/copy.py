"""Copy everything from one store to another (SQLite -> PostgreSQL and back), resumable and verified.

Memories are copied in batches with their tokens and vectors as they are (nothing is re-embedded), then
the conversation log and the named state. Progress is recorded in the target after every batch, so an
interrupted copy resumes where it stopped; writes by (owner, id) make a repeated batch harmless. At the
end both stores are compared: counts, and an order-independent checksum over every memory's content.

A target with ``bulk_load`` (PostgreSQL) gets each batch by binary COPY, its progress saved in the batch's
own transaction. Into an empty target the search indexes are dropped first and built once at the end
(growing an HNSW graph row by row writes ~100 rows/s; building it afterwards is over ten times faster,
docs/benchmarks.md); a resumed copy builds them at its end too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memroute.errors import ModelMismatchError, StoreError
from memroute.stores.base import MemoryRecord, StateEntry, Store

_NAMESPACE = "copy"


@runtime_checkable
class BulkTarget(Protocol):
    """A store that loads many records in one transaction (:meth:`PostgresStore.bulk_load`)."""

    def bulk_load(self, records: Iterable[MemoryRecord], rebuild_indexes: bool = False,
                  progress: Callable[[int], Any] | None = None,
                  state: tuple[str, str, dict[str, Any]] | None = None, analyze: bool = True) -> int: ...

    def drop_search_indexes(self) -> None: ...

    def create_search_indexes(self) -> None: ...


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
    bulk = target if isinstance(target, BulkTarget) else None
    if bulk is not None and done == 0 and target.count() == 0:
        bulk.drop_search_indexes()

    def write(batch: list[MemoryRecord], copied: int) -> None:
        if bulk is not None:
            bulk.bulk_load(batch, state=(_NAMESPACE, key, {"memories": copied}), analyze=False)
        else:
            target.write_batch(batch, state=StateEntry(_NAMESPACE, key, {"memories": copied}))
        if progress:
            progress(len(batch))

    batch: list[MemoryRecord] = []
    copied = 0
    for rec in source.iter_records(batch_size):
        copied += 1
        if copied <= done:
            continue
        batch.append(rec)
        if len(batch) >= batch_size:
            write(batch, copied)
            batch = []
    if batch:
        write(batch, copied)
    if bulk is not None:
        bulk.create_search_indexes()  # the ones dropped above, also when this run resumed an earlier one
    messages = 0
    progress_state = target.get_state(_NAMESPACE, key) or {}
    if not progress_state.get("messages_done"):
        # each chunk is written with the count copied so far, in one transaction: a resumed copy skips exactly those
        skip = int(progress_state.get("messages", 0))
        chunk = []
        for seen, msg in enumerate(source.iter_messages(batch_size), start=1):
            if seen <= skip:
                continue
            chunk.append(msg)
            if len(chunk) >= batch_size:
                messages += len(chunk)
                target.write_batch([], chunk, StateEntry(_NAMESPACE, key, {"memories": copied,
                                                                           "messages": skip + messages}))
                chunk = []
        messages += len(chunk)
        target.write_batch([], chunk, StateEntry(_NAMESPACE, key, {"memories": copied, "messages_done": True}))
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
