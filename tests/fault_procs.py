"""Processes the fault tests start, kill or starve: ``python -m tests.fault_procs COMMAND ARGS...``.

- ``remember URL OWNER N``: N memories through the Python API, one ``remember`` each.
- ``import-exit-after-commit URL FILE BATCH N``: ``memroute import`` of FILE that exits (as ``kill -9`` would: no
  clean-up, no Python exit handlers) at the first SQL statement after its N-th committed transaction.
- ``full-disk URL LIMIT``: under ``RLIMIT_FSIZE`` = LIMIT bytes (``SIGXFSZ`` ignored, so a write past it fails
  with EFBIG as on a full disk), remember a batch too large to fit; prints a JSON report of what happened.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path


def remember(url: str, owner: str, n: int) -> None:
    from memroute import Memory

    with Memory.open(url, owner=owner) as mem:
        for i in range(n):
            mem.remember(f"{owner} wrote note number {i}", id=f"{owner}-{i}")


def import_exit_after_commit(url: str, file: str, batch: int, commits: int) -> None:
    from memroute import Memory
    from memroute.importing import import_jsonl
    from memroute.stores.sqlite import SQLiteStore

    mem = Memory.open(url, owner="u")
    assert isinstance(mem.store, SQLiteStore)
    seen = 0

    def trace(statement: str) -> None:
        nonlocal seen
        if statement.strip().upper() == "COMMIT":
            seen += 1
        elif seen >= commits:
            os._exit(137)  # the commit is on disk; whatever the import does next never happens

    mem.store._conn.set_trace_callback(trace)
    import_jsonl(mem, Path(file), batch_size=batch)
    sys.exit(3)  # never reached when the file has more batches than ``commits``


def full_disk(url: str, limit: int) -> None:
    from memroute import Memory
    from memroute.errors import MemrouteError

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    with Memory.open(url, owner="u") as mem:
        before = mem.stats().memories
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        # the vectors (2 KB each) and the metadata fill the file; the texts stay short, embedding is the slow part
        items = [{"text": f"memory {i} of the batch that cannot fit", "metadata": {"pad": "x" * 4000}}
                 for i in range(limit // 4000 + 50)]
        report: dict[str, object] = {"before": before}
        try:
            mem.remember_many(items, batch_size=len(items))
            report["error"] = None
        except MemrouteError as exc:
            report.update(error=type(exc).__name__, message=str(exc), memroute_error=True)
        except Exception as exc:  # what the test must never see
            report.update(error=type(exc).__name__, message=str(exc), memroute_error=False)
        mem.store.close()  # a file over the limit cannot even be checkpointed here
    with Memory.open(url, owner="u") as mem:  # the same process, a new connection: writes that fit still work
        report["after_in_process"] = mem.stats().memories
        try:
            mem.remember("a small memory after the failed batch")
            report["small_write"] = "ok"
        except MemrouteError as exc:
            report["small_write"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "remember":
        remember(args[0], args[1], int(args[2]))
    elif command == "import-exit-after-commit":
        import_exit_after_commit(args[0], args[1], int(args[2]), int(args[3]))
    elif command == "full-disk":
        full_disk(args[0], int(args[1]))
    else:
        raise SystemExit(f"unknown command {command}")
