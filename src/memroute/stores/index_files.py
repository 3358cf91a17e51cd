"""The SQLite store's search index saved next to the database, so that a large store opens in a second.

``<database>.index/`` holds one generation of files written from the in-memory index
(:class:`memroute.stores.memory_index.MemoryIndex`) and ``manifest.json``, written last, which names them:

- ``g<N>-vectors.f32``: the float32 vectors, raw rows with room for more (a sparse tail), memory-mapped
  copy-on-write on open: pages are read when a search touches them and the file never changes under a reader;
- ``g<N>-rows.npz``: the filter columns, row ids, field lengths, memory ids (UTF-8 blob and offsets) and the
  BM25 postings as one CSR table; ``g<N>-terms.json``: the terms and the owner/session codes;
- ``g<N>-graph.usearch`` (from ``GRAPH_MIN_ROWS`` rows on): the approximate graph (:mod:`memroute.stores.ann`);
- ``g<N>-bytime.u8``: an 8-bit copy of the vectors of the rows that have a time, in time order, so that a vector
  search inside a time range reads one slice (:mod:`memroute.stores.time_copy`); its order and grid are in
  ``g<N>-rows.npz``. Files written before it existed are used without it and written again with it in the
  background.

The manifest records what the files were made from: the change-log position (``seq``) they include, the
store's ``index_id`` (a random id kept in the database's ``meta`` table), the embedding model and dimension,
and every file's size. The tables stay the source of truth: on open the files are used only if all of these
match (a file deleted, truncated, from another store, model or dimension, or newer than the table is
rebuilt from the table, with a log line that says why); rows changed after ``seq`` are then read from the
change log. A writer takes ``lock`` (``flock``: one writer per store, across processes), writes a new
generation and fsyncs it, replaces the manifest atomically and only then deletes the older files, so a crash at
any point leaves a complete generation. It runs on a thread of its own (:class:`Writer`): the store searches
meanwhile from its in-memory index (the old graph and an exact scan of the rows newer than it, or the exact
8-bit scan) and swaps the new generation in when it is done.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import stat
import threading
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from tqdm import tqdm

from memroute.stores import time_copy
from memroute.stores.ann import AnnGraph
from memroute.stores.memory_index import NO_TIME, MemoryIndex, Snapshot
from memroute.stores.time_copy import TimeCopy
from memroute.stores.vector_file import VectorFile

FORMAT = 2
"""2: the BM25 postings include the parts of hyphenated words (files of format 1 are rebuilt)."""
FILES_MIN_ROWS = 50_000
"""From this many rows on the index is saved (below, reading the table on open takes well under a second)."""
GRAPH_MIN_ROWS = 100_000
"""From this many rows on the index files carry an approximate graph (docs/benchmarks.md)."""
GRAPH_EXTEND_ROWS = 20_000
"""Rows added after the graph are scanned exactly; past this many they are added to the graph."""
HEADROOM = 0.25
log = logging.getLogger("memroute.store")


class StaleIndex(Exception):
    """The files cannot be used; the message says why (it goes into the log line of the rebuild)."""


@dataclass(frozen=True, slots=True)
class Loaded:
    index: MemoryIndex
    seq: int
    generation: int


def index_dir(db_path: str) -> Path:
    return Path(db_path + ".index")


def _read_manifest(root: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise StaleIndex("there are no index files yet") from exc
    except (OSError, ValueError) as exc:
        raise StaleIndex(f"its manifest cannot be read ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise StaleIndex(f"its manifest is not format {FORMAT}")
    return manifest


def load(root: Path, index_id: str, model: tuple[str, int], latest_seq: int, oldest_seq: int | None) -> Loaded:
    """The saved index, or :class:`StaleIndex` saying why it cannot be trusted."""
    for attempt in range(3):  # a writer may replace the generation between reading the manifest and the files
        manifest = _read_manifest(root)
        try:
            return _load(root, manifest, index_id, model, latest_seq, oldest_seq)
        except FileNotFoundError as exc:
            if attempt == 2 or _read_manifest(root).get("generation") == manifest.get("generation"):
                raise StaleIndex(f"a file of it is missing ({Path(str(exc.filename)).name})") from exc
    raise AssertionError("unreachable")


def _load(root: Path, manifest: dict[str, Any], index_id: str, model: tuple[str, int], latest_seq: int,
          oldest_seq: int | None) -> Loaded:
    if manifest.get("index_id") != index_id:
        raise StaleIndex("it was written for another database")
    if (manifest.get("model_id"), manifest.get("dimension")) != model:
        raise StaleIndex(f"it was made with embedding model {manifest.get('model_id')} "
                         f"({manifest.get('dimension')}-d), not {model[0]} ({model[1]}-d)")
    seq = int(manifest["seq"])
    if seq > latest_seq:
        raise StaleIndex(f"it includes changes up to {seq}, past the table's last change {latest_seq}")
    if oldest_seq is not None and oldest_seq > seq + 1:
        raise StaleIndex("it is older than the oldest change the table still logs")
    for name, size in manifest["files"].items():
        actual = (root / name).stat().st_size
        if actual != size:
            raise StaleIndex(f"{name} has {actual} bytes, not {size} (truncated or overwritten)")
    dim, rows, capacity = model[1], int(manifest["rows"]), int(manifest["capacity"])
    gen, data = int(manifest["generation"]), int(manifest.get("data", manifest["generation"]))
    try:
        matrix = np.memmap(root / f"g{data}-vectors.f32", dtype=np.float32, mode="c", shape=(capacity, dim))
        vector_file = VectorFile(root / f"g{data}-vectors.f32", dim, rows)
        with np.load(root / f"g{data}-rows.npz") as z:
            arrays = {k: z[k] for k in z.files}
        words = json.loads((root / f"g{data}-terms.json").read_text(encoding="utf-8"))
        meta = {k[3:]: v for k, v in arrays.items() if k.startswith("m__")}
        if any(len(v) != rows for v in meta.values()) or len(arrays["id_off"]) != rows + 1:
            raise StaleIndex("its row columns do not have the manifest's row count")
        postings = (list(words["terms"]), arrays["p_off"], arrays["p_slots"], arrays["p_own"], arrays["p_ctx"])
        by_time = None
        if manifest.get("bytime"):
            order = arrays["t_order"].astype(np.int64)
            if len(order) != int(manifest["bytime_rows"]) or (len(order) and int(order.max()) >= rows):
                raise StaleIndex("its time-ordered copy does not match its rows")
            by_time = TimeCopy(rows, VectorFile(root / manifest["bytime"], dim, len(order), np.uint8), order,
                               meta["_occurred"][order], arrays["t_lo"], arrays["t_step"])
        index = MemoryIndex.from_parts(dim, matrix, meta, list(words["codes"]),
                                       (arrays["id_blob"], arrays["id_off"]), postings, capacity - rows, vector_file,
                                       by_time)
    except (KeyError, ValueError, OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise StaleIndex(f"its files cannot be read ({exc})") from exc
    if manifest.get("graph"):
        try:
            index.attach_graph(AnnGraph.view(root / manifest["graph"], dim), int(manifest["graph_rows"]))
        except ValueError as exc:
            raise StaleIndex(f"its graph cannot be read ({exc})") from exc
    return Loaded(index, seq, gen)


class Stopped(Exception):
    """The write was stopped (the store closed, the process exits); its files are removed."""


class Writer:
    """One write of the index files, on a thread of its own, so that no search waits for it (building the
    graph of 1M rows takes most of an hour on one core). It publishes the data files first, then the graph
    (:func:`_save`), and reads each generation back for the store to swap in at its next search
    (:meth:`take`). Made by :func:`start` with the writers' lock held; the lock is let go when the write
    ends (:attr:`done`). :meth:`stop` ends it early (between two batches of the graph), removing the files it
    has not published; a process killed meanwhile leaves files no manifest names, which are never read and
    are removed by the next write."""

    def __init__(self, root: Path, lock_fd: int, snapshot: Snapshot, seq: int, index_id: str,
                 model: tuple[str, int]) -> None:
        self.root, self.seq = root, seq
        self.error: str | None = None
        self.done = threading.Event()
        self._ready: Loaded | None = None
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._args: tuple[Snapshot, str, tuple[str, int]] | None = (snapshot, index_id, model)
        self._lock_fd = lock_fd
        self._thread = threading.Thread(target=self._run, name=f"memroute index files {root.name}", daemon=True)
        _RUNNING.add(self)
        self._thread.start()

    def _run(self) -> None:
        assert self._args is not None
        snapshot, index_id, model = self._args
        self._args = None
        steps = _save(self.root, snapshot, self.seq, index_id, model, self._stop)
        del snapshot  # the write's own reference only: it lets the index's vectors go after the first step
        try:
            for _gen in steps:
                loaded = load(self.root, index_id, model, self.seq, None)
                with self._mutex:
                    self._ready = loaded
        except Stopped:
            self.error = "the write was stopped"
        except Exception as exc:  # any: a thread's error would be lost (the store logs it, writes again later)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            try:
                steps.close()
            finally:
                _RUNNING.discard(self)
                try:
                    os.close(self._lock_fd)
                finally:
                    self.done.set()  # whatever failed above: a waiter (finish_index_files, close) must not hang

    def take(self) -> Loaded | None:
        """The generation published and read back since the last call, if any (the store swaps it in)."""
        with self._mutex:
            ready, self._ready = self._ready, None
        return ready

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)

    def stop(self, timeout: float | None = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)


_RUNNING: weakref.WeakSet[Writer] = weakref.WeakSet()


@atexit.register
def _stop_writers() -> None:
    """A process that exits stops its writes (and removes their files) rather than being cut inside one."""
    for writer in list(_RUNNING):
        writer.stop(timeout=10.0)


def start(root: Path, snapshot: Callable[[], Snapshot], seq: int, index_id: str,
          model: tuple[str, int]) -> Writer | None:
    """Start writing the index (``snapshot()``, which includes changes up to ``seq``) as a new generation;
    ``None`` if another writer (of any process) holds the lock. ``snapshot`` is taken here, on the caller's
    thread, after the lock."""
    root.mkdir(mode=0o700, exist_ok=True)  # its files hold the memories' words and ids: the owner's only
    if stat.S_IMODE(root.stat().st_mode) & 0o077:
        os.chmod(root, 0o700)
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return Writer(root, fd, snapshot(), seq, index_id, model)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, BlockingIOError):
            return None
        raise


def _save(root: Path, snap: Snapshot, seq: int, index_id: str, model: tuple[str, int],
          stop: threading.Event) -> Generator[int, None, None]:
    """The write itself, with the lock held, in two steps that each publish a generation (yielding its number):

    1. the data files (vectors, columns, terms), with the graph the index had, if any (the rows newer than it
       are scanned exactly): a new process opens from files a minute after the write began, not an hour;
    2. if the graph must be built or extended, the graph, published as the next generation over the same data
       files.
    """
    try:
        old = _read_manifest(root)
    except StaleIndex:
        old = {}
    # never the number of files another process may have mapped, even when the manifest is lost
    numbers = [int(p.name[1:].split("-", 1)[0]) for p in root.glob("g*-*") if p.name[1:].split("-", 1)[0].isdigit()]
    gen = max([int(old.get("generation", 0)), *numbers]) + 1
    written: list[Path] = []
    with _removed_on_error(written):
        data = _write_data(root, gen, snap, written, stop)
    graph, graph_rows = snap.graph, snap.ann_rows
    keep_graph = snap.live >= GRAPH_MIN_ROWS and graph is not None and graph.path is not None
    current = keep_graph and snap.rows - snap.ann_rows < GRAPH_EXTEND_ROWS
    head = {**data, "format": FORMAT, "data": gen, "seq": seq, "index_id": index_id, "model_id": model[0],
            "dimension": model[1]}
    if keep_graph:
        assert graph is not None and graph.path is not None
        _publish(root, {**head, "generation": gen, "graph": graph.path.name, "graph_rows": graph_rows,
                        "files": {**data["files"], graph.path.name: graph.path.stat().st_size}})
    else:
        _publish(root, {**head, "generation": gen, "graph": None, "graph_rows": 0})
    yield gen
    if snap.live < GRAPH_MIN_ROWS or current:
        return
    # the graph reads the vectors from the file just written (with pread: a mapping read whole would be resident
    # whole), not from the index's matrix: a process that built its index from the table frees those 2 GB (at
    # 1M rows) once it swaps in the files, not an hour later
    vectors = root / f"g{gen}-vectors.f32"
    snap = dataclasses.replace(snap, matrix=np.memmap(vectors, dtype=np.float32, mode="r",
                                                     shape=(snap.rows, snap.dimension)),
                               vector_file=VectorFile(vectors, snap.dimension, snap.rows))
    path = root / f"g{gen + 1}-graph.usearch"
    with _removed_on_error([path]):
        rows = _write_graph(path, snap, stop)
    _publish(root, {**head, "generation": gen + 1, "graph": path.name, "graph_rows": rows,
                    "files": {**data["files"], path.name: path.stat().st_size}})
    yield gen + 1


@contextlib.contextmanager
def _removed_on_error(paths: list[Path]) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for path in paths:
            with contextlib.suppress(OSError):
                path.unlink()
        raise


def _publish(root: Path, manifest: dict[str, Any]) -> None:
    """Replace the manifest atomically, then delete the files it does not name."""
    tmp = root / "manifest.json.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, root / "manifest.json")
    _fsync_dir(root)
    keep = {*manifest["files"], "manifest.json", "lock"}
    for path in root.iterdir():
        if path.name not in keep:
            with contextlib.suppress(OSError):
                path.unlink()


def _write_data(root: Path, gen: int, snap: Snapshot, written: list[Path], stop: threading.Event) -> dict[str, Any]:
    rows, dim = snap.rows, snap.dimension
    (blob, id_off), (terms, p_off, p_slots, p_own, p_ctx) = snap.ids.blob(rows), snap.postings.csr()
    capacity = rows + max(1024, int(rows * HEADROOM))
    vectors = root / f"g{gen}-vectors.f32"
    written.append(vectors)
    with open(vectors, "wb") as fh:
        for start in range(0, rows, 65_536):
            if stop.is_set():
                raise Stopped
            fh.write(snap.vectors(np.arange(start, min(rows, start + 65_536))).tobytes())
        fh.truncate(capacity * dim * 4)  # the room for new rows is a hole: no disk used
        fh.flush()
        os.fsync(fh.fileno())
    occurred = snap.meta["_occurred"]
    timed = np.flatnonzero(snap.meta["_alive"] & (occurred != NO_TIME))
    order = timed[np.argsort(occurred[timed], kind="stable")]
    by_time = root / f"g{gen}-bytime.u8"
    written.append(by_time)
    try:
        lo, step = time_copy.write(by_time, order, snap.vectors, rows, dim, stop)
    except InterruptedError as exc:
        raise Stopped from exc
    arrays = {f"m__{k}": v for k, v in snap.meta.items()}
    arrays.update(id_blob=np.frombuffer(blob, dtype=np.uint8), id_off=id_off, p_off=p_off, p_slots=p_slots,
                  p_own=p_own, p_ctx=p_ctx, t_order=order.astype(np.int32 if rows < 2**31 else np.int64),
                  t_lo=lo, t_step=step)
    columns = root / f"g{gen}-rows.npz"
    written.append(columns)
    with open(columns, "wb") as fh:
        np.savez(fh, **cast(dict[str, Any], arrays))
        fh.flush()
        os.fsync(fh.fileno())
    words = root / f"g{gen}-terms.json"
    written.append(words)
    with open(words, "w", encoding="utf-8") as fh:
        json.dump({"terms": terms, "codes": snap.codes}, fh, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    if stop.is_set():
        raise Stopped
    return {"rows": rows, "capacity": capacity, "bytime": by_time.name, "bytime_rows": len(order),
            "files": {p.name: p.stat().st_size for p in written}}


def _write_graph(path: Path, snap: Snapshot, stop: threading.Event) -> int:
    """The graph over the snapshot's rows, written to ``path``: the index's graph extended, or a new one; the
    number of slots it covers."""
    graph = snap.graph
    if graph is not None and graph.path is not None:
        start, graph = snap.ann_rows, AnnGraph.load(graph.path, snap.dimension)
    else:
        start, graph = 0, AnnGraph.new(snap.dimension)
    alive = np.flatnonzero(snap.meta["_alive"][start:]) + start
    log.info("adding %d rows to the approximate graph of %s (in the background: searches meanwhile scan the "
             "rows it lacks exactly)", len(alive), path.parent)

    def advance(rows: int) -> None:
        bar.update(rows)
        if stop.is_set():
            raise Stopped

    with tqdm(total=len(alive), desc="memroute: graph", unit="rows", disable=None) as bar:
        for chunk in range(0, len(alive), 65_536):
            slots = alive[chunk : chunk + 65_536]
            graph.add(snap.meta["_row"][slots], snap.vectors(slots), advance)
    graph.save(path)
    return snap.rows


def _fsync_dir(root: Path) -> None:
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
