"""`memroute bench recall`: latency of a full recall without LLM at 10k, 100k and 1M memories.

A full recall is what ``Memory.recall`` does per turn: analysis, query embedding (use-m3), vector and
BM25 search (exact: numpy brute force and the in-memory BM25 index), fusion, dedupe, decay, the local
reranker, the decision and the memory pack. One owner holds every memory (the hardest case for the
filters); queries are 200 further texts of the same mix, not in the store, asked with no history.

How the memories are made:
- Texts: real utterances (SGD en, RealPersonaChat ja, kochat ko; 50 / 25 / 25) via
  :mod:`memroute.eval.corpus` when the data folder is there, else template sentences; dates spread over
  two years, 200 sessions.
- The first ``pool`` memories (default 20,000, or all of N if smaller) go through the whole write path
  (``remember_many``: language, tokens, embedding, SQLite): that is the ingest rate reported.
- Beyond the pool (100k, 1M), memory i reuses pool text ``i % pool`` and its tokens, with the pool
  vector plus Gaussian noise (sigma 0.02 per dimension: cosine ~0.9 to its source, so neighbourhoods stay
  realistic and no two vectors are equal), stored by :func:`memroute.eval.store_bench.bulk_copies`, the
  same copies as ``memroute bench store --pool`` (``upsert`` in batches on SQLite). Embedding 1M texts
  would take ~13 minutes of both cores and measure the encoder, not the recall.
The store is then measured in a new process, as a CLI command or a worker start would use it: "open" is
``Memory.open`` plus the first recall (which loads the index: from the index files next to the database
past 50k memories, :mod:`memroute.stores.index_files`), RSS is that process's peak resident memory
(``ru_maxrss``) after the recalls (before the exact searches of the recall@10 check, which read every
row), and the vector search's recall@10 is its default search against its exact one on the same queries
(from 100k memories the default is an approximate graph rescored exactly).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memroute.cli.common import emit_json
from memroute.embed import get_embedder
from memroute.eval.corpus import real_texts
from memroute.eval.store_bench import bulk_copies
from memroute.eval.synthetic import synthetic_memories, synthetic_queries
from memroute.memory import Memory
from memroute.retrieval import RecallOptions

NOW = datetime(2027, 1, 2, tzinfo=UTC)


def _percentiles(samples: list[float]) -> dict[str, float]:
    arr = np.asarray(samples)
    return {"p50": round(float(np.percentile(arr, 50)), 2), "p95": round(float(np.percentile(arr, 95)), 2)}


def bench_recall(n: int, queries: int = 200, pool: int = 20_000, workdir: Path | None = None) -> dict[str, Any]:
    """Fill a store of ``n`` memories here, then measure it in a new process (:func:`measure`)."""
    pool = min(pool, n)
    texts, source = real_texts(pool + queries)
    items = list(synthetic_memories(pool))
    if texts:
        items = [{**it, "text": t} for it, t in zip(items, texts[:pool], strict=True)]
        asks = texts[pool:]
    else:
        source, asks = "template sentences (no data folder)", synthetic_queries(queries)
    tmp = tempfile.TemporaryDirectory(prefix="memroute-bench-recall-") if workdir is None else None
    root = Path(tmp.name) if tmp is not None else Path(workdir or ".")
    db = root / f"recall-{n}.db"
    # the uncached model: a process-wide cache would serve a larger run's pool and queries from memory
    mem = Memory.open(f"sqlite:///{db}", owner="owner-0", embedder=get_embedder().inner)
    try:
        t0 = time.perf_counter()
        mem.remember_many(items, batch_size=256)
        ingest_s = time.perf_counter() - t0
        bulk_s = bulk_copies(mem, [it["id"] for it in items], n)["seconds"] if n > pool else 0.0
        t0 = time.perf_counter()
        mem.recall("warm-up: build the index", now=NOW)  # reads every row; writes the index files if large
        build_s = time.perf_counter() - t0
    finally:
        mem.close()
    try:
        asks_file = root / f"asks-{n}.json"
        asks_file.write_text(json.dumps(asks, ensure_ascii=False), encoding="utf-8")
        child = subprocess.run([sys.executable, "-m", "memroute.eval.recall_bench", str(db), str(asks_file)],
                               capture_output=True, text=True, check=False)
        if child.returncode != 0:
            raise RuntimeError(f"the measuring process failed: {child.stderr[-2000:]}")
        measured = json.loads(child.stdout)
    finally:
        if tmp is not None:
            tmp.cleanup()
    gc.collect()
    return {**measured, "corpus": source, "pool_embedded": pool, "ingest_per_s": round(pool / ingest_s, 1),
            "bulk_load_s": round(bulk_s, 1), "index_build_s": round(build_s, 1)}


def measure(db: Path, asks: list[str]) -> dict[str, Any]:
    """Open the store in this (new) process and time its first recall (open), then every ask; RSS is this
    process's peak; vector recall@10 compares the store's default search with its exact one."""
    embedder = get_embedder().inner
    embedder.embed(["load the model first"], side="query")
    t0 = time.perf_counter()
    mem = Memory.open(f"sqlite:///{db}", owner="owner-0", embedder=embedder)
    mem.recall("first recall: load the index", now=NOW)
    open_s = time.perf_counter() - t0
    try:
        totals: list[float] = []
        stages: dict[str, list[float]] = {}
        empty = 0
        for q in asks:
            t = time.perf_counter()
            r = mem.recall(q, now=NOW)
            r.memory_pack()
            totals.append((time.perf_counter() - t) * 1000)
            empty += not r.memories
            for k, v in r.trace.stages_ms.items():
                stages.setdefault(k, []).append(v)
        # The bad-input case of the issue: an owner with N memories and a filter that matches none.
        no_match: list[float] = []
        for q in asks[:20]:
            t = time.perf_counter()
            r = mem.recall(q, now=NOW, options=RecallOptions(session="no-such-session"))
            no_match.append((time.perf_counter() - t) * 1000)
            if r.memories or not r.trace.notes:
                raise RuntimeError("a filter that matches nothing must give an empty answer that says why")
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # serving, before the exact scans
        vectors = _vector_recall(mem, asks)
        count = mem.store.count()
    finally:
        mem.close()
    return {"memories": count, "open_s": round(open_s, 2), "recall_ms": _percentiles(totals),
            "stages_ms": {k: _percentiles(v) for k, v in stages.items()}, "empty_answers": empty,
            "no_match_filter_ms": _percentiles(no_match), "vector": vectors, "queries": len(asks),
            "max_rss_mb": round(rss_mb, 1), "load_average": [round(x, 2) for x in os.getloadavg()]}


def _vector_recall(mem: Memory, asks: list[str]) -> dict[str, Any]:
    """recall@10 of the store's default vector search (a graph's first pass past its size) against exact."""
    store, flt = mem.store, mem.filter()
    qvecs = mem.embedder.embed(asks, side="query")
    found, fast, slow = 0, [], []
    for vec in qvecs:
        t = time.perf_counter()
        got = store.search_vector(vec, flt, 10)
        fast.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        truth = store.search_vector(vec, flt, 10, exact=True)  # type: ignore[call-arg]
        slow.append((time.perf_counter() - t) * 1000)
        found += len({h.id for h in got} & {h.id for h in truth})
    return {"recall@10": round(found / (10 * len(asks)), 4), "default_ms": _percentiles(fast),
            "exact_ms": _percentiles(slow)}


def run_recall_bench(sizes: list[int], queries: int = 200, as_json: bool = False) -> int:
    results = []
    for n in sizes:
        r = bench_recall(n, queries)
        results.append(r)
        if not as_json:
            s = r["stages_ms"]
            print(f"{r['memories']:>8} memories: recall p50 {r['recall_ms']['p50']} ms, p95 {r['recall_ms']['p95']} ms "
                  f"(embed p95 {s.get('embed', {}).get('p95')}, search p95 {s.get('search', {}).get('p95')}, "
                  f"rerank p95 {s.get('rerank', {}).get('p95')}); ingest {r['ingest_per_s']}/s over "
                  f"{r['pool_embedded']}, bulk {r['bulk_load_s']} s, index build {r['index_build_s']} s; "
                  f"open (new process, to the first recall) {r['open_s']} s; "
                  f"a filter matching none p95 {r['no_match_filter_ms']['p95']} ms; max RSS {r['max_rss_mb']} MB; "
                  f"vector search recall@10 against exact {r['vector']['recall@10']} (p95 "
                  f"{r['vector']['default_ms']['p95']} ms, exact {r['vector']['exact_ms']['p95']} ms); "
                  f"load average {r['load_average']}\n          corpus: {r['corpus']}", flush=True)
    command = "memroute bench recall --memories " + " ".join(str(n) for n in sizes)
    if as_json:
        emit_json({"command": command, "results": results})
    else:
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":  # the measuring process of bench_recall
    print(json.dumps(measure(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text(encoding="utf-8")))))
