"""faiss HNSW (SQ8) against usearch HNSW (i8) as the first pass of the SQLite store's vector search.

`python benchmarks/bench_ann.py {usearch|faiss} N VECTORS.npy WORKDIR [CANDIDATES]` (one library per process,
so the open time is its own). VECTORS.npy: real use-m3 vectors of distinct texts (docs/benchmarks.md "SQLite
at scale" says how they were made); rows past the real ones are noisy copies (sigma 0.02). 200 real vectors
are held out as queries; the graph's CANDIDATES nearest (default 100) are rescored exactly from float32 and
recall@10 is counted against an exact scan. Builds use one thread (expansion 80, 16 / 32 links).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt
from usearch.index import Index

faiss.omp_set_num_threads(1)


def base_vectors(real: npt.NDArray[np.float32], keep: npt.NDArray[np.int64], n: int, path: Path) -> Any:
    if not path.exists():
        rng = np.random.default_rng(7)
        out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, real.shape[1]))
        rows = real[keep]
        for start in range(0, n, 65_536):
            stop = min(n, start + 65_536)
            src = np.asarray(rows[np.arange(start, stop) % len(rows)])
            noisy = np.arange(start, stop) >= len(rows)
            src[noisy] += rng.normal(0, 0.02, size=src[noisy].shape).astype(np.float32)
            out[start:stop] = src / np.linalg.norm(src, axis=1, keepdims=True)
        out.flush()
        del out
    return np.load(path, mmap_mode="r")


def build(lib: str, base: Any, path: Path) -> float:
    t0 = time.perf_counter()
    n, dim = base.shape
    if lib == "faiss":
        fidx = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, 32,  # type: ignore[arg-type]
                                 faiss.METRIC_INNER_PRODUCT)
        fidx.hnsw.efConstruction = 80
        fidx.train(np.ascontiguousarray(base[: min(n, 100_000)]))
        for s in range(0, n, 65_536):
            fidx.add(np.ascontiguousarray(base[s : s + 65_536]))
        faiss.write_index(fidx, str(path))
    else:
        uidx = Index(ndim=dim, metric="ip", dtype="i8", connectivity=16, expansion_add=80)
        for s in range(0, n, 65_536):
            uidx.add(np.arange(s, min(n, s + 65_536)), np.ascontiguousarray(base[s : s + 65_536]), threads=1)
        uidx.save(str(path))
    return time.perf_counter() - t0


def main(lib: str, n: int, vectors: Path, workdir: Path, cand: int) -> dict[str, Any]:
    real = np.load(vectors, mmap_mode="r")
    qidx = np.random.default_rng(7).choice(len(real), 200, replace=False)
    queries = np.ascontiguousarray(real[qidx])
    base = base_vectors(real, np.setdiff1d(np.arange(len(real)), qidx), n, workdir / f"base-{n}.npy")
    truth_path = workdir / f"truth-{n}.npy"
    if not truth_path.exists():
        np.save(truth_path, faiss.knn(queries, np.ascontiguousarray(base), 10, metric=faiss.METRIC_INNER_PRODUCT)[1])
    truth = np.load(truth_path)
    path = workdir / f"{lib}-{n}.idx"
    build_s = None if path.exists() else round(build(lib, base, path), 1)
    t0 = time.perf_counter()
    index: Any = (faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC) if lib == "faiss"
                  else Index.restore(str(path), view=True))
    open_s = time.perf_counter() - t0
    by_ef = {}
    for ef in (64, 128, 256):
        if lib == "faiss":
            index.hnsw.efSearch = ef
        else:
            index.expansion_search = ef
        ms, found = [], 0
        for q, tr in zip(queries, truth, strict=True):
            t = time.perf_counter()
            if lib == "faiss":
                ids = index.search(q[None], cand)[1][0]
                ids = ids[ids >= 0]
            else:
                ids = index.search(q, cand, threads=1).keys.astype(np.int64)
            ids = np.sort(ids)
            top = ids[np.argsort(-(base[ids] @ q))[:10]]
            ms.append((time.perf_counter() - t) * 1000)
            found += len(set(top.tolist()) & set(tr.tolist()))
        by_ef[ef] = {"recall@10": round(found / 2000, 4), "p50_ms": round(float(np.percentile(ms, 50)), 2),
                     "p95_ms": round(float(np.percentile(ms, 95)), 2)}
    return {"lib": lib, "n": n, "candidates": cand, "build_s": build_s, "open_s": round(open_s, 3),
            "file_mb": round(os.path.getsize(path) / 2**20), "by_ef_search": by_ef,
            "load_average": [round(x, 2) for x in os.getloadavg()]}


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(main(args[0], int(args[1]), Path(args[2]), Path(args[3]), int(args[4]) if len(args) > 4 else 100)))
