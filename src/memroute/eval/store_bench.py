"""`memroute bench store`: ingest throughput and BM25 / vector / time-range search latency.

Ingest goes through the whole write path (language detection, tokenisation, embedding with the default
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


def bench_one(n: int, queries: int, workdir: Path) -> dict[str, Any]:
    items, texts, source = _corpus(n, queries)
    mem = Memory.open(f"sqlite:///{workdir / f'bench-{n}.db'}", owner="owner-0", embedder=get_embedder().inner)
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
    mem.close()
    gc.collect()
    return {"memories": report.stored, "corpus": source, "ingest_per_s": round(report.stored / ingest_s, 1),
            "bm25_ms": percentiles(bm25), "vector_ms": percentiles(vector), "time_range_ms": percentiles(timed),
            "query_embed_ms": percentiles(embed),
            "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def run_store_bench(sizes: list[int], queries: int, as_json: bool = False) -> int:
    results = []
    with tempfile.TemporaryDirectory(prefix="memroute-bench-") as tmp:
        for n in sizes:
            results.append(bench_one(n, queries, Path(tmp)))
            if not as_json:
                r = results[-1]
                print(f"{r['memories']:>8} memories: ingest {r['ingest_per_s']}/s; BM25 p50 {r['bm25_ms']['p50']} "
                      f"p95 {r['bm25_ms']['p95']} ms; vector p50 {r['vector_ms']['p50']} p95 "
                      f"{r['vector_ms']['p95']} ms; time-range p50 {r['time_range_ms']['p50']} p95 "
                      f"{r['time_range_ms']['p95']} ms; query embedding p50 {r['query_embed_ms']['p50']} ms; "
                      f"max RSS {r['max_rss_mb']} MB\n          corpus: {r['corpus']}", flush=True)
    command = "memroute bench store --memories " + " ".join(str(n) for n in sizes)
    if as_json:
        emit_json({"command": command, "results": results})
    else:
        print(f"reproduce: {command}")
    return 0
