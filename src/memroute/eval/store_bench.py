"""`memroute bench store`: ingest throughput and BM25 / vector / time-range search latency.

The store is a new SQLite file per size, or the ``--store`` URL given (emptied of the benchmark's owner
first). Ingest goes through the whole write path (language detection, tokenisation, embedding with the default
model without its cache, one transaction per batch of 256). The memories are real utterances
(:mod:`memroute.eval.corpus`) when the data folder is there, else template sentences; queries are 200
further utterances of the same mix that are not in the store. Searches run on one owner holding every
memory, the hardest case for the filters; the vector search time excludes embedding the query (reported
apart). Memory dates are spread over two years.

``pool`` (``--pool``): only the first ``pool`` memories go through the write path (the ingest rate reported);
memory ``i`` beyond them is a copy of pool memory ``i % pool`` with its tokens and its vector plus Gaussian
noise (sigma 0.02 per dimension, cosine ~0.9 to its source), bulk loaded: ``bulk_load`` with the search
indexes rebuilt afterwards where the store has it (PostgreSQL: binary COPY, then CREATE INDEX), else
``upsert`` in batches of 5,000. Embedding 1M texts would measure the encoder.

A store whose vector search is approximate (PostgreSQL's HNSW beyond ``EXACT_ROWS`` rows per owner) also
reports recall@10 against its own exact search for the same queries, at the default search depth and at
deeper ``hnsw.ef_search`` settings (``ef_search`` in the results).
"""

from __future__ import annotations

import gc
import inspect
import os
import random
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

from memroute.cli.common import emit_json
from memroute.embed import get_embedder
from memroute.eval.corpus import real_texts
from memroute.eval.measure import peak_rss_mb
from memroute.eval.synthetic import synthetic_memories, synthetic_queries
from memroute.memory import Memory
from memroute.stores import MemoryRecord, Store, open_store
from memroute.text import tokenize
from memroute.types import ScoredId, SearchFilter

NOISE = 0.02
EF_SEARCH = (100, 200, 400)
"""Deeper HNSW searches measured beside the default (``hnsw.ef_search`` = 40 for 10 results)."""


@runtime_checkable
class _BulkLoading(Protocol):
    def bulk_load(self, records: Any, rebuild_indexes: bool = False, progress: Any = None) -> int: ...


class _ExactOnRequest(Protocol):
    def search_vector(self, vector: npt.NDArray[np.float32], flt: SearchFilter, limit: int,
                      exact: bool | None = None) -> list[ScoredId]: ...


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


def perturbed_copies(mem: Memory, ids: Sequence[str], n: int) -> Iterator[MemoryRecord]:
    """Memories ``len(ids)..n``: copies of the stored pool memories with noisy vectors (see the module doc).

    The pool is read here, before the generator starts: ``bulk_load`` locks the table while it consumes the
    generator (it drops the search indexes), so a read from inside it would wait for itself forever.
    """
    pool = len(ids)
    by_id = {m.id: m for m in mem.store.get(list(ids), mem.owner)}
    vecs = mem.store.get_vectors(list(ids), mem.owner)
    toks = {i: tokenize(by_id[i].full_text) for i in ids}
    rng = np.random.default_rng(17)

    def copies() -> Iterator[MemoryRecord]:
        for i in range(pool, n):
            src = by_id[ids[i % pool]]
            v = vecs[src.id] + rng.normal(0.0, NOISE, size=mem.embedder.dimension).astype(np.float32)
            v /= np.linalg.norm(v)
            yield MemoryRecord(replace(src, id=f"bulk-{i}"), toks[src.id], v)

    return copies()


def bulk_copies(mem: Memory, ids: Sequence[str], n: int) -> dict[str, Any]:
    """Store memories ``len(ids)..n`` as :func:`perturbed_copies` of the pool ``ids``; what it took."""
    t0 = time.perf_counter()
    records = perturbed_copies(mem, ids, n)
    store = mem.store
    if isinstance(store, _BulkLoading):
        store.bulk_load(records, rebuild_indexes=True)
        how = "bulk_load (binary COPY, search indexes rebuilt after the load)"
    else:
        batch: list[MemoryRecord] = []
        for rec in records:
            batch.append(rec)
            if len(batch) == 5000:
                store.upsert(batch)
                batch = []
        store.upsert(batch)
        how = "upsert in batches of 5,000"
    secs = time.perf_counter() - t0
    return {"rows": n - len(ids), "seconds": round(secs, 1), "per_s": round((n - len(ids)) / secs, 1), "how": how}


def _hnsw_recall(mem: Memory, qvecs: npt.NDArray[np.float32], flt: SearchFilter) -> dict[str, Any] | None:
    """recall@10 of the store's approximate vector search against its exact one, if it has both."""
    if "exact" not in inspect.signature(mem.store.search_vector).parameters:
        return None
    store = cast(_ExactOnRequest, mem.store)
    exact, exact_ms = [], []
    for vec in qvecs:
        t = time.perf_counter()
        exact.append({h.id for h in store.search_vector(vec, flt, 10, exact=True)})
        exact_ms.append((time.perf_counter() - t) * 1000)
    out: dict[str, Any] = {"exact_ms": percentiles(exact_ms), "ef_search": {}}
    deeper = EF_SEARCH if mem.store.url.startswith("postgres") else ()  # a PostgreSQL setting; SQLite has none
    for ef in (None, *deeper):
        url = mem.store.url if ef is None else _with_option(mem.store.url, f"-c hnsw.ef_search={ef}")
        approx = store if ef is None else cast(_ExactOnRequest, open_store(url))
        found, ms = 0, []
        for vec, truth in zip(qvecs, exact, strict=True):
            t = time.perf_counter()
            hits = approx.search_vector(vec, flt, 10, exact=False)
            ms.append((time.perf_counter() - t) * 1000)
            found += len(truth & {h.id for h in hits})
        if approx is not store:
            cast(Store, approx).close()
        label = str(ef or (40 if deeper else "default"))
        out["ef_search"][label] = {"recall@10": round(found / (10 * len(exact)), 4), "ms": percentiles(ms)}
    return out


def _with_option(url: str, option: str) -> str:
    from urllib.parse import quote

    return url + ("&" if "?" in url else "?") + "options=" + quote(option)


def bench_one(n: int, queries: int, workdir: Path, store_url: str | None = None,
              pool: int | None = None) -> dict[str, Any]:
    pool = min(pool or n, n)
    items, texts, source = _corpus(pool, queries)
    url = store_url or f"sqlite:///{workdir / f'bench-{n}.db'}"
    mem = Memory.open(url, owner="owner-0", embedder=get_embedder().inner)
    mem.forget(everything=True)  # a given store is reused from one size to the next
    t0 = time.perf_counter()
    report = mem.remember_many(items, batch_size=256)
    ingest_s = time.perf_counter() - t0
    bulk = bulk_copies(mem, [it["id"] for it in items], n) if n > pool else None
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
    hnsw = _hnsw_recall(mem, qvecs, flt)
    count = mem.store.count()
    mem.close()
    return {"memories": count, "backend": backend, "corpus": source, "pool_embedded": pool,
            "hybrid_search_ms": percentiles(hybrid), "ingest_per_s": round(report.stored / ingest_s, 1),
            "bulk": bulk, "bm25_ms": percentiles(bm25), "vector_ms": percentiles(vector),
            "time_range_ms": percentiles(timed), "query_embed_ms": percentiles(embed), "hnsw": hnsw,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "finished": datetime.now(UTC).isoformat("T", "seconds"),
            "max_rss_mb": round(peak_rss_mb(), 1)}


def describe(r: dict[str, Any]) -> str:
    def ms(key: str) -> str:
        return f"p50 {r[key]['p50']} p95 {r[key]['p95']} ms"

    lines = [f"{r['backend']} {r['memories']:>8} memories: ingest {r['ingest_per_s']}/s over {r['pool_embedded']}; "
             f"BM25 {ms('bm25_ms')}; vector {ms('vector_ms')}; hybrid (embed + both + fuse + load) "
             f"{ms('hybrid_search_ms')}; time-range {ms('time_range_ms')}; query embedding {ms('query_embed_ms')}; "
             f"max RSS {r['max_rss_mb']} MB; load average {r['load_average']} at {r['finished']}"]
    if r["bulk"]:
        b = r["bulk"]
        lines.append(f"          bulk: {b['rows']} copies in {b['seconds']} s ({b['per_s']}/s) by {b['how']}")
    if r["hnsw"]:
        h = r["hnsw"]
        deep = "; ".join(f"ef_search {ef}: recall@10 {v['recall@10']}, p50 {v['ms']['p50']} p95 {v['ms']['p95']} ms"
                         for ef, v in h["ef_search"].items())
        lines.append(f"          HNSW against exact search (exact p50 {h['exact_ms']['p50']} ms): {deep}")
    lines.append(f"          corpus: {r['corpus']}")
    return "\n".join(lines)


def run_store_bench(sizes: list[int], queries: int, as_json: bool = False, store_url: str | None = None,
                    pool: int | None = None) -> int:
    results = []
    with tempfile.TemporaryDirectory(prefix="memroute-bench-") as tmp:
        for n in sizes:
            results.append(bench_one(n, queries, Path(tmp), store_url, pool))
            if not as_json:
                print(describe(results[-1]), flush=True)
    command = "memroute bench store --memories " + " ".join(str(n) for n in sizes)
    if pool:
        command += f" --pool {pool}"
    if store_url:
        command += " --store " + ("postgresql://..." if store_url.startswith("postgres") else store_url)
    if as_json:
        emit_json({"command": command, "results": results})
    else:
        print(f"reproduce: {command}")
    return 0
