"""Store benchmark: `python -m benchmarks.bench_store [N ...]` (same as `memroute bench store`)."""

from __future__ import annotations

import sys

from memroute.eval.store_bench import run_store_bench

if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [10_000, 100_000]
    sys.exit(run_store_bench(sizes, queries=200))
