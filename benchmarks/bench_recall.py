"""Recall benchmark: `python -m benchmarks.bench_recall [N ...]` (same as `memroute bench recall --memories N`)."""

from __future__ import annotations

import sys

from memroute.eval.recall_bench import run_recall_bench

if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [10_000, 100_000, 1_000_000]
    sys.exit(run_recall_bench(sizes, queries=200))
