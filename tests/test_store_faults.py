"""The store under faults, with real processes on a real SQLite file (and PostgreSQL for the tenants test):
many writers at once, ``kill -9`` of an import at random points, a full disk, and one owner's hostile rows.

The subprocesses are in :mod:`tests.fault_procs`; each test takes a few tens of seconds on two busy cores.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memroute import Memory
from memroute.embed import CachedEmbedder
from memroute.errors import InputError
from memroute.importing import NAMESPACE, file_sha256
from memroute.times import EARLIEST, LATEST

ROOT = Path(__file__).parents[1]
MEMROUTE = str(Path(sys.executable).parent / "memroute")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT)}


def _integrity(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def _count(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])


def _fault_proc(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.fault_procs", *args], cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_many_processes_write_one_file(tmp_path: Path, embedder: CachedEmbedder) -> None:
    db = tmp_path / "m.db"
    url = f"sqlite:///{db}"
    Memory.open(url, owner="setup", embedder=embedder).close()
    writers = [_fault_proc("remember", url, f"w{k}", "100") for k in range(4)]
    writers += [subprocess.Popen([MEMROUTE, "remember", f"cli process {k} was here", "--store", url, "--owner",
                                  "cli", "--id", f"cli-{k}"], env=ENV, text=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for k in range(2)]
    for proc in writers:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert _integrity(db) == "ok"
    with Memory.open(url, owner="w0", embedder=embedder) as mem:
        assert mem.stats().memories == 402
        for k in range(4):
            mine = mem.list(owner=f"w{k}", limit=1000)
            assert sorted(m.id for m in mine) == sorted(f"w{k}-{i}" for i in range(100))
        assert {m.id for m in mem.list(owner="cli")} == {"cli-0", "cli-1"}
        hits = mem.search("w3 wrote note number 42", owner="w3", mode="bm25", limit=1)
        assert hits[0].memory.id == "w3-42"  # every process's writes are in this process's index


def test_import_killed_at_random_points_stores_every_line_once(tmp_path: Path, embedder: CachedEmbedder) -> None:
    db = tmp_path / "m.db"
    url = f"sqlite:///{db}"
    f = tmp_path / "history.jsonl"
    lines = 2000
    f.write_text("".join(json.dumps({"text": f"line {i}: a note about subject {i % 37} and detail {i * 13}"}) + "\n"
                         for i in range(lines)))  # no ids: a line stored twice would be two rows
    key = f"sha256:{file_sha256(f)}"
    Memory.open(url, owner="u", embedder=embedder).close()
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    command = [MEMROUTE, "import", str(f), "--store", url, "--owner", "u", "--batch-size", "50", "--json"]
    saved_lines = [1]
    for kill in range(3):
        before = _count(db)
        proc = subprocess.Popen(command, env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while _count(db) == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.6))  # somewhere in the next batches: embedding, inside a transaction, ...
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, f"run {kill} ended by itself (seed {seed})"
        assert _integrity(db) == "ok"
        with Memory.open(url, owner="u", embedder=embedder) as mem:
            state = mem.store.get_state(NAMESPACE, key, "u")
        assert state is not None and not state["done"], f"seed {seed}"
        # the resume point is exactly what was written: every stored row is a line before it
        assert _count(db) == state["stored"] == state["next_line"] - 1, f"seed {seed}"
        assert state["next_line"] > saved_lines[-1], f"seed {seed}"
        saved_lines.append(state["next_line"])
    proc = subprocess.run(command, env=ENV, text=True, capture_output=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["resumed_at_line"] == saved_lines[-1]
    assert result["stored"] == lines - (saved_lines[-1] - 1)
    assert _integrity(db) == "ok"
    with Memory.open(url, owner="u", embedder=embedder) as mem:
        texts = [m.text for m in mem.list(limit=lines + 10)]
    assert len(texts) == len(set(texts)) == lines, f"seed {seed}"


def test_full_disk_is_a_store_error_and_writes_nothing(tmp_path: Path, embedder: CachedEmbedder) -> None:
    db = tmp_path / "m.db"
    url = f"sqlite:///{db}"
    with Memory.open(url, owner="u", embedder=embedder) as mem:
        for i in range(5):
            mem.remember(f"kept memory {i}")
    # a batch of ~1 MB into a file that may not grow past 400 kB (EFBIG, as a full disk gives ENOSPC)
    proc = _fault_proc("full-disk", url, "400000")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["memroute_error"] and report["error"] == "StoreError", report
    assert "disk may be full" in report["message"] and "nothing of this write was stored" in report["message"]
    assert report["before"] == report["after_in_process"] == 5  # nothing of the failed batch
    assert report["small_write"] == "ok"  # the store works for what fits
    assert _integrity(db) == "ok"
    with Memory.open(url, owner="u", embedder=embedder) as mem:  # opens again, without the limit
        assert mem.stats().memories == 6
        assert mem.search("kept memory 3", mode="bm25", limit=1)[0].memory.text == "kept memory 3"


# ------------------------------------------------------------------------------------- hostile tenants

_ODD = ["\u202eevil right-to-left override\u202c", "👩\u200d👩\u200d👧\u200d👦 family", "e\u0301" * 500,
        "\ufeffbom \uffff nonchar \U0010ffff last plane", "ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ", "\u1100\u1161\u11a8 jamo",
        "zero\u200bwidth\u200bspaces", "tab\tnew\nline\rreturn", "‮" + "ㅋ" * 2000]


def _hostile(mem: Memory) -> int:
    """Mallory's rows: times at the accepted range's edges, huge and deep metadata, odd unicode, long texts,
    and the very ids Alice uses. Each is either accepted or refused with an ``InputError``; returns how many
    were accepted."""
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100):
        node["d"] = {}
        node = node["d"]
    attempts: list[dict[str, Any]] = [
        {"text": "at the first instant", "occurred_at": EARLIEST, "created_at": EARLIEST},
        {"text": "at the last instant", "occurred_at": LATEST, "expires_at": LATEST},
        {"text": "last instant as text", "occurred_at": "8899-12-31T23:59:59.999999Z"},
        {"text": "first instant as text", "occurred_at": "1100-01-01T00:00:00Z", "expires_at": "1100-01-01T00:00:01Z"},
        {"text": "huge metadata", "metadata": {"blob": "m" * 500_000, **{f"k{i}": i for i in range(5000)}}},
        {"text": "deep metadata", "metadata": deep},
        {"text": "budget " * 20_000, "id": "a-budget"},  # Alice's id and her words, many times over
        {"text": " ".join(f"tok{i}" for i in range(20_000)), "id": "a-trip"},
        *({"text": t, "session": t[:50], "id": t[:200]} for t in _ODD),
    ]
    accepted = 0
    for fields in attempts:
        try:
            mem.remember_many([fields], owner="mallory")
            accepted += 1
        except InputError:
            pass
    return accepted


def _answers(mem: Memory) -> tuple[list[Any], list[float]]:
    """Everything Alice sees: search in each mode (ids in order), a time-ranged list, and recall (ids, relevance,
    the pack); and, apart, the vector search's cosine scores, which depend on her rows only but are compared within
    float32 rounding: with few of the index's rows hers, her rows are scored by numpy's product instead of faiss's
    scan of the whole matrix, and the two kernels sum in different orders (one unit in the last place; a score at
    a rounding boundary flips its sixth decimal). BM25 scores are left out: its collection statistics (N, document
    frequencies) cover every owner by design, as in FTS5 and Lucene."""
    out: list[Any] = []
    cosines: list[float] = []
    for query in ("budget review", "trip to Osaka", "予算の会議"):
        for mode in ("bm25", "vector", "hybrid"):
            hits = mem.search(query, mode=mode, owner="alice", limit=5)
            out.append([h.memory.id for h in hits])
            if mode == "vector":
                cosines.extend(h.scores["vector"] for h in hits)
        recall = mem.recall(query, owner="alice", now="2026-06-10T12:00:00Z")
        out.append([(m.memory.id, m.relevance) for m in recall.memories])
        out.append(recall.memory_pack())
    out.append([m.id for m in mem.list(owner="alice", start=EARLIEST, end=LATEST)])
    return out, cosines


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_hostile_rows_never_change_another_owners_answers(backend: str, request: pytest.FixtureRequest,
                                                          tmp_path: Path, embedder: CachedEmbedder) -> None:
    url = (request.getfixturevalue("pg_server").new_database() if backend == "postgres"
           else f"sqlite:///{tmp_path / 'm.db'}")
    alice = [("a-budget", "The budget review moved to Friday", "2026-06-01T09:00:00Z"),
             ("a-trip", "Booked the trip to Osaka for July", "2026-06-03T18:00:00Z"),
             ("a-ja", "予算の会議は金曜日に変更になった", "2026-06-05T10:00:00Z"),
             ("a-old", "The old budget was approved last year", "2025-06-01T10:00:00Z")]
    with Memory.open(url, owner="alice", embedder=embedder) as mem:
        for mid, text, at in alice:
            mem.remember(text, id=mid, occurred_at=at)
        before, cosines = _answers(mem)
        assert before[0][0] == "a-budget" and len(cosines) == 12  # the answers are about something
        assert _hostile(mem) >= 4  # at least the edges of the accepted time range are accepted
        after, cosines_after = _answers(mem)
        assert after == before
        assert cosines_after == pytest.approx(cosines, rel=0, abs=1e-6)
        assert mem.get("a-budget").text == alice[0][1] and mem.get("a-trip").text == alice[1][1]
        # Mallory's own reads work on her rows too
        mem.search("budget", owner="mallory")
        mem.recall("what happened at the last instant", owner="mallory", now=LATEST)
        assert len(mem.list(owner="mallory", start=EARLIEST, end=LATEST, limit=100)) >= 4
    with Memory.open(url, owner="alice", embedder=embedder) as mem:  # a new process's index, read from the store
        after, cosines_after = _answers(mem)
        assert after == before
        assert cosines_after == pytest.approx(cosines, rel=0, abs=1e-6)
