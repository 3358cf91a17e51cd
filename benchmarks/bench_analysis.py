"""Benchmark of query analysis: p50/p95 time per message on 10k real messages from ../shared/data.

Run: ``python -m benchmarks.bench_analysis`` (or ``memroute bench analysis``). Exits 2 when the shared
data folder is missing.
"""

from __future__ import annotations

import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

from memroute.eval.analysis_eval import SHARED_DATA, bench_texts, run_bench

COMMAND = "python -m benchmarks.bench_analysis"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    data = Path(args[0]) if args else SHARED_DATA
    if not data.exists():
        print(f"shared data folder {data} not found: it holds the real messages this benchmark times "
              f"(pass another folder as the first argument)", file=sys.stderr)
        return 2
    texts = bench_texts(data, 10_000)
    result = run_bench(texts, datetime(2025, 3, 12, 15, 0, tzinfo=UTC))
    print(f"query analysis, {result.n} real messages (en SGD, ja JMultiWOZ-TC + RealPersonaChat, ko KoChat), "
          f"history up to 4 turns")
    print(f"p50 {result.p50_ms:.3f} ms | p95 {result.p95_ms:.3f} ms | p99 {result.p99_ms:.3f} ms | "
          f"mean {result.mean_ms:.3f} ms per message (wall clock)")
    print(f"p50 {result.cpu_p50_ms:.3f} ms | p95 {result.cpu_p95_ms:.3f} ms | p99 {result.cpu_p99_ms:.3f} ms "
          f"per message (CPU time of the analysing thread)")
    for lang, stats in result.by_language.items():
        print(f"  {lang}: n={stats['n']:.0f} wall p50 {stats['p50_ms']:.3f} ms, p95 {stats['p95_ms']:.3f} ms; "
              f"CPU p95 {stats['cpu_p95_ms']:.3f} ms")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs (wall-clock tails grow when the machine is shared)")
    print(f"python {platform.python_version()} on {platform.machine()}; reproduce with: {COMMAND}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
