"""`memroute bench recall`: latency of a full recall without LLM at 10k, 100k and 1M memories.

A full recall is what ``Memory.recall`` does per turn: analysis, query embedding (use-m3), vector and
BM25 search (exact: numpy brute force and the in-memory BM25 index), fusion, dedupe, decay, the local
reranker, the decision and the memory pack. One owner holds every memory (the hardest case for the
filters); queries are 200 further texts of the same mix, not in the store, asked with no history.

How the memories are made (:mod:`memroute.eval.bench_corpus`):
- Texts: every distinct text of the shared data sets (user and system turns and utterances of SGD,
  RealPersonaChat, kochat, CLINC150, JMultiWOZ-TC, MultiWOZ, Banking77; ~189k) in a seeded order, 200 held
  out as the queries; past their count, distinct combinations of two real texts of one language whose vector
  is the normalised sum of theirs (never noisy copies of a vector). The report prints the mix. Without the
  data folder: template sentences, and the report says so. Dates spread over two years, 200 sessions.
- The vectors of the distinct texts are embedded once (use-m3, passage side) and cached in a file keyed by
  model and texts (``~/.cache/memroute/bench``); the report says whether they were read or embedded.
- The first ``pool`` memories (default 20,000, or all of N if smaller) go through the whole write path
  (``remember_many``: language, tokens, embedding, SQLite): that is the ingest rate reported. The rest are
  checked by the same ``item_of``, tokenised, and written with their cached vectors by ``upsert`` in
  batches of 5,000 (embedding 1M texts would measure the encoder, not the recall).
The first recall after the fill reads every row and starts writing the index files (and the graph) in the
background; recalls go on meanwhile and are timed ("during the background write"), then the bench waits for the
write to end ("index build": from the first recall to the files on disk).
The store is then measured in a new process, as a CLI command or a worker start would use it: "open" is
``Memory.open`` plus the first recall (which loads the index: from the index files next to the database
past 50k memories, :mod:`memroute.stores.index_files`), RSS is that process's own peak resident memory
(:func:`peak_rss_mb`) after the recalls (before the exact searches of the recall@10 check, which read
every row). Vector recall@10 is measured against a brute-force float32 scan of every stored vector (read back
from the table) for the same queries: for the store's default search (from ``GRAPH_MIN_ROWS`` memories the
usearch graph's candidates rescored exactly) and for its ``exact=True`` search (from ``quantized.MIN_ROWS``
an 8-bit first pass with a proven bound, rescored exactly), the two first passes the store has.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memroute.cli.common import emit_json
from memroute.embed import get_embedder
from memroute.eval.bench_corpus import BenchCorpus, DistinctTexts, bench_corpus, corpus_vectors, distinct_texts
from memroute.eval.measure import peak_rss_mb
from memroute.eval.synthetic import synthetic_memories
from memroute.memory import Memory
from memroute.retrieval import RecallOptions
from memroute.stores import MemoryRecord, index_files, quantized
from memroute.stores.sqlite import SQLiteStore
from memroute.text import tokenize

NOW = datetime(2027, 1, 2, tzinfo=UTC)


def _percentiles(samples: list[float]) -> dict[str, float]:
    arr = np.asarray(samples)
    return {"p50": round(float(np.percentile(arr, 50)), 2), "p95": round(float(np.percentile(arr, 95)), 2)}


def bench_recall(n: int, queries: int = 200, pool: int = 20_000, workdir: Path | None = None,
                 distinct: DistinctTexts | None = None, embedder_name: str = "use-m3") -> dict[str, Any]:
    """Fill a store of ``n`` memories here, then measure it in a new process (:func:`measure`)."""
    corpus = bench_corpus(n, queries, distinct=distinct)
    # the uncached model: a process-wide cache would serve a larger run's pool and queries from memory
    embedder = get_embedder(embedder_name).inner
    pool = min(pool, n)
    tmp = tempfile.TemporaryDirectory(prefix="memroute-bench-recall-") if workdir is None else None
    root = Path(tmp.name) if tmp is not None else Path(workdir or ".")
    db = root / (f"recall-{n}.db" if embedder_name == "use-m3" else f"recall-{n}-{embedder_name}.db")
    mem = Memory.open(f"sqlite:///{db}", owner="owner-0", embedder=embedder)
    reused = workdir is not None and mem.store.count() == n  # a store of --keep DIR filled by an earlier run
    if n > pool and not reused:  # past the pool, memories are written with the distinct texts' cached vectors
        vectors, cached = corpus_vectors(embedder, corpus.distinct.texts, progress=_progress("embedding the corpus"))
    else:  # every memory goes through the write path (an encoder of ~10 ms a text cannot embed 189k texts here)
        vectors, cached = np.empty((0, embedder.dimension), np.float32), "no cached vectors (every memory embedded)"
    ingest_s = bulk_s = None
    cpu0 = time.process_time()
    try:
        if not reused:
            ingest_s, bulk_s = _fill(mem, corpus, vectors, n, pool)
        t0 = time.perf_counter()
        mem.recall("warm-up: build the index", now=NOW)  # reads every row; starts writing the index files if large
        first_s = time.perf_counter() - t0
        store = mem.store
        assert isinstance(store, SQLiteStore)
        during: list[float] = []  # recalls while the files (and the graph) are written in the background
        during_cpu: list[float] = []
        while not store.finish_index_files(timeout=0) and len(during) < len(corpus.queries):
            t, c = time.perf_counter(), time.thread_time()  # this thread's: the writer's thread works meanwhile
            mem.recall(corpus.queries[len(during)], now=NOW)
            during.append((time.perf_counter() - t) * 1000)
            during_cpu.append((time.thread_time() - c) * 1000)
        store.finish_index_files()
        build_s = time.perf_counter() - t0
    finally:
        mem.close()
    fill_cpu_s = time.process_time() - cpu0
    store_bytes = _store_bytes(db)
    try:
        asks_file = root / f"asks-{n}.json"
        asks_file.write_text(json.dumps(corpus.queries, ensure_ascii=False), encoding="utf-8")
        child = subprocess.run([sys.executable, "-m", "memroute.eval.recall_bench", str(db), str(asks_file),
                                embedder_name],
                               capture_output=True, text=True, check=False)
        if child.returncode != 0:
            raise RuntimeError(f"the measuring process failed: {child.stderr[-2000:]}")
        measured = json.loads(child.stdout)
    finally:
        if tmp is not None:
            tmp.cleanup()
    gc.collect()
    return {**measured, "corpus": corpus.describe(), "corpus_mix": corpus.mix,
            "distinct_texts": len(corpus.distinct.texts), "vectors": cached, "pool_embedded": pool,
            "reused_store": reused, "ingest_per_s": None if ingest_s is None else round(pool / ingest_s, 1),
            "bulk_load_s": None if bulk_s is None else round(bulk_s, 1),
            "index_build_s": round(build_s, 1), "first_recall_s": round(first_s, 2),
            "recall_during_build_ms": _percentiles(during) if during else None,
            "recall_during_build_cpu_ms": _percentiles(during_cpu) if during else None,
            "recalls_during_build": len(during), "fill_cpu_s": round(fill_cpu_s, 1), "embedder": embedder_name,
            "store_bytes_per_memory": round(store_bytes / n) if n else None}


def _store_bytes(db: Path) -> int:
    """The database file and its WAL (the index files beside it left out)."""
    return sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.is_file())


def _fill(mem: Memory, corpus: BenchCorpus, vectors: np.ndarray, n: int, pool: int) -> tuple[float, float]:
    """Store the ``n`` memories (see the module's docstring); the seconds of the write path and of the rest."""
    meta = synthetic_memories(n)
    items = [{**m, "text": corpus.text(i)} for i, m in zip(range(pool), meta, strict=False)]
    t0 = time.perf_counter()
    mem.remember_many(items, batch_size=256)
    ingest_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    batch: list[MemoryRecord] = []
    for i, m in zip(range(pool, n), meta, strict=False):
        item = mem.item_of({**m, "text": corpus.text(i)})[0]
        batch.append(MemoryRecord(item, tokenize(item.full_text), corpus.vector(i, vectors)))
        if len(batch) == 5000:
            mem.store.upsert(batch)
            batch = []
    mem.store.upsert(batch)
    return ingest_s, time.perf_counter() - t0


def _pair(p: dict[str, float] | None) -> str:
    return "-" if p is None else f"{p['p50']}/{p['p95']}"


def _progress(what: str) -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        print(f"  {what}: {done:,} / {total:,}", file=sys.stderr, flush=True)
    return show


def measure(db: Path, asks: list[str], embedder_name: str = "use-m3") -> dict[str, Any]:
    """Open the store in this (new) process and time its first recall (open), then every ask; RSS is this
    process's peak; vector recall@10 compares the store's default search with its exact one."""
    embedder = get_embedder(embedder_name).inner
    embedder.embed(["load the model first"], side="query")
    t0 = time.perf_counter()
    mem = Memory.open(f"sqlite:///{db}", owner="owner-0", embedder=embedder)
    mem.recall("first recall: load the index", now=NOW)
    open_s = time.perf_counter() - t0
    try:
        totals: list[float] = []
        cpu: list[float] = []
        stages: dict[str, list[float]] = {}
        empty = 0
        for q in asks:
            t, c = time.perf_counter(), time.process_time()
            r = mem.recall(q, now=NOW)
            r.memory_pack()
            totals.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
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
        rss_mb = peak_rss_mb()  # serving, before the exact scans
        vectors = _vector_recall(mem, db, asks)
        count = mem.store.count()
    finally:
        mem.close()
    return {"memories": count, "open_s": round(open_s, 2), "recall_ms": _percentiles(totals),
            "recall_cpu_ms": _percentiles(cpu),
            "stages_ms": {k: _percentiles(v) for k, v in stages.items()}, "empty_answers": empty,
            "no_match_filter_ms": _percentiles(no_match), "vector": vectors, "queries": len(asks),
            "max_rss_mb": round(rss_mb, 1), "load_average": [round(x, 2) for x in os.getloadavg()]}


def _vector_recall(mem: Memory, db: Path, asks: list[str]) -> dict[str, Any]:
    """recall@10 of the store's default search (the graph's first pass past its size) and of its exact
    search (the 8-bit first pass past its size) against a brute-force float32 scan of every stored vector. The
    graph is named if its file is beside the database (the index files of ``db``)."""
    store, flt = mem.store, mem.filter()
    qvecs = mem.embedder.embed(asks, side="query")
    truth = _brute_force(mem, qvecs, 10)
    out: dict[str, Any] = {}
    for name, exact in (("default", False), ("exact", True)):
        found, ms = 0, []
        for vec, want in zip(qvecs, truth, strict=True):
            t = time.perf_counter()
            got = store.search_vector(vec, flt, 10, exact=exact)  # type: ignore[call-arg]
            ms.append((time.perf_counter() - t) * 1000)
            found += len({h.id for h in got} & want)
        out[name] = {"recall@10": round(found / (10 * len(asks)), 4), "ms": _percentiles(ms)}
    n = store.count()
    graphs = sorted(p.name for p in index_files.index_dir(str(db)).glob("*-graph.usearch"))
    out["default"]["first_pass"] = (f"usearch graph {graphs[-1]}, candidates rescored exactly" if graphs
                                    else _exact_pass(n))
    out["exact"]["first_pass"] = _exact_pass(n)
    return out


def _exact_pass(n: int) -> str:
    if n >= quantized.MIN_ROWS:
        return "8-bit scan with a proven bound, rescored exactly"
    if n >= quantized.BYTES_MIN_ROWS:
        return "in-memory 8-bit scan with a proven bound, rescored by faiss's float32 kernel"
    return "float32 scan (no first pass)"


def _brute_force(mem: Memory, qvecs: np.ndarray, k: int) -> list[set[str]]:
    """The ids of the ``k`` stored vectors of highest inner product with each query, read from the table."""
    best_s = np.full((len(qvecs), 0), -np.inf, dtype=np.float32)
    best_id = np.empty((len(qvecs), 0), dtype=object)
    ids: list[str] = []
    rows: list[np.ndarray] = []

    def merge() -> None:
        nonlocal best_s, best_id
        scores = qvecs @ np.vstack(rows).T
        all_s = np.concatenate([best_s, scores], axis=1)
        all_id = np.concatenate([best_id, np.broadcast_to(np.array(ids, dtype=object), scores.shape)], axis=1)
        top = np.argsort(-all_s, axis=1, kind="stable")[:, :k]
        best_s, best_id = np.take_along_axis(all_s, top, 1), np.take_along_axis(all_id, top, 1)
        ids.clear()
        rows.clear()

    for rec in mem.store.iter_records(batch_size=5000):
        if rec.memory.owner == mem.owner:
            ids.append(rec.memory.id)
            rows.append(np.asarray(rec.vector, dtype=np.float32))
            if len(rows) == 20_000:
                merge()
    if rows:
        merge()
    return [set(r) for r in best_id.tolist()]


def run_recall_bench(sizes: list[int], queries: int = 200, as_json: bool = False, keep: str | None = None,
                     embedder: str = "use-m3") -> int:
    results = []
    distinct = distinct_texts()
    if keep is not None:
        Path(keep).mkdir(parents=True, exist_ok=True)
    for n in sizes:
        r = bench_recall(n, queries, distinct=distinct, workdir=Path(keep) if keep is not None else None,
                         embedder_name=embedder)
        results.append(r)
        if not as_json:
            s, v = r["stages_ms"], r["vector"]
            print(f"{r['memories']:>8} memories: recall p50 {r['recall_ms']['p50']} ms, p95 {r['recall_ms']['p95']} ms "
                  f"(CPU p50 {r['recall_cpu_ms']['p50']}, p95 {r['recall_cpu_ms']['p95']} ms; "
                  f"embed p95 {s.get('embed', {}).get('p95')}, search p95 {s.get('search', {}).get('p95')}, "
                  f"rerank p95 {s.get('rerank', {}).get('p95')}); ingest {r['ingest_per_s']}/s over "
                  f"{r['pool_embedded']}, bulk {r['bulk_load_s']} s, index build {r['index_build_s']} s "
                  f"(first recall {r['first_recall_s']} s; {r['recalls_during_build']} recalls during the "
                  f"background write, p50/p95 {_pair(r['recall_during_build_ms'])} ms, CPU "
                  f"{_pair(r['recall_during_build_cpu_ms'])} ms) "
                  f"(filling: {r['fill_cpu_s']} s CPU); "
                  f"open (new process, to the first recall) {r['open_s']} s; "
                  f"a filter matching none p95 {r['no_match_filter_ms']['p95']} ms; max RSS {r['max_rss_mb']} MB; "
                  f"load average {r['load_average']}\n"
                  f"          vector recall@10 against a brute-force float32 scan: default search "
                  f"{v['default']['recall@10']} ({v['default']['first_pass']}; p95 {v['default']['ms']['p95']} ms), "
                  f"exact search {v['exact']['recall@10']} ({v['exact']['first_pass']}; p95 "
                  f"{v['exact']['ms']['p95']} ms)\n"
                  f"          corpus: {r['corpus']}\n          {r['vectors']}", flush=True)
    from memroute.embed.models import LATE_INTERACTION

    command = ("" if LATE_INTERACTION is None else f"MEMROUTE_LATE_INTERACTION={int(LATE_INTERACTION)} ") + \
        "memroute bench recall --memories " + \
        " ".join(str(n) for n in sizes) + (f" --embedder {embedder}" if embedder != "use-m3" else "")
    if as_json:
        emit_json({"command": command, "results": results})
    else:
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":  # the measuring process of bench_recall
    print(json.dumps(measure(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text(encoding="utf-8")),
                             *sys.argv[3:4])))
