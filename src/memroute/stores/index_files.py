"""The SQLite store's search index saved next to the database, so that a large store opens in a second.

``<database>.index/`` holds one generation of files written from the in-memory index
(:class:`memroute.stores.memory_index.MemoryIndex`) and ``manifest.json``, written last, which names them:

- ``g<N>-vectors.f32``: the float32 vectors, raw rows with room for more (a sparse tail), memory-mapped
  copy-on-write on open: pages are read when a search touches them and the file never changes under a reader;
- ``g<N>-rows.npz``: the filter columns, row ids, field lengths, memory ids (UTF-8 blob and offsets) and the
  BM25 postings as one CSR table; ``g<N>-terms.json``: the terms and the owner/session codes;
- ``g<N>-graph.usearch`` (from ``GRAPH_MIN_ROWS`` rows on): the approximate graph (:mod:`memroute.stores.ann`).

The manifest records what the files were made from: the change-log position (``seq``) they include, the
store's ``index_id`` (a random id kept in the database's ``meta`` table), the embedding model and dimension,
and every file's size. The tables stay the source of truth: on open the files are used only if all of these
match (a file deleted, truncated, from another store, model or dimension, or newer than the table is
rebuilt from the table, with a log line that says why); rows changed after ``seq`` are then read from the
change log. A writer takes ``lock`` (``flock``), writes a new generation and fsyncs it, replaces the manifest
atomically and only then deletes the older files, so a crash at any point leaves a complete generation.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from tqdm import tqdm

from memroute.stores.ann import AnnGraph
from memroute.stores.memory_index import MemoryIndex

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
    gen = int(manifest["generation"])
    try:
        matrix = np.memmap(root / f"g{gen}-vectors.f32", dtype=np.float32, mode="c", shape=(capacity, dim))
        with np.load(root / f"g{gen}-rows.npz") as z:
            arrays = {k: z[k] for k in z.files}
        words = json.loads((root / f"g{gen}-terms.json").read_text(encoding="utf-8"))
        meta = {k[3:]: v for k, v in arrays.items() if k.startswith("m__")}
        if any(len(v) != rows for v in meta.values()) or len(arrays["id_off"]) != rows + 1:
            raise StaleIndex("its row columns do not have the manifest's row count")
        postings = (list(words["terms"]), arrays["p_off"], arrays["p_slots"], arrays["p_own"], arrays["p_ctx"])
        index = MemoryIndex.from_parts(dim, matrix, meta, list(words["codes"]),
                                       (arrays["id_blob"], arrays["id_off"]), postings, capacity - rows)
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


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[bool]:
    """The writers' lock, if free (``False``: another process is writing the files now)."""
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def save(root: Path, index: MemoryIndex, seq: int, index_id: str, model: tuple[str, int]) -> int | None:
    """Write ``index`` (which includes changes up to ``seq``) as a new generation; its number, or ``None``
    if another process holds the lock. ``OSError`` (a full disk) leaves the previous generation in place."""
    root.mkdir(exist_ok=True)
    with _locked(root) as mine:
        if not mine:
            return None
        try:
            old = _read_manifest(root)
        except StaleIndex:
            old = {}
        # never the number of files another process may have mapped, even when the manifest is lost
        numbers = [int(p.name[1:].split("-", 1)[0]) for p in root.glob("g*-*") if p.name[1:].split("-", 1)[0].isdigit()]
        gen = max([int(old.get("generation", 0)), *numbers]) + 1
        written: list[Path] = []
        try:
            manifest = _write(root, gen, index, written)
        except BaseException:
            for path in written:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        manifest.update(format=FORMAT, generation=gen, seq=seq, index_id=index_id, model_id=model[0],
                        dimension=model[1])
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
    return gen


def _write(root: Path, gen: int, index: MemoryIndex, written: list[Path]) -> dict[str, Any]:
    matrix, meta, codes, (blob, id_off), (terms, p_off, p_slots, p_own, p_ctx) = index.parts()
    rows, dim = len(matrix), index.dimension
    capacity = rows + max(1024, int(rows * HEADROOM))
    vectors = root / f"g{gen}-vectors.f32"
    written.append(vectors)
    with open(vectors, "wb") as fh:
        for start in range(0, rows, 65_536):
            fh.write(np.ascontiguousarray(matrix[start : start + 65_536]).tobytes())
        fh.truncate(capacity * dim * 4)  # the room for new rows is a hole: no disk used
        fh.flush()
        os.fsync(fh.fileno())
    arrays = {f"m__{k}": v for k, v in meta.items()}
    arrays.update(id_blob=np.frombuffer(blob, dtype=np.uint8), id_off=id_off, p_off=p_off, p_slots=p_slots,
                  p_own=p_own, p_ctx=p_ctx)
    columns = root / f"g{gen}-rows.npz"
    written.append(columns)
    with open(columns, "wb") as fh:
        np.savez(fh, **cast(dict[str, Any], arrays))
        fh.flush()
        os.fsync(fh.fileno())
    words = root / f"g{gen}-terms.json"
    written.append(words)
    with open(words, "w", encoding="utf-8") as fh:
        json.dump({"terms": terms, "codes": codes}, fh, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    graph_name, graph_rows = _write_graph(root, gen, index, written)
    files = {p.name: p.stat().st_size for p in written}
    if graph_name:
        files[graph_name] = (root / graph_name).stat().st_size
    return {"rows": rows, "capacity": capacity, "files": files, "graph": graph_name, "graph_rows": graph_rows}


def _write_graph(root: Path, gen: int, index: MemoryIndex, written: list[Path]) -> tuple[str | None, int]:
    """The graph file of this generation: the current one if few rows came after it, else extended or new."""
    live = len(index)
    graph = index.graph
    if live < GRAPH_MIN_ROWS:
        return None, 0
    if graph is not None and graph.path is not None and index.rows - index.ann_rows < GRAPH_EXTEND_ROWS:
        return graph.path.name, index.ann_rows
    matrix, meta = index.parts()[:2]
    if graph is not None and graph.path is not None:
        start, graph = index.ann_rows, AnnGraph.load(graph.path, index.dimension)
    else:
        start, graph = 0, AnnGraph.new(index.dimension)
    alive = np.flatnonzero(meta["_alive"][start:]) + start
    path = root / f"g{gen}-graph.usearch"
    written.append(path)
    log.info("adding %d rows to the approximate graph of %s", len(alive), root)
    with tqdm(total=len(alive), desc="memroute: graph", unit="rows", disable=None) as bar:
        for chunk in range(0, len(alive), 65_536):
            slots = alive[chunk : chunk + 65_536]
            graph.add(meta["_row"][slots], matrix[slots], bar.update)
    graph.save(path)
    index.attach_graph(AnnGraph.view(path, index.dimension), index.rows)
    return path.name, index.rows


def _fsync_dir(root: Path) -> None:
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
