"""Routing benchmark: `python -m benchmarks.bench_route [N ...] [--semantic-router PYTHON]`
(the same as `memroute bench route --agents N ... [--semantic-router-python PYTHON]`).

semantic-router is never a dependency of memroute: install it in a separate environment together with
memroute (e.g. `python -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install semantic-router -e .`)
and pass that environment's python; it then routes the same synthetic agents and messages with memroute's
default encoder behind its encoder interface, so the two routers are compared on the same embeddings.
"""

from __future__ import annotations

import json
import sys

from memroute.eval.route_eval import run_route_bench

if __name__ == "__main__":
    args = sys.argv[1:]
    python = None
    if "--semantic-router" in args:
        at = args.index("--semantic-router")
        python = args[at + 1]
        del args[at : at + 2]
    sizes = [int(a) for a in args] or [100, 10_000]
    print(json.dumps(run_route_bench(sizes, queries=300, semantic_router_python=python), indent=2))
