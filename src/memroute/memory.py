"""The ``Memory`` facade: one object to remember, search, log conversations and forget.

It owns the text pipeline (language, tokens, embedding), so every store indexes the same data, and it
validates input before anything is written: a rejected memory leaves the store as it was.

Each method is written once, in :class:`MemoryCore`, as a pipeline that yields its store calls
(:mod:`memroute.stores.calls`): :class:`Memory` runs it on a sync store, :class:`AsyncMemory` awaits the calls
on an asyncio store (PostgreSQL) or runs the whole of it in a worker thread (SQLite).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from memroute.config import Settings
from memroute.embed import Embedder, get_embedder
from memroute.embed.tokens import TokenVectors, token_source
from memroute.errors import InputError, NotFoundError
from memroute.llm import LlmAssistant, assistant_from_settings
from memroute.retrieval import Recall, RecallOptions
from memroute.retrieval.changes import SUPERSEDES_KEY, explicit_ids
from memroute.retrieval.fusion import rrf
from memroute.retrieval.orchestrator import recall_steps
from memroute.stores import AsyncStore, MemoryRecord, Store, StoreStats, is_postgres_url, open_async_store, open_store
from memroute.stores.calls import Call, Gather, Steps, run_steps, run_steps_async
from memroute.text import detect_language, query_terms, tokenize
from memroute.times import checked_range
from memroute.types import (
    Hit,
    MemoryItem,
    MemoryKind,
    Message,
    ScoredId,
    SearchFilter,
    Sensitivity,
    as_utc,
    new_id,
    utcnow,
)
from memroute.validate import count, flag, name, optional_name, turns
from memroute.validate import metadata as checked_metadata
from memroute.validate import text as checked_text

T = TypeVar("T")
MAX_LIMIT = 10_000
"""Most results one search, list or read of messages returns."""
MAX_BATCH = 100_000
# The sentence encoders read at most a few hundred tokens; embedding more text only costs time.
EMBED_CHARS = 2000
_FIELDS = {"text", "reply", "kind", "session_id", "occurred_at", "expires_at", "archived", "sensitivity",
           "source_type", "metadata", "id", "created_at", "supersedes"}


@dataclass(frozen=True, slots=True)
class ImportReport:
    stored: int
    rejected: list[tuple[int, str]]
    """(position, reason) of every item that was not stored."""


class MemoryCore:
    """What :class:`Memory` and :class:`AsyncMemory` share: the text pipeline, validation, and every method as a
    pipeline of store calls (``_<method>_steps``), with no store of its own."""

    def __init__(self, embedder: Embedder, settings: Settings | None = None, owner: str | None = None,
                 llm: LlmAssistant | None = None) -> None:
        self.embedder = embedder
        self.settings = settings or Settings()
        self.owner = owner or self.settings.owner
        self.llm = llm
        self.parallel_searches = False
        """Whether a sync store runs a hybrid search's two searches in two threads (a store whose searches run
        in a server says so with ``concurrent_searches``)."""

    @staticmethod
    def _resolve(url: str | None, embedder: Embedder | str | None, settings: Settings | None,
                llm: LlmAssistant | None) -> tuple[Settings, Embedder, LlmAssistant | None]:
        """The settings (with ``url`` as the store), the embedder and the LLM assistant ``open`` uses."""
        settings = settings or Settings.load(store=url)
        if url is not None:
            settings = replace(settings, store=url)
        llm = llm or assistant_from_settings(settings)  # a bad LLM configuration fails here, not at a message
        if embedder is None or isinstance(embedder, str):
            embedder = get_embedder(embedder or settings.embedder, settings.embed_cache_size)
        return settings, embedder, llm

    # ------------------------------------------------------------------------------------- writing
    def _remember_steps(self, text: str, *, owner: str | None = None, session: str | None = None,
                        kind: MemoryKind | str = MemoryKind.NOTE, reply: str | None = None,
                        occurred_at: datetime | str | None = None, expires_at: datetime | str | None = None,
                        sensitivity: Sensitivity | str | int = Sensitivity.PUBLIC, source_type: str | None = None,
                        metadata: Mapping[str, Any] | None = None, id: str | None = None,
                        context: str | None = None, embed_text: str | None = None,
                        supersedes: str | Sequence[str] | None = None) -> Steps[MemoryItem]:
        context, embed_text = self._extras(context, embed_text)
        item = self._build(dict(text=text, session_id=session, kind=kind, reply=reply, occurred_at=occurred_at,
                                expires_at=expires_at, sensitivity=sensitivity, source_type=source_type,
                                metadata=metadata, id=id, supersedes=supersedes), owner)
        replaced = item.metadata.get(SUPERSEDES_KEY) or []
        if replaced:
            found = {m.id for m in (yield Call("get", (list(replaced), item.owner)))}
            missing = [r for r in replaced if r not in found]
            if missing:
                raise NotFoundError(f"supersedes names no memory of owner {item.owner!r}: {', '.join(missing)}; "
                                    "pass the ids of memories already stored")
        yield Call("upsert", (self._records([item], [context], [embed_text]),))
        return item

    def _remember_many_steps(self, items: Iterable[Mapping[str, Any]], *, owner: str | None = None,
                             batch_size: int = 256, show_progress: bool = False,
                             skip_invalid: bool = False) -> Steps[ImportReport]:
        from tqdm import tqdm

        batch_size = count(batch_size, "batch_size", 1, MAX_BATCH)
        skip_invalid = flag(skip_invalid, "skip_invalid")
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
            raise InputError(f"remember_many needs an iterable of mappings, got {type(items).__name__}")
        rejected: builtins.list[tuple[int, str]] = []
        stored = 0
        batch: builtins.list[MemoryItem] = []
        contexts: builtins.list[str | None] = []
        embed_texts: builtins.list[str | None] = []
        bar = tqdm(desc="remember", unit="mem", disable=not show_progress)
        for pos, raw in enumerate(items):
            try:
                item, context, embed_text = self.item_of(raw, owner)
                batch.append(item)
                contexts.append(context)
                embed_texts.append(embed_text)
            except InputError as exc:
                if not skip_invalid:
                    raise InputError(f"item {pos}: {exc}") from exc
                rejected.append((pos, str(exc)))
            if len(batch) >= batch_size:
                yield Call("upsert", (self._records(batch, contexts, embed_texts),))
                stored += len(batch)
                bar.update(len(batch))
                batch, contexts, embed_texts = [], [], []
        if batch:
            yield Call("upsert", (self._records(batch, contexts, embed_texts),))
            stored += len(batch)
            bar.update(len(batch))
        bar.close()
        return ImportReport(stored, rejected)

    def item_of(self, raw: Mapping[str, Any], owner: str | None = None) -> tuple[MemoryItem, str | None, str | None]:
        """A mapping as :meth:`Memory.remember_many` takes it, checked: (memory, context, embed_text).

        Raises ``InputError`` for anything that cannot be stored; nothing is written.
        """
        if not isinstance(raw, Mapping):
            raise InputError(f"an item must be a mapping with 'text', got {type(raw).__name__}")
        fields = dict(raw)
        item_owner = fields.pop("owner", None) or owner
        if "session" in fields:
            fields["session_id"] = fields.pop("session")
        context, embed_text = self._extras(fields.pop("context", None), fields.pop("embed_text", None))
        return self._build(fields, item_owner), context, embed_text

    def message_of(self, session: str, role: str, text: str, *, owner: str | None = None,
                   at: datetime | str | None = None) -> Message:
        """A conversation turn as :meth:`Memory.add_message` would log it, checked; nothing is written."""
        session = name(session, "session (add_message needs a session id)")
        role = name(role, "role (e.g. 'user' or 'assistant')").strip()
        text = checked_text(text, "text", self.settings.max_text_chars, allow_empty=True)
        return Message(session, role, text, as_utc(at, "at") or utcnow(), self._owner(owner))

    def records(self, items: Sequence[MemoryItem], contexts: Sequence[str | None] | None = None,
                embed_texts: Sequence[str | None] | None = None) -> builtins.list[MemoryRecord]:
        """Tokenise and embed checked memories into the records a store writes (``Store.write_batch``)."""
        none: builtins.list[str | None] = [None] * len(items)
        return self._records(items, contexts or none, embed_texts or none)

    def _update_steps(self, id: str, *, owner: str | None = None, **changes: Any) -> Steps[MemoryItem]:
        owner = self._owner(owner)
        id = name(id, "id")
        unknown = set(changes) - (_FIELDS - {"id"}) - {"session", "context", "embed_text"}
        if unknown:
            raise InputError(f"cannot update {', '.join(sorted(unknown))}; fields: {', '.join(sorted(_FIELDS))}")
        current = yield from self._get_steps(id, owner=owner)
        if "session" in changes:
            changes["session_id"] = changes.pop("session")
        context, embed_text = self._extras(changes.pop("context", None), changes.pop("embed_text", None))
        fields = {f: getattr(current, f) for f in _FIELDS - {"supersedes"}}
        fields.update(changes)
        item = self._build(fields, owner)
        yield Call("upsert", (self._records([item], [context], [embed_text]),))
        return item

    def _forget_steps(self, id: str | Sequence[str] | None = None, *, session: str | None = None,
                      owner: str | None = None, everything: bool = False) -> Steps[int]:
        owner = self._owner(owner)
        if id is not None:
            if not isinstance(id, str) and not isinstance(id, Sequence):
                raise InputError(f"forget takes an id or a list of ids, got {type(id).__name__}")
            ids = [name(i, "id") for i in ([id] if isinstance(id, str) else id)]
            return int((yield Call("delete", (ids, owner))))
        if session is not None:
            return int((yield Call("delete_where", (owner, name(session, "session")))))
        if flag(everything, "everything"):
            return int((yield Call("delete_where", (owner,))))
        raise InputError("forget needs an id, a session, or everything=True (deletes all of the owner's data)")

    def _add_message_steps(self, session: str, role: str, text: str, *, owner: str | None = None,
                           at: datetime | str | None = None) -> Steps[Message]:
        msg = self.message_of(session, role, text, owner=owner, at=at)
        yield Call("add_messages", ([msg],))
        return msg

    # ------------------------------------------------------------------------------------- reading
    def _get_steps(self, id: str, *, owner: str | None = None) -> Steps[MemoryItem]:
        owner = self._owner(owner)
        found = yield Call("get", ([name(id, "id")], owner))
        if not found:
            raise NotFoundError(f"no memory {id!r} for owner {owner!r}")
        return found[0]  # type: ignore[no-any-return]

    def _recent_messages_steps(self, session: str, *, owner: str | None = None,
                               limit: int = 20) -> Steps[builtins.list[Message]]:
        return (yield Call("recent_messages", (name(session, "session"), self._owner(owner),  # type: ignore[no-any-return]
                                               count(limit, "limit", 1, MAX_LIMIT))))

    def _list_steps(self, *, owner: str | None = None, session: str | None = None, limit: int = 100,
                    offset: int = 0, **filters: Any) -> Steps[builtins.list[MemoryItem]]:
        flt = self.filter(owner=owner, session=session, **filters)
        limit, offset = count(limit, "limit", 1, MAX_LIMIT), count(offset, "offset", 0, 10**12)
        return (yield Call("list_memories", (flt, limit, offset)))  # type: ignore[no-any-return]

    def filter(self, *, owner: str | None = None, session: str | None = None,
               kinds: Sequence[MemoryKind | str] | None = None,
               max_sensitivity: Sensitivity | str | int = Sensitivity.PUBLIC,
               start: datetime | str | None = None, end: datetime | str | None = None,
               include_expired: bool = False, include_archived: bool = False,
               now: datetime | str | None = None) -> SearchFilter:
        """Build the filter every search honours (owner-scoped); a bad value is an ``InputError``."""
        first, last = checked_range(start, end)
        return SearchFilter(owner=self._owner(owner), session_id=optional_name(session or None, "session"),
                            kinds=_kinds(kinds), max_sensitivity=Sensitivity.parse(max_sensitivity), start=first,
                            end=last, include_expired=flag(include_expired, "include_expired"),
                            include_archived=flag(include_archived, "include_archived"), now=as_utc(now, "now"))

    def _search_steps(self, text: str, *, mode: str = "hybrid", limit: int = 10, owner: str | None = None,
                      session: str | None = None, **filters: Any) -> Steps[builtins.list[Hit]]:
        if mode not in ("bm25", "vector", "hybrid"):
            raise InputError(f"unknown search mode {mode!r}; use bm25, vector or hybrid")
        limit = count(limit, "limit", 1, MAX_LIMIT)
        text = checked_text(text, "text", self.settings.max_text_chars)
        flt = self.filter(owner=owner, session=session, **filters)
        depth = max(limit * 4, 40)
        calls: dict[str, Call] = {}
        if mode in ("bm25", "hybrid"):
            calls["bm25"] = Call("search_bm25", (query_terms(text), flt, depth))
        if mode in ("vector", "hybrid"):
            vec = self.embedder.embed([text[:EMBED_CHARS]], side="query")[0]
            calls["vector"] = Call("search_vector", (vec, flt, depth))
        done = yield Gather(tuple(calls.values()), self.parallel_searches)
        lists: dict[str, builtins.list[ScoredId]] = {name: hits for name, (hits, _) in zip(calls, done, strict=True)}
        fused = rrf(lists.values())
        top = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        items = {m.id: m for m in (yield Call("get", ([i for i, _ in top], flt.owner)))}
        per_source = {name: {s.id: s.score for s in hits} for name, hits in lists.items()}
        return [Hit(items[i], score, {n: per_source[n][i] for n in per_source if i in per_source[n]})
                for i, score in top if i in items]

    def _recall_steps(self, text: str, *, session: str | None = None, owner: str | None = None,
                      recent_messages: Iterable[Message | Mapping[str, Any]] | None = None,
                      now: datetime | str | None = None, options: RecallOptions | None = None) -> Steps[Recall]:
        owner = self._owner(owner)
        text = checked_text(text, "text", self.settings.max_text_chars, allow_empty=True)
        session = optional_name(session, "session")
        recent_messages = turns(recent_messages, self.settings.max_text_chars)
        if options is not None and not isinstance(options, RecallOptions):
            raise InputError(f"options must be a RecallOptions, got {type(options).__name__}")
        opts = (options or RecallOptions()).validated()
        if recent_messages is None and session is not None and opts.recent_turns > 0:
            recent_messages = yield Call("recent_messages", (session, owner, opts.recent_turns))
        return (yield from recall_steps(self.embedder, text, owner=owner, recent_messages=recent_messages, now=now,
                                        options=opts, llm=self.llm))

    def _stats_steps(self) -> Steps[StoreStats]:
        return (yield Call("stats"))  # type: ignore[no-any-return]

    # ---------------------------------------------------------------------------------- internals
    def _build(self, fields: Mapping[str, Any], owner: str | None) -> MemoryItem:
        unknown = set(fields) - _FIELDS
        if unknown:
            raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_FIELDS))}")
        owner = self._owner(owner).strip()
        if not owner:
            raise InputError("a memory needs an owner")
        text = checked_text(fields.get("text"), "text", self.settings.max_text_chars)
        reply = fields.get("reply")
        if reply is not None:
            reply = checked_text(reply, "reply", self.settings.max_text_chars, allow_empty=True) or None
        kind = _kinds([fields.get("kind") or MemoryKind.NOTE])[0]  # type: ignore[index]
        mid = name(fields.get("id") or new_id(), "a memory's id")
        created = as_utc(fields.get("created_at"), "created_at") or utcnow()
        return MemoryItem(
            id=mid, owner=owner, text=text, kind=kind, session_id=optional_name(fields.get("session_id") or None,
                                                                                 "session"), reply=reply,
            # what happened when it was written down, unless told otherwise: recall's time window and
            # time ranges read occurred_at, and a memory without one would fall outside every window
            occurred_at=as_utc(fields.get("occurred_at"), "occurred_at") or created, created_at=created,
            expires_at=as_utc(fields.get("expires_at"), "expires_at"),
            archived=flag(fields.get("archived", False), "archived"),
            sensitivity=Sensitivity.parse(fields.get("sensitivity") or 0),
            source_type=optional_name(fields.get("source_type"), "source_type"),
            metadata=_with_supersedes(checked_metadata(fields.get("metadata")), fields.get("supersedes")),
            language=detect_language(text))

    def _owner(self, owner: object) -> str:
        """The owner a call acts for: ``owner``, else the default one; a valid name either way."""
        return name(owner or self.owner, "owner")

    def _extras(self, context: object, embed_text: object) -> tuple[str | None, str | None]:
        """A memory's ``context`` (may be empty) and ``embed_text``, checked as its text is."""
        limit = self.settings.max_text_chars
        return (None if context is None else checked_text(context, "context", limit, allow_empty=True),
                None if embed_text is None else checked_text(embed_text, "embed_text", limit))

    def _records(self, items: Sequence[MemoryItem], contexts: Sequence[str | None],
                 embed_texts: Sequence[str | None]) -> builtins.list[MemoryRecord]:
        texts = [(e or m.full_text)[:EMBED_CHARS] for m, e in zip(items, embed_texts, strict=True)]
        source = token_source(self.embedder)
        if source is None:
            vectors = self.embedder.embed(texts, side="passage")
            return [MemoryRecord(m, tokenize(m.full_text), v, tokenize(c) if c else ())
                    for m, v, c in zip(items, vectors, contexts, strict=True)]
        # Token vectors are of the memory's own text (late interaction matches the question's words against the
        # memory's, not its neighbours'): from the pooled vector's own pass where that is the memory's text, from
        # a second pass where the pooled vector is of another text (``embed_text``, e.g. a turn with its
        # neighbours).
        own = [m.full_text[:EMBED_CHARS] for m in items]
        same = [i for i, (t, o) in enumerate(zip(texts, own, strict=True)) if t == o]
        other = [i for i in range(len(items)) if texts[i] != own[i]]
        vectors = np.empty((len(items), self.embedder.dimension), dtype=np.float32)
        tokens: builtins.list[TokenVectors | None] = [None] * len(items)
        if same:
            vectors[same], found = source.embed_with_tokens([texts[i] for i in same], side="passage")
            for i, tv in zip(same, found, strict=True):
                tokens[i] = tv
        if other:
            vectors[other] = self.embedder.embed([texts[i] for i in other], side="passage")
            for i, tv in zip(other, source.embed_tokens([own[i] for i in other], side="passage"), strict=True):
                tokens[i] = tv
        return [MemoryRecord(m, tokenize(m.full_text), v, tokenize(c) if c else (), tv)
                for m, v, c, tv in zip(items, vectors, contexts, tokens, strict=True)]



class Memory(MemoryCore):
    """Remember, search and forget memories of many owners in one store.

    ``Memory.open("sqlite:///memroute.db")`` opens (and creates) a store; ``owner`` sets the default owner
    of calls that do not name one. ``llm`` (an :class:`~memroute.llm.LlmAssistant`) adds LLM expansion and
    rerank to :meth:`recall`; ``open`` builds it from the settings (``MEMROUTE_LLM_URL``, ...) when not given.
    """

    def __init__(self, store: Store, embedder: Embedder, settings: Settings | None = None,
                 owner: str | None = None, llm: LlmAssistant | None = None) -> None:
        super().__init__(embedder, settings, owner, llm)
        self.store = store
        self.parallel_searches = getattr(store, "concurrent_searches", False) is True
        store.bind_model(embedder.model_id, embedder.dimension)

    @classmethod
    def open(cls, url: str | None = None, *, owner: str | None = None, embedder: Embedder | str | None = None,
             settings: Settings | None = None, llm: LlmAssistant | None = None) -> Memory:
        settings, embedder, llm = cls._resolve(url, embedder, settings, llm)
        return cls(open_store(settings.store, settings.busy_timeout_ms), embedder, settings, owner, llm)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------- writing
    def remember(self, text: str, *, owner: str | None = None, session: str | None = None,
                 kind: MemoryKind | str = MemoryKind.NOTE, reply: str | None = None,
                 occurred_at: datetime | str | None = None, expires_at: datetime | str | None = None,
                 sensitivity: Sensitivity | str | int = Sensitivity.PUBLIC, source_type: str | None = None,
                 metadata: Mapping[str, Any] | None = None, id: str | None = None,
                 context: str | None = None, embed_text: str | None = None,
                 supersedes: str | Sequence[str] | None = None) -> MemoryItem:
        """Store one memory and index it; returns it as stored.

        ``supersedes``: the id (or ids) of this owner's memories that this one replaces (a fact that
        changed: "I joined Globex" after "I work at Acme"). They are kept; recall ranks this one above
        them and marks them superseded (stored as ``metadata["supersedes"]``).
        ``context`` is optional surrounding text (e.g. neighbouring turns) indexed for BM25 with a lower
        weight than the memory's own words. ``embed_text``, if given, is embedded instead of the memory's
        text: a chat turn embedded with the turns around it is found far more often by meaning (vector-only
        recall@5 on LoCoMo: 0.16 for the bare turn, 0.42 with one turn on each side). Storing an existing id
        replaces that memory everywhere.
        """
        return run_steps(self.store, self._remember_steps(
            text, owner=owner, session=session, kind=kind, reply=reply, occurred_at=occurred_at,
            expires_at=expires_at, sensitivity=sensitivity, source_type=source_type, metadata=metadata, id=id,
            context=context, embed_text=embed_text, supersedes=supersedes))

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, owner: str | None = None,
                      batch_size: int = 256, show_progress: bool = False,
                      skip_invalid: bool = False) -> ImportReport:
        """Store many memories in batches (one transaction per batch).

        Each item is a mapping with ``text`` and optionally the keyword arguments of :meth:`remember`
        (``session`` or ``session_id``, ``owner``, ``context``, ``embed_text``). With ``skip_invalid`` a bad
        item is reported and skipped; without it, the first bad item raises before its batch is written.
        """
        return run_steps(self.store, self._remember_many_steps(items, owner=owner, batch_size=batch_size,
                                                               show_progress=show_progress,
                                                               skip_invalid=skip_invalid))

    def update(self, id: str, *, owner: str | None = None, **changes: Any) -> MemoryItem:
        """Change fields of a memory; changing its text re-indexes it everywhere in one transaction."""
        return run_steps(self.store, self._update_steps(id, owner=owner, **changes))

    def forget(self, id: str | Sequence[str] | None = None, *, session: str | None = None,
               owner: str | None = None, everything: bool = False) -> int:
        """Delete by id(s), by session, or (with ``everything=True``) all of an owner's data.

        Returns the number of memories deleted; they leave every index at once.
        """
        return run_steps(self.store, self._forget_steps(id, session=session, owner=owner, everything=everything))

    def add_message(self, session: str, role: str, text: str, *, owner: str | None = None,
                    at: datetime | str | None = None) -> Message:
        """Append one turn to a session's conversation log (cheap; call it on every message)."""
        return run_steps(self.store, self._add_message_steps(session, role, text, owner=owner, at=at))

    # ------------------------------------------------------------------------------------- reading
    def get(self, id: str, *, owner: str | None = None) -> MemoryItem:
        return run_steps(self.store, self._get_steps(id, owner=owner))

    def recent_messages(self, session: str, *, owner: str | None = None, limit: int = 20) -> builtins.list[Message]:
        return run_steps(self.store, self._recent_messages_steps(session, owner=owner, limit=limit))

    def list(self, *, owner: str | None = None, session: str | None = None, limit: int = 100, offset: int = 0,
             **filters: Any) -> builtins.list[MemoryItem]:
        return run_steps(self.store, self._list_steps(owner=owner, session=session, limit=limit, offset=offset,
                                                      **filters))

    def search(self, text: str, *, mode: str = "hybrid", limit: int = 10, owner: str | None = None,
               session: str | None = None, **filters: Any) -> builtins.list[Hit]:
        """A plain search: ``bm25``, ``vector``, or ``hybrid`` (both, fused by Reciprocal Rank Fusion).

        For the full per-turn pipeline (query understanding, strategies, reranking) use ``recall``.
        """
        return run_steps(self.store, self._search_steps(text, mode=mode, limit=limit, owner=owner, session=session,
                                                        **filters))

    def recall(self, text: str, *, session: str | None = None, owner: str | None = None,
               recent_messages: Iterable[Message | Mapping[str, Any]] | None = None,
               now: datetime | str | None = None, options: RecallOptions | None = None) -> Recall:
        """The memories that matter for this turn, ready for a prompt, with a trace (SPEC section 4).

        ``session`` is the conversation the message belongs to: when ``recent_messages`` is not given, its
        last turns are read from the conversation log. Memories of every session of the owner are searched
        (``options.session`` narrows that). ``now`` is when the message is sent (default: the clock).
        With :attr:`llm` set, expansion and rerank may ask it (``RecallOptions(llm=False)``: not this call).
        """
        return run_steps(self.store, self._recall_steps(text, session=session, owner=owner,
                                                        recent_messages=recent_messages, now=now, options=options))

    def stats(self) -> StoreStats:
        return run_steps(self.store, self._stats_steps())


def _with_supersedes(metadata: Mapping[str, Any], supersedes: Any) -> dict[str, Any]:
    """``metadata`` with ``supersedes`` (an id or a list of ids) under ``"supersedes"``, validated."""
    out = dict(metadata)
    if supersedes is None:
        return out
    ids = [supersedes] if isinstance(supersedes, str) else supersedes
    if not isinstance(ids, list | tuple) or not all(
            isinstance(i, str) and i.strip() and len(i) <= 256 and "\x00" not in i for i in ids):
        raise InputError("supersedes must be a memory id or a list of memory ids (non-empty strings)")
    out[SUPERSEDES_KEY] = sorted({*explicit_ids(out), *ids})
    return out


def _kinds(kinds: object) -> tuple[MemoryKind, ...] | None:
    """Memory kinds by value (one kind or a list of them); ``None`` or empty: every kind."""
    if not kinds:
        return None
    values = [kinds] if isinstance(kinds, str | MemoryKind) else kinds
    if not isinstance(values, Iterable):
        raise InputError(f"kinds must be a list of kinds, got {type(kinds).__name__}")
    out = []
    for kind in values:
        try:
            out.append(MemoryKind(kind))
        except (ValueError, TypeError):
            names = ", ".join(k.value for k in MemoryKind)
            raise InputError(f"unknown kind {kind!r:.40}; use one of {names}") from None
    return tuple(out)


class AsyncMemory:
    """The async twin of :class:`Memory`: the same method names, awaited.

    On PostgreSQL (``await AsyncMemory.open("postgresql://...")``, or ``AsyncMemory(core, store)`` with an
    :class:`~memroute.stores.AsyncStore`) the store's I/O is awaited on the event loop over an asyncio
    connection pool (a recall's searches run concurrently); the CPU work between store calls (validation,
    tokenising, embedding, fusion, rerank, and LLM calls, which are synchronous) runs in worker threads with
    ``asyncio.to_thread``, so it does not stall other tasks. With a :class:`Memory` (SQLite, or any Memory
    passed in) each call runs whole in a worker thread: sqlite3 has no asyncio driver.
    """

    def __init__(self, memory: Memory | MemoryCore, store: AsyncStore | None = None) -> None:
        if store is None and not isinstance(memory, Memory):
            raise InputError("AsyncMemory needs a Memory, or a MemoryCore and an AsyncStore")
        self.core = memory
        self.store = store
        self.sync = memory if store is None and isinstance(memory, Memory) else None
        """The wrapped :class:`Memory` when calls run in worker threads, else None."""

    @classmethod
    async def open(cls, url: str | None = None, *, owner: str | None = None, embedder: Embedder | str | None = None,
                   settings: Settings | None = None, llm: LlmAssistant | None = None) -> AsyncMemory:
        """Open a store as :meth:`Memory.open` does: natively async for ``postgresql://`` URLs."""
        conf, emb, assistant = await asyncio.to_thread(MemoryCore._resolve, url, embedder, settings, llm)
        if not is_postgres_url(conf.store):
            return cls(await asyncio.to_thread(Memory.open, owner=owner, embedder=emb, settings=conf, llm=assistant))
        store = await open_async_store(conf.store)
        try:
            await store.bind_model(emb.model_id, emb.dimension)
        except BaseException:
            await store.close()
            raise
        return cls(MemoryCore(emb, conf, owner, assistant), store)

    async def _run(self, steps: Steps[T]) -> T:
        if self.store is not None:
            return await run_steps_async(self.store, steps)
        assert self.sync is not None
        return await asyncio.to_thread(run_steps, self.sync.store, steps)

    async def remember(self, text: str, **kwargs: Any) -> MemoryItem:
        return await self._run(self.core._remember_steps(text, **kwargs))

    async def remember_many(self, items: Iterable[Mapping[str, Any]], **kwargs: Any) -> ImportReport:
        items = builtins.list(items) if isinstance(items, Iterable) else items  # read here, not in a worker thread
        return await self._run(self.core._remember_many_steps(items, **kwargs))

    async def update(self, id: str, **kwargs: Any) -> MemoryItem:
        return await self._run(self.core._update_steps(id, **kwargs))

    async def forget(self, id: str | Sequence[str] | None = None, **kwargs: Any) -> int:
        return await self._run(self.core._forget_steps(id, **kwargs))

    async def add_message(self, session: str, role: str, text: str, **kwargs: Any) -> Message:
        return await self._run(self.core._add_message_steps(session, role, text, **kwargs))

    async def get(self, id: str, **kwargs: Any) -> MemoryItem:
        return await self._run(self.core._get_steps(id, **kwargs))

    async def recent_messages(self, session: str, **kwargs: Any) -> builtins.list[Message]:
        return await self._run(self.core._recent_messages_steps(session, **kwargs))

    async def list(self, **kwargs: Any) -> builtins.list[MemoryItem]:
        return await self._run(self.core._list_steps(**kwargs))

    async def search(self, text: str, **kwargs: Any) -> builtins.list[Hit]:
        return await self._run(self.core._search_steps(text, **kwargs))

    async def recall(self, text: str, **kwargs: Any) -> Recall:
        return await self._run(self.core._recall_steps(text, **kwargs))

    async def stats(self) -> StoreStats:
        return await self._run(self.core._stats_steps())

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()
        elif self.sync is not None:
            await asyncio.to_thread(self.sync.close)
