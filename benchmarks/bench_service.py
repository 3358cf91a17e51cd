"""Service load benchmark: recall over HTTP at 10k memories for a minute.

    python -m benchmarks.bench_service [--memories 10000] [--seconds 60] [--concurrency 4] [--no-trace]

1. Builds a SQLite store of N memories the way ``memroute bench recall`` does (real en/ja/ko utterances
   when the shared data folder is there, else :mod:`memroute.eval.synthetic` templates; dates over two
   years, 200 sessions, one owner), through the whole write path (``remember_many``).
2. Starts ``memroute serve`` on it in a subprocess, on a free loopback port, with one API key.
3. Drives ``POST /v1/recall`` from ``--concurrency`` async httpx clients in this process (each sends its
   next request when the previous answer arrives) for ``--seconds``, with further texts of the same mix
   as the queries, and reports throughput, latency percentiles (client-side: HTTP included) and errors.

The load generator shares the machine with the service: on 2 cores it takes part of one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from memroute.eval.corpus import real_texts
from memroute.eval.recall_bench import NOW
from memroute.eval.synthetic import synthetic_memories, synthetic_queries
from memroute.memory import Memory
from memroute.service.auth import key_entry, new_key

OWNER = "owner-0"  # synthetic_memories' owner when there is one
QUERIES = 10_000
"""Distinct query texts: more than a minute's requests, so that the service's embedding cache never
answers a repeated query (a real user's next message is new text)."""


def build_store(path: Path, n: int, queries: int) -> tuple[list[str], str]:
    """Store ``n`` memories in ``path``; return texts to ask (not in the store) and where texts came from."""
    texts, source = real_texts(n + queries)
    items = list(synthetic_memories(n))
    if texts:
        items = [{**it, "text": t} for it, t in zip(items, texts[:n], strict=True)]
        asks = texts[n:]
    else:
        source, asks = "template sentences (no data folder)", synthetic_queries(queries)
    with Memory.open(f"sqlite:///{path}", owner=OWNER) as mem:
        mem.remember_many(items, batch_size=256, show_progress=sys.stderr.isatty())
    return asks, source


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_service(store: Path, port: int, key: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MEMROUTE_API_KEYS": key_entry(key, [OWNER]), "MEMROUTE_RATE_LIMIT_PER_MINUTE": "0"}
    memroute = Path(sys.executable).with_name("memroute")
    return subprocess.Popen([str(memroute), "serve", "--store", f"sqlite:///{store}", "--port", str(port),
                             "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL)


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"memroute serve exited with status {process.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"memroute serve did not become ready within {timeout_s:.0f} s")


async def drive(url: str, key: str, asks: list[str], seconds: float, concurrency: int,
                trace: bool) -> dict[str, Any]:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    counter = 0
    headers = {"Authorization": f"Bearer {key}"}

    async def worker(client: httpx.AsyncClient, stop: float) -> None:
        nonlocal counter
        while time.monotonic() < stop:
            text = asks[counter % len(asks)]
            counter += 1
            start = time.perf_counter()
            try:
                r = await client.post("/v1/recall", json={"text": text, "now": NOW.isoformat(), "trace": trace})
                if r.status_code != 200:
                    errors[f"HTTP {r.status_code}"] = errors.get(f"HTTP {r.status_code}", 0) + 1
                    continue
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            latencies.append((time.perf_counter() - start) * 1000)

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as client:
        await asyncio.gather(*(worker(client, time.monotonic() + 3) for _ in range(concurrency)))  # warm-up
        latencies.clear()
        errors.clear()
        start = time.monotonic()
        await asyncio.gather(*(worker(client, start + seconds) for _ in range(concurrency)))
        elapsed = time.monotonic() - start
    arr = np.asarray(latencies) if latencies else np.zeros(1)
    return {"requests": len(latencies), "seconds": round(elapsed, 1),
            "throughput_per_s": round(len(latencies) / elapsed, 1),
            "latency_ms": {p: round(float(np.percentile(arr, int(p[1:]))), 1) for p in ("p50", "p95", "p99")},
            "max_ms": round(float(arr.max()), 1), "errors": sum(errors.values()), "error_kinds": errors,
            "repeated_queries": max(0, counter - len(asks))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--no-trace", action="store_true", help="ask for recalls without the trace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memroute-bench-service-") as tmp:
        store = Path(tmp) / "service.db"
        t0 = time.perf_counter()
        asks, source = build_store(store, args.memories, queries=QUERIES)
        print(f"stored {args.memories} memories in {time.perf_counter() - t0:.1f} s ({source})", flush=True)
        key, port = new_key(), free_port()
        url = f"http://127.0.0.1:{port}"
        process = start_service(store, port, key)
        try:
            wait_ready(url, process)
            load_before = os.getloadavg()
            result = asyncio.run(drive(url, key, asks, args.seconds, args.concurrency, not args.no_trace))
            load_after = os.getloadavg()
        finally:
            process.terminate()
            process.wait(30)
    lat = result["latency_ms"]
    print(f"recall over HTTP at {args.memories} memories, {args.concurrency} concurrent clients, "
          f"{result['seconds']} s: {result['throughput_per_s']} requests/s; p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
          f"p99 {lat['p99']} ms, max {result['max_ms']} ms; {result['requests']} answered, {result['errors']} errors "
          f"{result['error_kinds'] or ''}; {len(asks)} distinct queries, {result['repeated_queries']} repeated")
    # Latency on a shared machine means little without the load it was measured under.
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after; {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    trace = " --no-trace" if args.no_trace else ""
    print(f"reproduce: python -m benchmarks.bench_service --memories {args.memories} --seconds {args.seconds:g} "
          f"--concurrency {args.concurrency}{trace}")
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
