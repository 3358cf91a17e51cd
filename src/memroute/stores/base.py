"""The store protocol every backend implements, and the record it stores.

A store keeps memories with their pre-computed index data (content tokens for BM25, one embedding
vector), the conversation log, and small pieces of named state (the last route of a session, an
investigation session). It never tokenises or embeds: the :class:`memroute.memory.Memory` facade does,
so every backend indexes exactly the same tokens and vectors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from memroute.embed.tokens import TokenVectors
from memroute.errors import InputError
from memroute.types import MemoryItem, Message, ScoredId, SearchFilter


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory with what the indexes need: its BM25 tokens and its embedding.

    ``context_tokens`` are optional tokens of the memory's surroundings (e.g. the neighbouring turns of a
    conversation), indexed in a second BM25 field that searches may weight lower than the memory's own.
    """

    memory: MemoryItem
    tokens: Sequence[str]
    vector: npt.NDArray[np.float32]
    context_tokens: Sequence[str] = ()
    token_vectors: TokenVectors | None = None
    """The memory's own token vectors for late interaction, if its embedder gives them
    (:mod:`memroute.embed.tokens`): kept int8 with a float16 scale per token (:mod:`memroute.stores.token_blobs`)."""


def checked_vector(vector: npt.ArrayLike, dimension: int, what: str) -> npt.NDArray[np.float32]:
    """``vector`` as a flat float32 array, or an ``InputError`` naming ``what`` if it cannot be stored."""
    vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    if vec.shape != (dimension,):
        raise InputError(f"{what} has {vec.size} values; the store holds {dimension}-d vectors")
    if not np.isfinite(vec).all():
        raise InputError(f"{what} contains NaN or infinity")
    return vec


@dataclass(frozen=True, slots=True)
class StateEntry:
    """One piece of named state to save with a write (:meth:`Store.write_batch`), e.g. an import's resume point."""

    namespace: str
    key: str
    value: dict[str, Any]
    owner: str = ""


@dataclass(frozen=True, slots=True)
class StoreStats:
    memories: int
    owners: int
    sessions: int
    messages: int
    model_id: str | None
    dimension: int | None
    schema_version: int
    size_bytes: int | None


class Store(Protocol):
    """What memroute needs from a database. ``SearchFilter.owner`` scopes every read."""

    url: str

    # embedding model bookkeeping -------------------------------------------------------------------
    def bind_model(self, model_id: str, dimension: int) -> None:
        """Record the model on first use; raise ``ModelMismatchError`` if the store holds another."""
        ...

    # memories --------------------------------------------------------------------------------------
    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace memories and all their index entries, atomically for the whole batch."""
        ...

    def write_batch(self, records: Sequence[MemoryRecord], messages: Sequence[Message] = (),
                    state: StateEntry | None = None) -> None:
        """Upsert memories, append messages and save a piece of state, all in one transaction: a resume point
        saved this way is never behind (or ahead of) what was written."""
        ...

    def get(self, ids: Sequence[str], owner: str) -> list[MemoryItem]:
        """The memories of ``owner`` with these ids, in the order asked; missing ids are skipped."""
        ...

    def get_vectors(self, ids: Sequence[str], owner: str) -> dict[str, npt.NDArray[np.float32]]: ...

    def get_token_vectors(self, ids: Sequence[str], owner: str, dimension: int) -> dict[str, TokenVectors]:
        """The stored token vectors of these memories; a memory without them, or whose stored vectors are not
        ``dimension``-d, is left out (the second logged as a warning: it is not trusted)."""
        ...

    def token_df(self, token_ids: Sequence[int], owner: str) -> tuple[int, dict[int, int]]:
        """How many of ``owner``'s memories have token vectors, and how many of them hold each token id (the
        document frequency of late interaction's idf); ids held by none are left out."""
        ...

    def delete(self, ids: Sequence[str], owner: str) -> int:
        """Delete from every index at once; returns how many were deleted."""
        ...

    def delete_where(self, owner: str, session_id: str | None = None) -> int:
        """Delete all of an owner's memories, or one session's (and its conversation log)."""
        ...

    def list_memories(self, flt: SearchFilter, limit: int = 100, offset: int = 0) -> list[MemoryItem]:
        """Newest first (by occurred_at, then created_at)."""
        ...

    def iter_records(self, batch_size: int = 1000) -> Iterator[MemoryRecord]:
        """Every record of every owner (for copying between stores)."""
        ...

    def count(self, owner: str | None = None) -> int: ...

    # search ----------------------------------------------------------------------------------------
    def search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                    weights: tuple[float, float] = (1.0, 0.0)) -> list[ScoredId]:
        """BM25 over the stored tokens, any token matching (OR); scores are positive, higher better.

        ``weights`` weigh the memory's own tokens and its context tokens (0 leaves the context out).
        """
        ...

    def search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter, limit: int) -> list[ScoredId]:
        """Exact cosine KNN; scores are cosine similarities."""
        ...

    def search_time(self, flt: SearchFilter, limit: int) -> list[ScoredId]:
        """Memories whose ``occurred_at`` is inside ``flt.start``..``flt.end``, newest first (score 1)."""
        ...

    # conversation log ------------------------------------------------------------------------------
    def add_messages(self, messages: Sequence[Message]) -> None: ...

    def recent_messages(self, session_id: str, owner: str, limit: int = 20) -> list[Message]:
        """The last ``limit`` messages of a session, oldest first."""
        ...

    def iter_messages(self, batch_size: int = 1000) -> Iterator[Message]:
        """Every message of every owner, in the order they were added (for copying between stores)."""
        ...

    # named state -----------------------------------------------------------------------------------
    def put_state(self, namespace: str, key: str, value: dict[str, Any], owner: str = "") -> None: ...

    def get_state(self, namespace: str, key: str, owner: str = "") -> dict[str, Any] | None: ...

    def list_state(self, namespace: str, owner: str = "") -> list[tuple[str, dict[str, Any]]]: ...

    def iter_state(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        """Every piece of state as (namespace, owner, key, value) (for copying between stores)."""
        ...

    # lifecycle -------------------------------------------------------------------------------------
    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...


class AsyncStore(Protocol):
    """:class:`Store` for asyncio: the same methods and meaning, awaited on the event loop.

    ``memroute.stores.postgres_async.AsyncPostgresStore`` implements it on an asyncio connection pool;
    :class:`memroute.memory.AsyncMemory` uses it for PostgreSQL URLs (SQLite stays on worker threads).
    """

    url: str

    async def bind_model(self, model_id: str, dimension: int) -> None: ...

    async def upsert(self, records: Sequence[MemoryRecord]) -> None: ...

    async def write_batch(self, records: Sequence[MemoryRecord], messages: Sequence[Message] = (),
                          state: StateEntry | None = None) -> None: ...

    async def get(self, ids: Sequence[str], owner: str) -> list[MemoryItem]: ...

    async def get_vectors(self, ids: Sequence[str], owner: str) -> dict[str, npt.NDArray[np.float32]]: ...

    async def get_token_vectors(self, ids: Sequence[str], owner: str, dimension: int) -> dict[str, TokenVectors]: ...

    async def token_df(self, token_ids: Sequence[int], owner: str) -> tuple[int, dict[int, int]]: ...

    async def delete(self, ids: Sequence[str], owner: str) -> int: ...

    async def delete_where(self, owner: str, session_id: str | None = None) -> int: ...

    async def list_memories(self, flt: SearchFilter, limit: int = 100, offset: int = 0) -> list[MemoryItem]: ...

    def iter_records(self, batch_size: int = 1000) -> AsyncIterator[MemoryRecord]: ...

    async def count(self, owner: str | None = None) -> int: ...

    async def search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                          weights: tuple[float, float] = (1.0, 0.0)) -> list[ScoredId]: ...

    async def search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter,
                            limit: int) -> list[ScoredId]: ...

    async def search_time(self, flt: SearchFilter, limit: int) -> list[ScoredId]: ...

    async def add_messages(self, messages: Sequence[Message]) -> None: ...

    async def recent_messages(self, session_id: str, owner: str, limit: int = 20) -> list[Message]: ...

    def iter_messages(self, batch_size: int = 1000) -> AsyncIterator[Message]: ...

    async def put_state(self, namespace: str, key: str, value: dict[str, Any], owner: str = "") -> None: ...

    async def get_state(self, namespace: str, key: str, owner: str = "") -> dict[str, Any] | None: ...

    async def list_state(self, namespace: str, owner: str = "") -> list[tuple[str, dict[str, Any]]]: ...

    def iter_state(self) -> AsyncIterator[tuple[str, str, str, dict[str, Any]]]: ...

    async def stats(self) -> StoreStats: ...

    async def close(self) -> None: ...
