"""``query``: hybrid search over a repository's symbols and docstrings, with memroute's own retrieval.

Each symbol becomes a memory of a private in-memory store (``sqlite://:memory:``): its text is the
qualified name, the identifier and the file's path split into words, the signature and the first paragraph
of the docstring,
indexed for BM25; its embedding is taken from the words and the docstring, so that a request in Japanese
or Korean (「ログイン機能」) finds ``LoginService`` by meaning. :meth:`memroute.Memory.search` fuses the two
lists by Reciprocal Rank Fusion. The query's concepts add their English words to the keyword side
(:func:`~memroute.investigate.consistency.expansion_terms`). Files are re-indexed when they change.

Embedding the symbols is nearly all of the first call's cost (tens of seconds for 100k lines). With
``cache_dir``, each repository's index is a SQLite file there instead, with the size and modification
time of every file it holds, so that a new process (each ``memroute investigate code query``) re-embeds
only the files that changed since.

:meth:`SymbolSearch.related` is the NL→symbol check by meaning (seed 002), for the names the lexical check
(:mod:`~memroute.investigate.consistency`) cannot see: a Korean or Japanese name of a feature that translates
or transliterates an identifier (폴백 감지기 → ``FallbackDetector``, ログイン処理 → ``handle_login``). The
phrase and the identifiers' words are embedded (use-m3 is cross-lingual), and a symbol is named by the phrase
when it is among the phrase's nearest symbols of the whole repository (the ``query`` index) and close enough.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memroute.embed import Embedder, get_embedder
from memroute.errors import ConfigError, InputError, StoreError
from memroute.investigate.codeindex import CodeIndex, FileEntry, ToolResult, timed_result
from memroute.investigate.consistency import expansion_terms, split_identifier
from memroute.investigate.symbols import Symbol
from memroute.memory import Memory
from memroute.stores import open_store

_OWNER = "code"
_STATE = "investigate.code_index"
MAX_QUERY_CHARS = 2000
MEANING_MIN = 0.45
"""Least use-m3 cosine of a feature's name and an identifier's words for the one to name the other. On a
hand-made probe of ja/ko feature names against 15 identifiers (2026-11-25), the right identifier scored
0.51-0.85 and the best wrong one at most 0.53 only where it shared a word (言語検出 ~ FallbackDetector); a
name with no counterpart in the code (결제 처리 without any payment symbol) reached 0.30."""
MEANING_LEAD = 0.05
"""A name counts only within this of the best cosine among the repository's symbols near the phrase."""


@dataclass
class _Repo:
    memory: Memory
    files: dict[str, tuple[int, int, list[str]]] = field(default_factory=dict)
    """rel path -> (mtime_ns, size, memory ids)."""
    persistent: bool = False


class SymbolSearch:
    """The ``query`` tool: one index per repository root, kept in step with the files; in memory, or in
    ``cache_dir`` (kept across processes)."""

    def __init__(self, index: CodeIndex, embedder: Embedder | str = "use-m3",
                 cache_dir: str | Path | None = None) -> None:
        self.index = index
        self._embedder = embedder
        self.cache_dir = Path(cache_dir).expanduser().absolute() if cache_dir else None
        self._repos: dict[Path, _Repo] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            for state in self._repos.values():
                state.memory.close()
            self._repos.clear()

    def query(self, text: str, *, repo: str | None = None, path: str | None = None, kind: str | None = None,
              limit: int = 10) -> ToolResult:
        """The symbols whose names, signatures or docstrings best match ``text`` (any language)."""
        start = time.perf_counter()
        if not isinstance(text, str) or not text.strip():
            raise InputError("query is empty: describe what you are looking for (e.g. 'where passwords are checked')")
        if len(text) > MAX_QUERY_CHARS:
            raise InputError(f"query has {len(text):,} characters; at most {MAX_QUERY_CHARS:,}")
        if not isinstance(limit, int) or limit < 1:
            raise InputError(f"limit must be a positive whole number, got {limit!r}")
        root, under = self.index.target(repo, path)
        scan = self.index.scan(root)
        prefix = None if under is None else self.index.workspace.rel(under, root)
        words = [w for raw in text.split() for w in split_identifier(raw)]
        expanded = " ".join([text, *words, *expansion_terms(text)])
        with self._lock:
            state = self._sync(root, scan.files)
            indexed = sum(len(ids) for _, _, ids in state.files.values())
            hits = state.memory.search(expanded, mode="hybrid", limit=min(max(limit * 5, 50), 500)) if indexed else []
        rows: list[dict[str, Any]] = []
        for hit in hits:
            meta = dict(hit.memory.metadata)
            if (prefix and prefix != "." and not (meta["file"] == prefix or meta["file"].startswith(prefix + "/"))) \
                    or (kind and meta["kind"] != kind):
                continue
            rows.append({**meta, "score": round(hit.score, 4),
                         "scores": {k: round(v, 4) for k, v in hit.scores.items()}})
        return timed_result("query", root, {"query": text, "path": path, "kind": kind}, rows, limit, start,
                            scan.skipped, (), {"indexed_symbols": indexed})

    def related(self, phrase: str, names: Sequence[str], *, repo: str | None = None) -> list[str]:
        """The ``names`` (identifiers, e.g. the symbols an agent submitted) that ``phrase`` names by meaning.

        A name is related when the cosine of the phrase and the name's words is at least
        :data:`MEANING_MIN` and within :data:`MEANING_LEAD` of the best cosine of any symbol near the phrase
        in the repository (so the nearest feature wins, not every symbol that shares a topic with it)."""
        phrase = phrase.strip()[:MAX_QUERY_CHARS]
        words = {n: " ".join(split_identifier(n.split("(", 1)[0])) for n in names}
        words = {n: w for n, w in words.items() if w}
        if not phrase or not words:
            return []
        root, _ = self.index.target(repo, None)
        scan = self.index.scan(root)
        with self._lock:
            state = self._sync(root, scan.files)
            near = state.memory.search(phrase, mode="vector", limit=20) if state.files else []
        rivals = {" ".join(split_identifier(str(h.memory.metadata.get("qualname", "")))) for h in near} - {""}
        texts = list(dict.fromkeys([*words.values(), *rivals]))
        embedder = self._loaded()
        sims = embedder.embed(texts, side="passage") @ embedder.embed([phrase], side="query")[0]
        cosine = dict(zip(texts, (float(x) for x in sims), strict=True))
        best = max(cosine.values())
        return [n for n, w in words.items() if cosine[w] >= MEANING_MIN and cosine[w] >= best - MEANING_LEAD]

    def _loaded(self) -> Embedder:
        if isinstance(self._embedder, str):  # loaded on the first query: the other tools do not need it
            self._embedder = get_embedder(self._embedder)
        return self._embedder

    def _open(self, root: Path) -> _Repo:
        embedder = self._loaded()
        if self.cache_dir is None:
            return _Repo(Memory(open_store("sqlite://:memory:"), embedder, owner=_OWNER))
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the code index cache {self.cache_dir}: {exc.strerror or exc}; "
                              "give another folder") from None
        # One file per repository and embedding model: vectors of another model cannot be mixed in.
        key = hashlib.sha1(f"{root}\0{embedder.model_id}".encode()).hexdigest()[:16]
        path = self.cache_dir / f"code-{key}.db"
        try:
            memory = Memory(open_store(f"sqlite:///{path}"), embedder, owner=_OWNER)
        except StoreError as exc:
            raise StoreError(f"the code index cache {path} cannot be used ({exc}): delete it (it is rebuilt), or "
                             "give another cache folder") from exc
        saved = memory.store.get_state(_STATE, "files", _OWNER) or {}
        files = {}
        if saved.get("root") == str(root):
            files = {rel: (int(v[0]), int(v[1]), [str(i) for i in v[2]]) for rel, v in saved["files"].items()}
        return _Repo(memory, files, persistent=True)

    def _sync(self, root: Path, files: tuple[FileEntry, ...]) -> _Repo:
        state = self._repos.get(root)
        if state is None:
            state = self._open(root)
            self._repos[root] = state
        current = {e.rel: e for e in files}
        stale: list[str] = []
        items: list[dict[str, Any]] = []
        changed = 0
        for rel in list(state.files):
            mtime, size, ids = state.files[rel]
            entry = current.get(rel)
            if entry is None or (entry.source.mtime_ns, entry.source.size) != (mtime, size):
                stale.extend(ids)
                del state.files[rel]
                changed += 1
        for rel, entry in current.items():
            if rel in state.files:
                continue
            changed += 1
            ids = []
            for sym in entry.parsed.symbols:
                item = _item(sym)
                ids.append(item["id"])
                items.append(item)
            state.files[rel] = (entry.source.mtime_ns, entry.source.size, ids)
        if stale:
            state.memory.forget(stale)
        if items:
            state.memory.remember_many(items)
        if state.persistent and changed:
            state.memory.store.put_state(_STATE, "files", {
                "root": str(root), "model": self._embedder_id(),
                "files": {rel: [m, size, ids] for rel, (m, size, ids) in state.files.items()}}, _OWNER)
        return state

    def _embedder_id(self) -> str:
        return self._embedder if isinstance(self._embedder, str) else self._embedder.model_id


def _item(sym: Symbol) -> dict[str, Any]:
    words = " ".join(split_identifier(sym.qualname))
    key = f"{sym.file}:{sym.line}:{sym.qualname}"
    return {"id": key if len(key) <= 200 else hashlib.sha1(key.encode()).hexdigest(),
            "text": f"{sym.qualname} {words} {sym.kind} {' '.join(split_identifier(sym.file))}\n{sym.signature}\n"
                    f"{sym.doc}".strip(),
            "embed_text": f"{words}. {sym.doc}" if sym.doc else words or sym.name,
            "metadata": {"name": sym.name, "qualname": sym.qualname, "kind": sym.kind, "file": sym.file,
                         "line": sym.line, "signature": sym.signature, "doc": sym.doc}}
