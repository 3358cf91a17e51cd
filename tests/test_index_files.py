"""The SQLite store's saved search index: used when it matches the table, repaired when it does not.

Real files, real subprocesses (kill -9, a file-size limit, two at once). Small thresholds stand in for the
production ones (50k rows for the files, 100k for the graph) so that each case runs in seconds.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memroute.stores import index_files
from memroute.stores.sqlite import SQLiteStore
from memroute.types import ScoredId, SearchFilter
from tests.index_files_support import DIM, MODEL, open_store, records

ROOT = str(Path(__file__).resolve().parents[1])
PRELUDE = textwrap.dedent(f"""
    import sys
    sys.path[:0] = [{ROOT!r} + "/src", {ROOT!r}]
    from tests.index_files_support import open_store, records, small_thresholds
    from memroute.types import SearchFilter
    small_thresholds()
""")


@pytest.fixture(autouse=True)
def thresholds(monkeypatch: pytest.MonkeyPatch) -> None:  # as small_thresholds(), undone after the test
    monkeypatch.setattr(index_files, "GRAPH_MIN_ROWS", 300)
    monkeypatch.setattr(index_files, "GRAPH_EXTEND_ROWS", 100)


def vec(i: int, seed: int) -> np.ndarray:
    vector: np.ndarray = records(i, 1, seed)[0].vector
    return vector


def filled(path: Path, n: int = 1200, seed: int = 1) -> None:
    store = open_store(str(path))
    store.upsert(records(0, n, seed))
    store.close()


def memory_only(path: Path) -> SQLiteStore:
    """The same database searched from an index built from its table alone (the reference)."""
    store = SQLiteStore(str(path), index_files_min_rows=10**9)
    store._files_root = None  # neither read nor written
    store.bind_model(MODEL, DIM)
    return store


def assert_same_answers(store: SQLiteStore, path: Path, queries: int = 20) -> None:
    ref = memory_only(path)
    flt = SearchFilter(owner="o")
    rng = np.random.default_rng(99)
    found = 0
    try:
        assert store.count() == ref.count()
        for i in range(queries):
            q = rng.standard_normal(DIM).astype(np.float32)
            q /= np.linalg.norm(q)
            same(store.search_vector(q, flt, 10, exact=True), ref.search_vector(q, flt, 10))
            approx = {h.id for h in store.search_vector(q, flt, 10)}
            found += len(approx & {h.id for h in ref.search_vector(q, flt, 10)})
            words = [f"w{i}", f"v{i % 13}", f"m{i * 7}"]
            same(store.search_bm25(words, flt, 10), ref.search_bm25(words, flt, 10))
        assert found >= 0.9 * 10 * queries  # the graph's first pass, rescored exactly
    finally:
        ref.close()


def same(got: list[ScoredId], want: list[ScoredId]) -> None:
    """The same ids in the same order, the same scores up to float32 summation order."""
    assert [h.id for h in got] == [h.id for h in want]
    assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-5)


def rebuild_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "rebuilding the search index" in r.getMessage()]


def test_saved_index_is_used_on_open_and_equals_the_table(tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "m.db"
    filled(db)
    store = open_store(str(db))
    store.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)  # builds the index, starts writing the files
    assert store.finish_index_files()
    manifest = json.loads((index_files.index_dir(str(db)) / "manifest.json").read_text())
    assert manifest["rows"] == 1200 and manifest["graph_rows"] == 1200
    store.upsert(records(1200, 150, 2))  # after the files: read from the change log
    store.delete(["m3", "m4"], "o")
    store.close()
    caplog.set_level(logging.INFO, "memroute.store")
    store = open_store(str(db))
    hits = store.search_vector(vec(1210, 2), SearchFilter(owner="o"), 1)
    assert hits[0].id == "m1210" and rebuild_lines(caplog) == []
    assert store.search_bm25(["m3"], SearchFilter(owner="o"), 5) == []
    assert_same_answers(store, db)
    store.close()


@pytest.mark.parametrize("damage", ["delete", "truncate", "model", "dimension", "other store", "newer"])
def test_damaged_index_files_are_rebuilt_from_the_table(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        damage: str) -> None:
    db = tmp_path / "m.db"
    filled(db)
    store = open_store(str(db))
    store.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)
    assert store.finish_index_files()
    store.close()
    root = index_files.index_dir(str(db))
    manifest = json.loads((root / "manifest.json").read_text())
    vectors = root / next(n for n in manifest["files"] if n.endswith("vectors.f32"))
    if damage == "delete":
        vectors.unlink()
    elif damage == "truncate":
        os.truncate(root / next(n for n in manifest["files"] if n.endswith("rows.npz")), 100)
    elif damage in ("model", "dimension", "newer"):
        key, value = {"model": ("model_id", "other-model"), "dimension": ("dimension", 64),
                      "newer": ("seq", manifest["seq"] + 5)}[damage]
        (root / "manifest.json").write_text(json.dumps({**manifest, key: value}))
    else:  # the files of another database with the same rows
        other = tmp_path / "other.db"
        filled(other)
        s = open_store(str(other))
        s.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)
        assert s.finish_index_files()
        s.close()
        for p in root.iterdir():
            p.unlink()
        for p in index_files.index_dir(str(other)).iterdir():
            (root / p.name).write_bytes(p.read_bytes())
    caplog.set_level(logging.INFO, "memroute.store")
    store = open_store(str(db))
    assert store.search_vector(vec(7, 1), SearchFilter(owner="o"), 1)[0].id == "m7"
    why = {"delete": "missing", "truncate": "truncated", "model": "other-model", "dimension": "64-d",
           "other store": "another database", "newer": "past the table's last change"}[damage]
    lines = rebuild_lines(caplog)
    assert len(lines) == 1 and why in lines[0], lines
    assert_same_answers(store, db)
    assert store.finish_index_files()
    store.close()
    caplog.clear()
    store = open_store(str(db))  # repaired: the next open trusts the files again
    store.search_vector(vec(7, 1), SearchFilter(owner="o"), 1)
    assert rebuild_lines(caplog) == []
    store.close()


def run_script(body: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(body), *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_kill_during_index_writes_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    writer = """
        import sys
        store = open_store(sys.argv[1])
        i = 0
        while True:  # every batch is searched, and every few batches the files are written again
            store.upsert(records(i, 150, 3))
            store.search_vector(records(i, 1, 3)[0].vector, SearchFilter(owner="o"), 3)
            print(i + 150, flush=True)
            i += 150
    """
    rng = np.random.default_rng(4)
    for _round in range(3):
        proc = run_script(writer, str(db))
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while int(proc.stdout.readline() or 0) < 600 and time.monotonic() < deadline:
            pass
        time.sleep(float(rng.uniform(0.0, 1.5)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    store = open_store(str(db))
    n = store.count()
    assert n >= 600
    for i in (0, n // 2, n - 1):  # the last batch committed is there and found
        assert store.search_vector(records(i, 1, 3)[0].vector, SearchFilter(owner="o"), 1)[0].id == f"m{i}"
    assert_same_answers(store, db)
    store.close()


def test_a_full_disk_while_writing_the_files_leaves_the_store_working(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db)
    limited = """
        import resource, signal, sys, logging
        logging.basicConfig(level=logging.WARNING)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
        store = open_store(sys.argv[1])
        hit = store.search_vector(records(7, 1, 1)[0].vector, SearchFilter(owner="o"), 1)[0]
        store.finish_index_files()
        print(hit.id, store.count())
    """
    proc = run_script(limited, str(db))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.split() == ["m7", "1200"]
    assert "could not write the search index files" in err
    root = index_files.index_dir(str(db))
    assert not (root / "manifest.json").exists()
    assert [p.name for p in root.iterdir()] in (["lock"], [])  # the partial files were removed
    store = open_store(str(db))
    assert_same_answers(store, db)
    assert store.finish_index_files()
    store.close()
    assert (root / "manifest.json").exists()


def test_two_processes_opening_the_same_store_at_once(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db)
    both = """
        import sys
        store = open_store(sys.argv[1])
        start = int(sys.argv[2])
        store.search_vector(records(0, 1, 1)[0].vector, SearchFilter(owner="o"), 3)
        store.upsert(records(start, 50, 5))
        hits = [store.search_vector(r.vector, SearchFilter(owner="o"), 1)[0].id for r in records(start, 50, 5)]
        print(sum(h == "m%d" % i for h, i in zip(hits, range(start, start + 50))), store.count())
    """
    procs = [run_script(both, str(db), str(start)) for start in (5000, 6000)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        found, count = map(int, out.split())
        assert found == 50 and count >= 1250
    store = open_store(str(db))
    assert store.count() == 1300
    assert_same_answers(store, db)
    store.close()


def test_compacting_an_index_read_from_files_keeps_it_exact(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db, n=2400)
    store = open_store(str(db))
    store.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)
    assert store.finish_index_files()  # written to files
    store.close()
    store = open_store(str(db))
    store.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)  # read from them
    store.delete([f"m{i}" for i in range(0, 2400, 2)] + [f"m{i}" for i in range(1, 800, 4)], "o")  # compacts
    assert store.search_vector(vec(3, 1), SearchFilter(owner="o"), 1)[0].id == "m3"
    assert store.search_bm25(["m2"], SearchFilter(owner="o"), 5) == []
    assert_same_answers(store, db)
    store.close()
    store = open_store(str(db))
    assert_same_answers(store, db)
    store.close()


def test_files_saved_before_word_parts_were_indexed_are_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of format 1 hold postings without the parts of hyphenated words: trusting them would leave a
    store's "follow-up" unfound by "follow" until the next rebuild."""
    from memroute.stores import memory_index

    db = tmp_path / "m.db"
    filled(db)
    store = open_store(str(db))
    hyphenated = records(5000, 1, 1)[0]
    store.upsert([type(hyphenated)(hyphenated.memory, ["follow-up", "lime"], hyphenated.vector)])
    with monkeypatch.context() as old:  # an index as format 1 built it: the tokens alone
        old.setattr(memory_index, "index_terms", list)
        store.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)  # builds the index, starts writing the files
        assert store.finish_index_files()
    store.close()
    manifest_path = index_files.index_dir(str(db)) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "format": 1}))
    caplog.set_level(logging.INFO, "memroute.store")
    store = open_store(str(db))
    assert [h.id for h in store.search_bm25(["follow"], SearchFilter(owner="o"), 5)] == ["m5000"]
    lines = rebuild_lines(caplog)
    assert len(lines) == 1 and "format" in lines[0], lines
    assert_same_answers(store, db)
    store.close()


# ------------------------------------------------------------------ the files written in the background
# 4,000 rows: their graph takes seconds to build here (~1 ms a row), a search milliseconds.
BUILDING = 4000


def files_of(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()} if root.exists() else set()


def published(root: Path) -> dict[str, Any] | None:
    path = root / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def graph_rows(root: Path) -> int:
    """The rows the published graph covers (0: no manifest, or none with a graph)."""
    manifest = published(root)
    return int(manifest["graph_rows"]) if manifest else 0


def only_published_files(root: Path) -> bool:
    manifest = published(root)
    return files_of(root) == ({*manifest["files"], "manifest.json", "lock"} if manifest else files_of(root) & {"lock"})


def test_searches_do_not_wait_for_the_graph(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db, n=BUILDING)
    root = index_files.index_dir(str(db))
    store = open_store(str(db))
    flt = SearchFilter(owner="o")
    assert store.search_vector(vec(11, 1), flt, 1)[0].id == "m11"  # starts the files and the graph
    assert not store.finish_index_files(timeout=0)  # the search did not wait for them
    assert graph_rows(root) == 0  # the data files may be published already, the graph not
    assert_same_answers(store, db)  # meanwhile: the exact scan
    assert store.finish_index_files()
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["graph_rows"] == BUILDING and store._index is not None and store._index.graph is not None
    assert (manifest["data"], manifest["generation"]) == (1, 2)  # the data files first, then the graph
    store.upsert(records(BUILDING, 3000, 2))  # past GRAPH_EXTEND_ROWS: the graph is extended in the background
    assert store.search_vector(vec(BUILDING + 7, 2), flt, 1)[0].id == f"m{BUILDING + 7}"
    assert not store.finish_index_files(timeout=0)
    assert graph_rows(root) == BUILDING
    assert_same_answers(store, db)  # meanwhile: the old graph and an exact scan of the rows newer than it
    assert store.finish_index_files()
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["graph_rows"] == BUILDING + 3000 and (manifest["data"], manifest["generation"]) == (3, 4)
    assert only_published_files(root)
    assert_same_answers(store, db)
    store.close()


EXTENSION = 30_000
"""Rows added to a store whose graph is then extended: enough that extending it outlasts the kill (3,000 were
extended within the test's second on a quiet machine)."""

WRITE_THEN_WAIT = """
    import sys, time
    store = open_store(sys.argv[1])
    store.upsert(records(int(sys.argv[2]), int(sys.argv[3]), 6))
    store.search_vector(records(0, 1, 1)[0].vector, SearchFilter(owner="o"), 3)  # starts the background write
    print(store.finish_index_files(timeout=0), flush=True)
    if sys.argv[4] == "wait":
        time.sleep(600)
"""


def started(proc: subprocess.Popen[str]) -> None:
    """Wait until ``proc`` has started its background write (it prints whether the write had ended)."""
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == "False", (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")


def test_kill_during_a_background_write_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "m.db"
    filled(db, n=BUILDING)
    root = index_files.index_dir(str(db))
    caplog.set_level(logging.INFO, "memroute.store")
    # 1. killed while building the first graph: the data files published before it are trusted
    proc = run_script(WRITE_THEN_WAIT, str(db), str(BUILDING), "10", "wait")
    started(proc)
    deadline = time.monotonic() + 60
    while published(root) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert published(root) is not None and graph_rows(root) == 0
    store = open_store(str(db))
    assert store.count() == BUILDING + 10
    assert store.search_vector(records(BUILDING + 3, 1, 6)[0].vector, SearchFilter(owner="o"), 1)[0].id == \
        f"m{BUILDING + 3}"
    assert rebuild_lines(caplog) == []
    assert_same_answers(store, db)
    assert store.finish_index_files()
    assert graph_rows(root) == BUILDING + 10 and only_published_files(root)
    store.close()
    # 2. killed while extending the graph: the next open trusts the previous generation and reads the rest
    generation = published(root)["generation"]  # type: ignore[index]
    proc = run_script(WRITE_THEN_WAIT, str(db), str(BUILDING + 10), str(EXTENSION), "wait")
    started(proc)
    deadline = time.monotonic() + 60  # killed once the data files are out and the graph is being extended
    while published(root)["generation"] == generation and time.monotonic() < deadline:  # type: ignore[index]
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert graph_rows(root) == BUILDING + 10  # the old graph: its extension was cut
    caplog.clear()
    store = open_store(str(db))
    assert store.search_vector(records(BUILDING + 2000, 1, 6)[0].vector, SearchFilter(owner="o"), 1)[0].id == \
        f"m{BUILDING + 2000}"
    assert rebuild_lines(caplog) == [] and store.count() == BUILDING + 10 + EXTENSION
    assert_same_answers(store, db)
    store.close()


def test_a_process_that_exits_during_a_background_write_leaves_no_files(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db, n=BUILDING)
    proc = run_script(WRITE_THEN_WAIT, str(db), str(BUILDING), "10", "exit")
    started(proc)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    root = index_files.index_dir(str(db))
    assert graph_rows(root) == 0 and only_published_files(root)  # stopped at exit, its unpublished files removed
    store = open_store(str(db))
    assert_same_answers(store, db)
    store.close()


def test_one_writer_per_store_across_processes(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db, n=BUILDING)
    root = index_files.index_dir(str(db))
    writer = run_script(WRITE_THEN_WAIT, str(db), str(BUILDING), "10", "wait")
    try:
        started(writer)
        other = open_store(str(db))
        assert other.search_vector(vec(5, 1), SearchFilter(owner="o"), 1)[0].id == "m5"
        assert other.finish_index_files(timeout=0)  # the lock was taken: this process started no write
        assert graph_rows(root) == 0  # and the other one is still writing
        assert_same_answers(other, db)
        other.close()
    finally:
        writer.kill()
        writer.wait(30)


def test_a_snapshot_does_not_change_while_the_index_does() -> None:
    """The writer's thread reads a snapshot while searches put, delete and compact: what it writes is the index
    as it was when the snapshot was taken."""
    from memroute.stores.memory_index import MemoryIndex, RowMeta

    index = MemoryIndex(DIM)
    for row, rec in enumerate(records(0, 3000, 7), start=1):
        index.put(row, RowMeta.of(rec.memory), rec.vector, rec.tokens)
    snap = index.snapshot()
    before = (snap.ids.blob(snap.rows), snap.postings.csr(), {k: v.copy() for k, v in snap.meta.items()},
              snap.matrix.copy())
    for row, rec in enumerate(records(3000, 500, 8), start=3001):  # new rows, and rows put again
        index.put(row, RowMeta.of(rec.memory), rec.vector, rec.tokens)
    for row in range(1, 2000):  # deletes, past a quarter of the rows: the index compacts
        index.remove(row)
    assert index.rows < 3000  # it did compact
    blob, csr = snap.ids.blob(snap.rows), snap.postings.csr()
    assert blob[0] == before[0][0] and np.array_equal(blob[1], before[0][1])
    assert csr[0] == before[1][0] and all(np.array_equal(a, b) for a, b in zip(csr[1:], before[1][1:], strict=True))
    assert all(np.array_equal(snap.meta[k], v) for k, v in before[2].items())
    assert np.array_equal(snap.matrix, before[3])


def test_the_index_folder_is_the_owners_only(tmp_path: Path) -> None:
    """The files hold every memory's words and id, like the database (made 0600 by memroute)."""
    db = tmp_path / "m.db"
    filled(db)
    root = index_files.index_dir(str(db))
    root.mkdir(mode=0o755)  # as an older memroute made it
    os.chmod(root, 0o755)
    store = open_store(str(db))
    store.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)
    assert store.finish_index_files()
    store.close()
    assert root.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads the mappings from /proc/self/smaps")
def test_searches_read_the_saved_vectors_without_mapping_them(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows read through the vectors file's mapping would stay resident in the process (the kernel maps the whole
    2 MB page-cache folio a row is in: 1.9 GB after 200 recalls at 1M rows); searches read them with pread. Every
    search path that reads saved rows (the graph's candidates, the 8-bit scan and its rescoring, a filter that
    leaves few rows) answers as the table-only index does and leaves no page of the mapping resident."""
    from memroute.stores import quantized

    monkeypatch.setattr(quantized, "MIN_ROWS", 100)  # the exact search takes the 8-bit pass
    db = tmp_path / "m.db"
    store = open_store(str(db))
    # a second owner: "o" keeps two thirds, the "p" search scores its third of the rows one by one
    store.upsert([dataclasses.replace(r, memory=dataclasses.replace(r.memory, owner="p")) if i % 3 == 0 else r
                  for i, r in enumerate(records(0, 1200, 1))])
    store.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)
    assert store.finish_index_files()
    store.close()
    store = open_store(str(db))
    assert store.search_vector(vec(4, 1), SearchFilter(owner="o"), 1)[0].id == "m4"  # the graph's first pass
    assert store.search_vector(vec(4, 1), SearchFilter(owner="o"), 1, exact=True)[0].id == "m4"  # the 8-bit one
    assert store.search_vector(vec(3, 1), SearchFilter(owner="p"), 1)[0].id == "m3"  # a third of the rows
    assert_same_answers(store, db)
    resident = vectors_resident_kb(index_files.index_dir(str(db)))
    store.close()
    assert resident == [0]


def vectors_resident_kb(root: Path) -> list[int]:
    """The resident kB of each mapping of a vectors file under ``root`` in this process."""
    out, current = [], False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header line
            current = len(fields) == 6 and fields[5].startswith(str(root)) and fields[5].endswith("-vectors.f32")
        elif current and fields[0] == "Rss:":
            out.append(int(fields[1]))
    return out


def test_a_write_that_fails_at_its_very_end_still_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever fails in the writer's last steps (here: closing its lock), the write is marked done, so that
    ``finish_index_files`` and ``close`` never wait for it forever (a suite once hung there)."""
    db = tmp_path / "m.db"
    filled(db)
    real_close = os.close

    def failing_close(fd: int) -> None:
        real_close(fd)
        raise OSError(9, "Bad file descriptor")

    raised: list[Any] = []
    monkeypatch.setattr(index_files.os, "close", failing_close)
    monkeypatch.setattr(threading, "excepthook", raised.append)  # the thread's error, reported as Python does
    store = open_store(str(db))
    store.search_vector(vec(0, 1), SearchFilter(owner="o"), 5)  # builds the index, starts writing the files
    writer = store._writer
    assert writer is not None and writer.wait(120)
    writer._thread.join(10)
    monkeypatch.undo()
    assert [type(r.exc_value) for r in raised] == [OSError]
    assert store.finish_index_files(timeout=10)
    assert store.search_vector(vec(5, 1), SearchFilter(owner="o"), 1)[0].id == "m5"
    store.close()
