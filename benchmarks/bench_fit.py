"""Benchmark of ``memroute fit --dialogues``: seconds and peak memory of fitting the conversation router on
50 / 200 / 1,000 labelled dialogues of JMultiWOZ-TC train (../shared/data), each size in a fresh process.

Run: ``python -m benchmarks.bench_fit [DATA_DIR] [SIZES...]``. Exits 2 when the shared data folder is missing.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from memroute.eval.analysis_eval import SHARED_DATA
from memroute.eval.measure import peak_rss_mb

COMMAND = "python -m benchmarks.bench_fit"


def _one(data: Path, size: int) -> dict[str, float]:
    """Fit in this process (called in a child): seconds, peak RSS, and what was fitted."""
    from memroute.eval.datasets import load_candidates
    from memroute.routing import AgentRouter
    from memroute.routing.training import fit_dialogues

    folder = data / "jmultiwoz_tc_routing"
    agents = load_candidates(folder / "tools.jsonl")
    router = AgentRouter()
    router.route("warm up the encoder", agents)
    base_rss = peak_rss_mb()
    start = time.perf_counter()
    fitted = fit_dialogues(folder / "train.jsonl", agents, router, max_dialogues=size)
    return {"dialogues": size, "seconds": round(time.perf_counter() - start, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "rss_before_fit_mb": round(base_rss, 1), "examples": fitted.how["examples"]["total"],
            "labelled_turns": fitted.how["labelled_turns_in_file"]}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--one":
        print(json.dumps(_one(Path(args[1]), int(args[2]))))
        return 0
    data = Path(args[0]) if args else SHARED_DATA
    sizes = [int(a) for a in args[1:]] or [50, 200, 1000]
    if not (data / "jmultiwoz_tc_routing" / "train.jsonl").is_file():
        print(f"shared data folder {data} has no jmultiwoz_tc_routing/train.jsonl (pass the folder as the first "
              "argument)", file=sys.stderr)
        return 2
    print("memroute fit --dialogues on JMultiWOZ-TC train (6 agents), one fresh process per size")
    for size in sizes:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_fit", "--one", str(data), str(size)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"{size} dialogues: failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{size:>5} dialogues: {r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB "
              f"({r['rss_before_fit_mb']:.0f} MB before the fit), {r['examples']} examples")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"python {platform.python_version()} on {platform.machine()}; reproduce with: {COMMAND}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
