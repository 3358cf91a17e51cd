"""Process-wide thread policy for the numeric libraries memroute runs on.

memroute's numeric work is many small operations (one query embedding, one matrix-vector product), each
of which a second BLAS or OpenMP thread does not speed up, while idle BLAS threads spinning for work steal
the CPU from the next operation. Measured on this project's 2-core machines: one query embedding took
2 ms with one BLAS thread and 136 ms with OpenBLAS's default two after a matrix-vector product, and faiss's
search was 9.6 ms with one OpenMP thread and 48 ms with two. Concurrent requests still use every core.

``MEMROUTE_BLAS_THREADS`` (default 1) sets the limit; ``0`` leaves the libraries' own defaults alone (for
a host application that needs multi-threaded BLAS for its own work).
"""

from __future__ import annotations

import os
import threading

_done = False
_lock = threading.Lock()
_here = threading.local()


def _limit() -> int:
    return int(os.environ.get("MEMROUTE_BLAS_THREADS", "1"))


def limit_threads() -> None:
    """Apply the thread policy once per process (called when embedders and search indexes load)."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
        limit = _limit()
        if limit <= 0:
            return
        from threadpoolctl import ThreadpoolController

        ThreadpoolController().limit(limits=limit, user_api="blas")
    limit_openmp_here()


def limit_openmp_here() -> None:
    """Apply the OpenMP limit on the calling thread, once per thread (cheap to call before every search).

    OpenMP's thread count is a per-thread setting: :func:`limit_threads` sets it on the thread that loads
    the index, and every other thread (a service's request threads) keeps the runtime's default of one
    thread per core. Measured 2026-11-26: faiss on a worker thread reported two threads after
    ``limit_threads()`` had set one on the main thread."""
    if getattr(_here, "done", False):
        return
    _here.done = True
    limit = _limit()
    if limit <= 0:
        return
    try:
        import faiss
    except ImportError:  # pragma: no cover - a core dependency
        return
    faiss.omp_set_num_threads(limit)
