"""`memroute bench store`: ingest throughput and BM25 / vector / time-range search latency.

The store is a new SQLite file per size, or the ``--store`` URL given (emptied of the benchmark's owner
first). Ingest goes through the whole write path (language detection, tokenisation, embedding with the default
model without its cache, one SQLite transaction per batch of 256). The memories are real utterances
(:mod:`memroute.eval.corpus`) when the data folder is there, else template sentences; queries are 200
further utterances of the same mix that are not in the store. Searches run on one owner holding every
memory, the hardest case for the filters; the vector search time excludes embedding the query (reported
apart). Memory dates are spread over two years.
"""

from __future__ import annotations

import gc
import random
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memroute.cli.common import emit_json
from memroute.embed import get_embedder
from memroute.eval.corpus import real_texts
from memroute.eval.synthetic import synthetic_memories, synthetic_queries
from memroute.memory import Memory
from memroute.text import tokenize


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    arr = np.asarray(samples_ms)
    return {"p50": round(float(np.percentile(arr, 50)), 3), "p95": round(float(np.percentile(arr, 95)), 3)}


def _corpus(n: int, queries: int) -> tuple[list[dict[str, Any]], list[str], str]:
    texts, source = real_texts(n + queries)
    if not texts:
        items = list(synthetic_memories(n))
        return items, synthetic_queries(queries), f"template sentences ({source})"
    items = [{**syn, "text": text} for syn, text in zip(synthetic_memories(n), texts[:n], strict=False)]
    return items, texts[n:], source


def bench_one(n: int, queries: int, workdir: Path, store_url: str | None = None) -> dict[str, Any]:
    items, texts, source = _corpus(n, queries)
    url = store_url or f"sqlite:///{workdir / f'bench-{n}.db'}"
    mem = Memory.open(url, owner="owner-0", embedder=get_embedder().inner)
    mem.forget(everything=True)  # a given store is reused from one size to the next
    t0 = time.perf_counter()
    report = mem.remember_many(items, batch_size=256)
    ingest_s = time.perf_counter() - t0
    flt = mem.filter()
    store = mem.store
    qvecs = mem.embedder.embed(texts, side="query")
    store.search_vector(qvecs[0], flt, 10)  # first search loads the in-memory index
    rng = random.Random(5)
    bm25, vector, timed, embed = [], [], [], []
    for text, vec in zip(texts, qvecs, strict=True):
        tokens = tokenize(text)
        t = time.perf_counter()
        store.search_bm25(tokens, flt, 10)
        bm25.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        store.search_vector(vec, flt, 10)
        vector.append((time.perf_counter() - t) * 1000)
        start = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(700))
        tflt = mem.filter(start=start, end=start + timedelta(days=7))
        t = time.perf_counter()
        store.search_time(tflt, 10)
        timed.append((time.perf_counter() - t) * 1000)
    for text in texts[:50]:
        t = time.perf_counter()
        mem.embedder.embed([text], side="query")
        embed.append((time.perf_counter() - t) * 1000)
    gc.collect()
    hybrid = []
    for text in texts[:100]:
        t = time.perf_counter()
        mem.search(text, mode="hybrid", limit=10)
        hybrid.append((time.perf_counter() - t) * 1000)
    backend = mem.store.url.split(":", 1)[0]
    mem.close()
    return {"memories": report.stored, "backend": backend, "corpus": source,
            "hybrid_search_ms": percentiles(hybrid), "ingest_per_s": round(report.stored / ingest_s, 1),
            "bm25_ms": percentiles(bm25), "vector_ms": percentiles(vector), "time_range_ms": percentiles(timed),
            "query_embed_ms": percentiles(embed),
            "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def describe(r: dict[str, Any]) -> str:
    def ms(key: str) -> str:
        return f"p50 {r[key]['p50']} p95 {r[key]['p95']} ms"

    return (f"{r['backend']} {r['memories']:>8} memories: ingest {r['ingest_per_s']}/s; BM25 {ms('bm25_ms')}; "
            f"vector {ms('vector_ms')}; hybrid (embed + both + fuse + load) {ms('hybrid_search_ms')}; "
            f"time-range {ms('time_range_ms')}; query embedding {ms('query_embed_ms')}; max RSS {r['max_rss_mb']} MB"
            f"\n          corpus: {r['corpus']}")


def run_store_bench(sizes: list[int], queries: int, as_json: bool = False, store_url: str | None = None) -> int:
    results = []
    with tempfile.TemporaryDirectory(prefix="memroute-bench-") as tmp:
        for n in sizes:
            results.append(bench_one(n, queries, Path(tmp), store_url))
            if not as_json:
                print(describe(results[-1]), flush=True)
    command = "memroute bench store --memories " + " ".join(str(n) for n in sizes)
    if store_url:
        command += " --store " + ("postgresql://..." if store_url.startswith("postgres") else store_url)
    if as_json:
        emit_json({"command": command, "results": results})
    else:
        print(f"reproduce: {command}")
    return 0
