"""The embedded default store: one SQLite file (or ``:memory:``), zero set-up.

- The tables are the source of truth: memories with memroute's own pre-tokenised text (SQLite has no
  Japanese or Korean tokenizer), their vectors as float32 blobs, the conversation log, named state.
- Search runs in an exact in-memory index (:mod:`memroute.stores.memory_index`: numpy cosine KNN and Okapi
  BM25 with an own-words and a context field) built from the tables on first search. SQLite FTS5 was the
  first BM25 engine here and was measured out: its p95 on 100k real chat messages was 20-50 ms against the
  10 ms target, because it looks up every matching row. Every write logs the rows it touched in
  ``index_changes`` in the same transaction, so another process sharing the file brings its index up to
  date before its next search.
- WAL mode, a busy timeout, numbered migrations (``PRAGMA user_version``); every write is one
  ``BEGIN IMMEDIATE`` transaction, so a memory and all its index entries change together or not at all.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from memroute.embed.tokens import TokenVectors
from memroute.errors import (
    ModelMismatchError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
)
from memroute.stores import index_files, token_blobs
from memroute.stores.base import MemoryRecord, StateEntry, StoreStats, checked_vector
from memroute.stores.memory_index import NEVER, NO_TIME, MemoryIndex, RowMeta
from memroute.stores.migrations.sqlite import MIGRATIONS
from memroute.stores.row_cache import RowCache
from memroute.stores.sqlite_files import make_owner_only
from memroute.times import checked_micros, from_micros, to_micros
from memroute.types import MemoryItem, MemoryKind, Message, ScoredId, SearchFilter, Sensitivity, utcnow

_COLUMNS = ("owner, id, session_id, kind, text, reply, occurred_at, created_at, expires_at, archived, "
            "sensitivity, source_type, metadata, language")
_CHANGE_LOG_KEEP = 200_000
_WRITE_RETRY_S = 30.0
log = logging.getLogger("memroute.store")


@contextlib.contextmanager
def translate_errors(what: str, path: str) -> Iterator[None]:
    """Turn ``sqlite3`` errors into memroute errors that say what to do."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        msg = str(exc)
        if "locked" in msg or "busy" in msg:
            raise StoreLockedError(
                f"{what}: the database {path} is locked by another writer; retry, or raise "
                "MEMROUTE_BUSY_TIMEOUT_MS") from exc
        if "readonly" in msg or "read-only" in msg:
            raise StoreReadOnlyError(f"{what}: the database {path} is read-only; check the file and "
                                     "directory permissions") from exc
        if "disk is full" in msg or "disk I/O error" in msg:
            raise StoreError(f"{what}: the database {path} could not be written ({msg}): the disk may be full or a "
                             "file-size limit reached; free space and retry (nothing of this write was "
                             "stored)") from exc
        if "unable to open" in msg:
            raise StoreError(f"{what}: cannot open {path}; check that the directory exists and is "
                             "writable") from exc
        raise StoreError(f"{what} failed on {path}: {msg}") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{what} failed on {path}: {exc} (is it a memroute SQLite file?)") from exc


def _dt(value: int | None) -> datetime | None:
    return from_micros(value) if value is not None else None


def _index_micros(value: object) -> int:
    """A stored time as the index keeps it, whole microseconds inside the calendar's ends."""
    if not isinstance(value, int):  # REAL or TEXT, written by hand: SQLite would compare it differently
        raise ValueError(f"a time is stored as {type(value).__name__}, not as whole microseconds")
    return to_micros(from_micros(value))


def _token(token: str) -> str:
    """Tokens are stored space-separated: white space inside a token (none of our tokenizers make it) goes."""
    return "".join(token.split())


def _token_text(tokens: Sequence[str]) -> str:
    return " ".join(t for t in (_token(tok) for tok in tokens) if t)


class SQLiteStore:
    """A :class:`memroute.stores.base.Store` on one SQLite file."""

    def __init__(self, path: str, busy_timeout_ms: int = 5000, read_only: bool = False,
                 index_files_min_rows: int = index_files.FILES_MIN_ROWS) -> None:
        self.path = path
        self.index_files_min_rows = index_files_min_rows
        self._files_root = None if path == ":memory:" else index_files.index_dir(path)
        self._unsaved = 0
        self.url = "sqlite://:memory:" if path == ":memory:" else f"sqlite:///{path}"
        self.read_only = read_only
        self._lock = threading.RLock()
        if read_only:
            if not Path(path).is_file():
                raise StoreError(f"cannot open {path} read-only: the file does not exist")
            self.url += "?mode=ro"
        elif path != ":memory:":
            parent = Path(path).expanduser().resolve().parent
            if not parent.exists():
                try:
                    parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(f"cannot create directory {parent} for {path}: {exc}") from exc
            make_owner_only(path)
        with translate_errors("open", path):
            target = f"file:{Path(path).resolve()}?mode=ro" if read_only else path
            self._conn = sqlite3.connect(target, timeout=busy_timeout_ms / 1000, isolation_level=None,
                                         check_same_thread=False, uri=read_only)
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # deleted content is overwritten with zeros, whatever this SQLite build's default (upstream: off)
            self._conn.execute("PRAGMA secure_delete = ON")
            if path != ":memory:" and not read_only:
                mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal" and os.access(path, os.W_OK):
                    raise StoreError(f"cannot switch {path} to WAL mode (got {mode})")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        self._index: MemoryIndex | None = None
        self._index_seq = 0
        self._item_cache: RowCache[MemoryItem] = RowCache()
        self._vector_cache: RowCache[npt.NDArray[np.float32]] = RowCache()
        self._writer: index_files.Writer | None = None
        self._write_after = 0.0  # (monotonic) not before, after a failed write or while another process writes
        self._model: tuple[str, int] | None = None
        meta = self._meta()
        if "model_id" in meta:
            self._model = (meta["model_id"], int(meta["dimension"]))

    # ------------------------------------------------------------------------------------- plumbing
    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock, translate_errors(what, self.path):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                _rollback(self._conn)
                raise

    def _read(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock, translate_errors(what, self.path):
            return self._conn.execute(sql, params).fetchall()

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        latest = MIGRATIONS[-1][0]
        if version > latest:
            raise SchemaVersionError(
                f"{self.path} has schema version {version}, newer than this memroute knows ({latest}); "
                "upgrade memroute")
        if self.read_only:
            if version < latest:
                raise StoreReadOnlyError(f"{self.path} needs schema migrations but is opened read-only; open "
                                         "it once read-write")
            return
        for number, _name, sql in MIGRATIONS:
            if number <= version:
                continue
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                current = self._conn.execute("PRAGMA user_version").fetchone()[0]
                if current < number:  # another process may have migrated while we waited
                    for statement in _split_sql(sql):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {number}")
                self._conn.execute("COMMIT")
            except BaseException:
                _rollback(self._conn)
                raise

    def _meta(self) -> dict[str, str]:
        return dict(self._read("read settings", "SELECT key, value FROM meta"))

    # ----------------------------------------------------------------------------------- the model
    def bind_model(self, model_id: str, dimension: int) -> None:
        if self._model is not None:
            if self._model != (model_id, dimension):
                raise ModelMismatchError(
                    f"{self.url} was written with embedding model {self._model[0]} ({self._model[1]}-d), "
                    f"not {model_id} ({dimension}-d); open it with embedder matching the store, or copy "
                    "the memories into a new store")
            return
        with self._write("record the embedding model") as conn:
            rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if "model_id" in rows:
                self._model = (rows["model_id"], int(rows["dimension"]))
            else:
                conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                                 [("model_id", model_id), ("dimension", str(dimension))])
                self._model = (model_id, dimension)
        self.bind_model(model_id, dimension)

    def _dimension(self) -> int:
        if self._model is None:
            raise StoreError(f"{self.url} has no embedding model yet; call bind_model first")
        return self._model[1]

    # ------------------------------------------------------------------------------------ memories
    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        self.write_batch(records)

    def write_batch(self, records: Sequence[MemoryRecord], messages: Sequence[Message] = (),
                    state: StateEntry | None = None) -> None:
        if not records and not messages and state is None:
            return
        dim = self._dimension() if records else 0
        rows = []
        for rec in records:
            m = rec.memory
            vec = checked_vector(rec.vector, dim, f"the vector of memory {m.id}")
            times = tuple(checked_micros(t, f"{name} of memory {m.id}") for t, name in (
                (m.occurred_at, "occurred_at"), (m.created_at or utcnow(), "created_at"), (m.expires_at, "expires_at")))
            blobs = (None if rec.token_vectors is None
                     else token_blobs.encoded(rec.token_vectors, f"the token vectors of memory {m.id}"))
            rows.append((rec, vec, times, blobs))
        message_rows = _message_rows(messages)
        with self._write("store memories") as conn:
            touched: list[int] = []
            for rec, vec, (occurred, created, expires), blobs in rows:
                m = rec.memory
                old = conn.execute("SELECT rowid FROM memories WHERE owner=? AND id=?", (m.owner, m.id)).fetchone()
                if old is not None:
                    conn.execute("DELETE FROM memories WHERE rowid = ?", (old[0],))
                    conn.execute("DELETE FROM memory_vectors WHERE rowid = ?", (old[0],))
                tokens, context = _token_text(rec.tokens), _token_text(rec.context_tokens)
                cur = conn.execute(
                    f"INSERT INTO memories ({_COLUMNS}, tokens, context_tokens) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (m.owner, m.id, m.session_id, str(m.kind), m.text, m.reply, occurred, created, expires,
                     int(m.archived), int(m.sensitivity),
                     m.source_type, json.dumps(dict(m.metadata), ensure_ascii=False), m.language, tokens,
                     context))
                rowid = int(cur.lastrowid or 0)
                conn.execute("INSERT INTO memory_vectors (rowid, vector) VALUES (?, ?)", (rowid, vec.tobytes()))
                if blobs is not None:
                    conn.execute("INSERT INTO memory_tokens (rowid, owner, ids, codes, scales) VALUES (?, ?, ?, ?, ?)",
                                 (rowid, m.owner, *blobs))
                if old is not None:
                    touched.append(int(old[0]))
                touched.append(rowid)
            if touched:
                self._log_changes(conn, touched)
            if message_rows:
                conn.executemany(_ADD_MESSAGE_SQL, message_rows)
            if state is not None:
                conn.execute(_PUT_STATE_SQL, _state_row(state))

    def _log_changes(self, conn: sqlite3.Connection, rows: Sequence[int]) -> None:
        conn.executemany("INSERT INTO index_changes (row, op) VALUES (?, 'c')", [(r,) for r in rows])
        seq = conn.execute("SELECT max(seq) FROM index_changes").fetchone()[0] or 0
        if seq % 1000 < len(rows):  # now and then, keep the change log bounded
            conn.execute("DELETE FROM index_changes WHERE seq <= ?", (seq - _CHANGE_LOG_KEEP,))

    def get(self, ids: Sequence[str], owner: str) -> list[MemoryItem]:
        if not ids:
            return []
        with self._lock, translate_errors("get memories", self.path):
            cache = self._cached_items()
            found, missing = cache.split(owner, dict.fromkeys(ids))
            for chunk in _chunks(missing, 500):
                marks = ",".join("?" * len(chunk))
                for row in self._conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE owner = ? AND id IN ({marks})",
                                              [owner, *chunk]).fetchall():
                    item = _memory(row)
                    found[item.id] = item
                    cache.put(owner, item.id, item)
        return [found[i] for i in ids if i in found]

    def get_vectors(self, ids: Sequence[str], owner: str) -> dict[str, npt.NDArray[np.float32]]:
        unique = list(dict.fromkeys(ids))
        with self._lock, translate_errors("get vectors", self.path):
            cache = self._cached_vectors()
            found, missing = cache.split(owner, unique)
            for chunk in _chunks(missing, 500):
                marks = ",".join("?" * len(chunk))
                for mid, blob in self._conn.execute(
                        "SELECT m.id, v.vector FROM memories m JOIN memory_vectors v ON v.rowid = m.rowid "
                        f"WHERE m.owner = ? AND m.id IN ({marks})", [owner, *chunk]).fetchall():
                    found[mid] = vector = np.frombuffer(blob, dtype=np.float32)  # read-only: safe to share
                    cache.put(owner, mid, vector)
        # in the order the query gives them (by id, per batch of 500): a recall's duplicate and change checks
        # sum over the vectors in this order, and their floats must not depend on what was cached
        return {i: found[i] for chunk in _chunks(unique, 500) for i in sorted(chunk) if i in found}

    def get_token_vectors(self, ids: Sequence[str], owner: str, dimension: int) -> dict[str, TokenVectors]:
        rows = []
        with self._lock, translate_errors("get token vectors", self.path):
            for chunk in _chunks(list(dict.fromkeys(ids)), 500):
                marks = ",".join("?" * len(chunk))
                rows += self._conn.execute(
                    "SELECT m.id, t.ids, t.codes, t.scales FROM memories m JOIN memory_tokens t "
                    f"ON t.rowid = m.rowid WHERE m.owner = ? AND m.id IN ({marks})", [owner, *chunk]).fetchall()

        def refused(mid: str, exc: token_blobs.BadTokenBlob) -> None:
            log.warning("%s: memory %r of owner %r: token vectors not used: %s", self.path, mid, owner, exc)

        return token_blobs.decoded_rows(rows, dimension, refused)

    def token_df(self, token_ids: Sequence[int], owner: str) -> tuple[int, dict[int, int]]:
        wanted = sorted({int(t) for t in token_ids} | {-1})
        with self._lock, translate_errors("read token frequencies", self.path):
            marks = ",".join("?" * len(wanted))
            found = dict(self._conn.execute(f"SELECT token, df FROM token_df WHERE owner = ? AND token IN ({marks})",
                                            [owner, *wanted]).fetchall())
        return int(found.pop(-1, 0)), {int(k): int(v) for k, v in found.items()}

    def _cached_items(self) -> RowCache[MemoryItem]:
        """The rows read before, emptied if anything was written since (call with the lock held)."""
        self._item_cache.at(self._change_seq())
        return self._item_cache

    def _cached_vectors(self) -> RowCache[npt.NDArray[np.float32]]:
        self._vector_cache.at(self._change_seq())
        return self._vector_cache

    def _change_seq(self) -> int:
        """Where the change log is: every write to memories (this process's or another's) moves it."""
        return int(self._conn.execute("SELECT coalesce(max(seq), 0) FROM index_changes").fetchone()[0])

    def delete(self, ids: Sequence[str], owner: str) -> int:
        if not ids:
            return 0
        deleted = 0
        with self._write("delete memories") as conn:
            for chunk in _chunks(list(dict.fromkeys(ids)), 500):
                marks = ",".join("?" * len(chunk))
                deleted += self._delete_rows(conn, conn.execute(
                    f"SELECT rowid FROM memories WHERE owner = ? AND id IN ({marks})", [owner, *chunk]).fetchall())
        if deleted:
            self._purge_wal()
        return deleted

    def _purge_wal(self) -> None:
        """After a forget: secure_delete zeroed the rows in the database pages, but the WAL still holds the
        page images written before; copy the WAL into the database and truncate it, so no copy is left."""
        if self.path == ":memory:":
            return
        with self._lock, translate_errors("checkpoint after forget", self.path):
            busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            log.warning("another connection was reading %s: forgotten text stays in its -wal file until the next "
                        "checkpoint", self.path)

    def delete_where(self, owner: str, session_id: str | None = None) -> int:
        deleted = self._delete_where(owner, session_id)
        self._purge_wal()
        return deleted

    def _delete_where(self, owner: str, session_id: str | None) -> int:
        with self._write("forget") as conn:
            if session_id is None:
                rows = conn.execute("SELECT rowid FROM memories WHERE owner = ?", (owner,)).fetchall()
                conn.execute("DELETE FROM messages WHERE owner = ?", (owner,))
                conn.execute("DELETE FROM state WHERE owner = ?", (owner,))
            else:
                rows = conn.execute("SELECT rowid FROM memories WHERE owner = ? AND session_id = ?",
                                    (owner, session_id)).fetchall()
                conn.execute("DELETE FROM messages WHERE owner = ? AND session_id = ?", (owner, session_id))
            return self._delete_rows(conn, rows)

    def _delete_rows(self, conn: sqlite3.Connection, rows: list[Any]) -> int:
        if not rows:
            return 0
        conn.executemany("DELETE FROM memories WHERE rowid = ?", [(r[0],) for r in rows])
        conn.executemany("DELETE FROM memory_vectors WHERE rowid = ?", [(r[0],) for r in rows])
        self._log_changes(conn, [int(r[0]) for r in rows])
        return len(rows)

    def list_memories(self, flt: SearchFilter, limit: int = 100, offset: int = 0) -> list[MemoryItem]:
        where, params = _where(flt)
        rows = self._read("list memories", f"SELECT {_COLUMNS} FROM memories m WHERE {where} "
                          "ORDER BY coalesce(occurred_at, created_at) DESC, rowid DESC LIMIT ? OFFSET ?",
                          [*params, int(limit), int(offset)])
        return [_memory(r) for r in rows]

    def iter_records(self, batch_size: int = 1000) -> Iterator[MemoryRecord]:
        last = 0
        while True:
            columns = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
            rows = self._read("read memories", f"SELECT m.rowid, {columns}, m.tokens, m.context_tokens, v.vector, "
                              "t.ids, t.codes, t.scales FROM memories m JOIN memory_vectors v ON v.rowid = m.rowid "
                              "LEFT JOIN memory_tokens t ON t.rowid = m.rowid WHERE m.rowid > ? "
                              "ORDER BY m.rowid LIMIT ?", (last, batch_size))
            if not rows:
                return
            for row in rows:
                last = row[0]
                yield MemoryRecord(_memory(row[1:15]), row[15].split(), np.frombuffer(row[17], np.float32),
                                   row[16].split(), token_blobs.copied(*row[18:21]))

    def count(self, owner: str | None = None) -> int:
        if owner is None:
            return int(self._read("count", "SELECT count(*) FROM memories")[0][0])
        return int(self._read("count", "SELECT count(*) FROM memories WHERE owner = ?", (owner,))[0][0])

    # -------------------------------------------------------------------------------------- search
    def search_bm25(self, tokens: Sequence[str], flt: SearchFilter, limit: int,
                    weights: tuple[float, float] = (1.0, 0.0)) -> list[ScoredId]:
        terms = [t for t in (_token(tok) for tok in tokens) if t]
        if not terms or limit <= 0:
            return []
        with self._lock:
            return self._sync_index().search_bm25(terms, _with_now(flt), limit, weights)

    def search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter, limit: int,
                      exact: bool | None = None) -> list[ScoredId]:
        """Nearest memories; a large store's first pass is approximate (rescored exactly) unless ``exact``."""
        dim = self._dimension()
        q = checked_vector(vector, dim, "the query vector")
        with self._lock:
            return self._sync_index().search_vector(q, _with_now(flt), limit, exact=bool(exact))

    def search_time(self, flt: SearchFilter, limit: int) -> list[ScoredId]:
        if flt.start is None and flt.end is None:
            return []
        where, params = _where(flt)
        rows = self._read("time search", f"SELECT id FROM memories m WHERE {where} AND occurred_at IS NOT NULL "
                          "ORDER BY occurred_at DESC, rowid DESC LIMIT ?", [*params, int(limit)])
        return [ScoredId(r[0], 1.0) for r in rows]

    def _sync_index(self) -> MemoryIndex:
        """Bring the in-memory index up to date with the file (other processes may have written)."""
        with translate_errors("load the search index", self.path):
            self._adopt_written()
            latest = self._conn.execute("SELECT coalesce(max(seq), 0) FROM index_changes").fetchone()[0]
            if self._index is not None and latest == self._index_seq:
                return self._index
            oldest = self._conn.execute("SELECT min(seq) FROM index_changes").fetchone()[0]
            if self._index is None:
                self._index, self._index_seq = self._open_index(latest, oldest)
            if oldest is not None and oldest > self._index_seq + 1:
                log.warning("rebuilding the search index of %s from its table: it missed changes the change log "
                            "no longer holds", self.path)
                self._index, self._index_seq = self._build_index(), int(latest)
                self._unsaved = -1
            elif self._index_seq < latest:
                index = self._index
                changed = [r[0] for r in self._conn.execute(
                    "SELECT DISTINCT row FROM index_changes WHERE seq > ?", (self._index_seq,))]
                for chunk in _chunks(changed, 500):
                    for row in chunk:
                        index.remove(row)
                    self._load_rows(index, f"m.rowid IN ({','.join('?' * len(chunk))})", chunk)
                self._index_seq = int(latest)
                self._unsaved += len(changed) if self._unsaved >= 0 else 0
        self._save_index()
        return self._index

    def _open_index(self, latest: int, oldest: int | None) -> tuple[MemoryIndex, int]:
        """The index from its files if they can be trusted, else built from the table."""
        root, index_id = self._files_root, self._index_id()
        if root is not None and index_id is not None:
            try:
                loaded = index_files.load(root, index_id, (self._model_id(), self._dimension()), int(latest), oldest)
                self._unsaved = 0
                return loaded.index, loaded.seq
            except index_files.StaleIndex as exc:
                if root.exists():
                    log.warning("rebuilding the search index of %s from its table: the index files in %s cannot "
                                "be used: %s", self.path, root, exc)
        self._unsaved = -1
        return self._build_index(), int(latest)

    def _build_index(self) -> MemoryIndex:
        index = MemoryIndex(self._dimension())
        total = self.count()
        with tqdm(total=total, desc="memroute: search index", unit="rows",
                  disable=None if total >= index_files.GRAPH_MIN_ROWS // 4 else True) as bar:
            self._load_rows(index, "m.rowid > 0", (), bar.update)
        return index

    def _save_index(self) -> None:
        """Start writing the index files in the background when the index is large and they lag (-1: never
        written from this index); searches go on meanwhile from this index (:class:`index_files.Writer`)."""
        index, root = self._index, self._files_root
        if (index is None or root is None or self.read_only or self._writer is not None
                or len(index) < self.index_files_min_rows):
            return
        due = max(index_files.GRAPH_EXTEND_ROWS, index.rows // 20)
        # the graph lags its rows (a writer was killed or stopped after publishing the data files)
        graph_due = len(index) >= index_files.GRAPH_MIN_ROWS and (
            index.graph is None or index.rows - index.ann_rows >= index_files.GRAPH_EXTEND_ROWS)
        # files written before the time-ordered copy existed, or an index compacted since (its slots renumbered)
        time_due = index.time_copy is None
        if (self._unsaved >= 0 and self._unsaved < due and not graph_due and not time_due) \
                or time.monotonic() < self._write_after:
            return
        try:
            index_id = self._index_id(create=True)
            assert index_id is not None
            self._writer = index_files.start(root, index.snapshot, self._index_seq, index_id,
                                             (self._model_id(), self._dimension()))
        except (OSError, StoreError) as exc:
            self._write_failed(str(exc))
            return
        if self._writer is None:  # another process is writing them: again after as many changes
            self._write_later()

    def _adopt_written(self) -> None:
        """Swap in the generation the background writer finished, read back from its files (the vectors mapped,
        its graph attached); the changes made since its snapshot are then read from the change log."""
        writer = self._writer
        if writer is None:
            return
        done = writer.done.is_set()  # before take(): nothing is published after done
        loaded = writer.take()
        if loaded is not None:
            self._index, self._index_seq, self._unsaved = loaded.index, loaded.seq, 0
        if not done:
            return
        self._writer = None
        if writer.error is not None and writer.error != "the write was stopped":
            self._write_failed(writer.error)

    def _write_failed(self, reason: str) -> None:
        log.warning("could not write the search index files of %s (%s); searching from memory, the files "
                    "are written again later", self.path, reason)
        self._write_later()

    def _write_later(self) -> None:
        """Try writing the index files again after as many changes as made a write due, and not within
        ``_WRITE_RETRY_S``."""
        self._unsaved, self._write_after = 0, time.monotonic() + _WRITE_RETRY_S

    def finish_index_files(self, timeout: float | None = None) -> bool:
        """Wait for the index files being written in the background, if any, and search from them; ``False`` if
        the write is still going after ``timeout`` seconds. (Searches never wait for it: this is for a
        benchmark or a script that wants the files on disk before it ends.)"""
        writer = self._writer
        if writer is not None and not writer.wait(timeout):
            return False
        with self._lock, translate_errors("load the search index", self.path):
            self._adopt_written()
        return True

    def _index_id(self, create: bool = False) -> str | None:
        """The random id that ties index files to this database (``meta.index_id``)."""
        if self._files_root is None:
            return None
        rows = self._read("read settings", "SELECT value FROM meta WHERE key = 'index_id'")
        if rows or not create or self.read_only:
            return str(rows[0][0]) if rows else None
        with self._write("record the index id") as conn:
            conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('index_id', ?)", (uuid.uuid4().hex,))
        return self._index_id()

    def _model_id(self) -> str:
        self._dimension()
        assert self._model is not None
        return self._model[0]

    def _load_rows(self, index: MemoryIndex, where: str, params: Sequence[Any],
                   progress: Callable[[int], object] | None = None) -> None:
        """Put rows of every owner into the index. A row that cannot be read (written by hand, or by a bug) is
        left out of the index and logged: it must never fail the searches of the other owners."""
        cur = self._conn.execute("SELECT m.rowid, owner, id, session_id, kind, sensitivity, occurred_at, expires_at, "
                                 "archived, tokens, context_tokens, v.vector FROM memories m JOIN memory_vectors v "
                                 f"ON v.rowid = m.rowid WHERE {where}", params)
        dim = index.dimension
        while batch := cur.fetchmany(5000):
            for rowid, owner, mid, session_id, kind, sens, occurred, expires, archived, own, ctx, blob in batch:
                try:
                    meta = RowMeta(str(mid), str(owner), None if session_id is None else str(session_id),
                                   MemoryKind(kind), Sensitivity(int(sens)),
                                   NO_TIME if occurred is None else _index_micros(occurred),
                                   NEVER if expires is None else _index_micros(expires), bool(archived))
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape != (dim,) or not np.isfinite(vector).all():
                        raise ValueError(f"its vector has {vector.size} values, not {dim} finite ones")
                    tokens, context = str(own).split(), str(ctx).split()
                except (ValueError, TypeError, OverflowError) as exc:
                    log.warning("memory row %s of %s cannot be read and is left out of searches: %s", rowid,
                                self.path, exc)
                    continue
                index.put(int(rowid), meta, vector, tokens, context)
            if progress is not None:
                progress(len(batch))

    # ---------------------------------------------------------------------------- conversation log
    def add_messages(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        rows = _message_rows(messages)
        with self._write("append messages") as conn:
            conn.executemany(_ADD_MESSAGE_SQL, rows)

    def recent_messages(self, session_id: str, owner: str, limit: int = 20) -> list[Message]:
        rows = self._read("read messages", "SELECT id, role, text, created_at FROM messages WHERE owner = ? AND "
                          "session_id = ? ORDER BY id DESC LIMIT ?", (owner, session_id, int(limit)))
        return [Message(session_id, role, text, from_micros(ts), owner, mid) for mid, role, text, ts in reversed(rows)]

    def iter_messages(self, batch_size: int = 1000) -> Iterator[Message]:
        last = 0
        while rows := self._read("read messages", "SELECT id, owner, session_id, role, text, created_at FROM messages "
                                 "WHERE id > ? ORDER BY id LIMIT ?", (last, batch_size)):
            for mid, owner, session_id, role, text, ts in rows:
                last = mid
                yield Message(session_id, role, text, from_micros(ts), owner, mid)

    # --------------------------------------------------------------------------------- named state
    def put_state(self, namespace: str, key: str, value: dict[str, Any], owner: str = "") -> None:
        row = _state_row(StateEntry(namespace, key, value, owner))
        with self._write("save state") as conn:
            conn.execute(_PUT_STATE_SQL, row)

    def get_state(self, namespace: str, key: str, owner: str = "") -> dict[str, Any] | None:
        rows = self._read("read state", "SELECT value FROM state WHERE namespace = ? AND owner = ? AND key = ?",
                          (namespace, owner, key))
        return dict(json.loads(rows[0][0])) if rows else None

    def list_state(self, namespace: str, owner: str = "") -> list[tuple[str, dict[str, Any]]]:
        rows = self._read("read state", "SELECT key, value FROM state WHERE namespace = ? AND owner = ? "
                          "ORDER BY updated_at, key", (namespace, owner))
        return [(k, dict(json.loads(v))) for k, v in rows]

    def iter_state(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        for namespace, owner, key, value in self._read("read state", "SELECT namespace, owner, key, value FROM state "
                                                       "ORDER BY namespace, owner, key"):
            yield namespace, owner, key, dict(json.loads(value))

    # ----------------------------------------------------------------------------------- lifecycle
    def stats(self) -> StoreStats:
        (memories, owners, sessions), = self._read(
            "stats", "SELECT count(*), count(DISTINCT owner), count(DISTINCT session_id) FROM memories")
        messages = self._read("stats", "SELECT count(*) FROM messages")[0][0]
        version = self._read("stats", "PRAGMA user_version")[0][0]
        size = os.path.getsize(self.path) if self.path != ":memory:" and os.path.exists(self.path) else None
        return StoreStats(int(memories), int(owners), int(sessions), int(messages),
                          self._model[0] if self._model else None, self._model[1] if self._model else None,
                          int(version), size)

    def close(self) -> None:
        """Close the database; an index write still going in the background is stopped and its files removed
        (the next process that searches writes them again)."""
        writer = self._writer
        if writer is not None:
            writer.stop()
        with self._lock:
            self._writer = None
            self._conn.close()


_ADD_MESSAGE_SQL = "INSERT INTO messages (owner, session_id, role, text, created_at) VALUES (?, ?, ?, ?, ?)"
_PUT_STATE_SQL = ("INSERT INTO state (namespace, owner, key, value, updated_at) VALUES (?, ?, ?, ?, ?) "
                  "ON CONFLICT (namespace, owner, key) DO UPDATE SET value = excluded.value, "
                  "updated_at = excluded.updated_at")


def _message_rows(messages: Sequence[Message]) -> list[tuple[str, str, str, str, int | None]]:
    return [(m.owner, m.session_id, m.role, m.text, checked_micros(m.created_at, "the time of a message"))
            for m in messages]


def _state_row(state: StateEntry) -> tuple[str, str, str, str, float]:
    payload = json.dumps(state.value, ensure_ascii=False, default=str)
    return state.namespace, state.owner, state.key, payload, time.time()


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back after a failed statement or COMMIT, keeping the error that caused it: SQLite has already rolled
    back by itself after some errors (a full disk, an I/O error), and a second ROLLBACK would replace that error
    with "no transaction is active"."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _split_sql(sql: str) -> list[str]:
    """Split a script into statements (``sqlite3.complete_statement`` knows where one ends)."""
    out, buf = [], ""
    for line in sql.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def _with_now(flt: SearchFilter) -> SearchFilter:
    if flt.now is not None or flt.include_expired:
        return flt
    return replace(flt, now=utcnow())


def _where(flt: SearchFilter) -> tuple[str, list[Any]]:
    clauses = ["m.owner = ?"]
    params: list[Any] = [flt.owner]
    if flt.session_id is not None:
        clauses.append("m.session_id = ?")
        params.append(flt.session_id)
    if flt.kinds:
        clauses.append(f"m.kind IN ({','.join('?' * len(flt.kinds))})")
        params.extend(str(k) for k in flt.kinds)
    clauses.append("m.sensitivity <= ?")
    params.append(int(flt.max_sensitivity))
    if not flt.include_archived:
        clauses.append("m.archived = 0")
    if not flt.include_expired:
        clauses.append("(m.expires_at IS NULL OR m.expires_at > ?)")
        params.append(to_micros(flt.now or utcnow()))
    if flt.start is not None:
        clauses.append("m.occurred_at >= ?")
        params.append(to_micros(flt.start))
    if flt.end is not None:
        clauses.append("m.occurred_at <= ?")
        params.append(to_micros(flt.end))
    return " AND ".join(clauses), params


def _memory(row: Sequence[Any]) -> MemoryItem:
    (owner, mid, session_id, kind, text, reply, occurred, created, expires, archived, sens, source_type,
     metadata, language) = row
    return MemoryItem(id=mid, owner=owner, text=text, kind=MemoryKind(kind), session_id=session_id, reply=reply,
                      occurred_at=_dt(occurred), created_at=_dt(created), expires_at=_dt(expires),
                      archived=bool(archived), sensitivity=Sensitivity(int(sens)), source_type=source_type,
                      metadata={} if metadata == "{}" else json.loads(metadata), language=language)


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]

