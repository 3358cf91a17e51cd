"""Service load benchmark: recall over HTTP at 10k memories for a minute.

    python -m benchmarks.bench_service [--memories 10000] [--seconds 60] [--concurrency 4] [--workers 2]
                                       [--no-trace]

1. Builds a SQLite store of N memories the way ``memroute bench recall`` does (real en/ja/ko utterances
   when the shared data folder is there, else :mod:`memroute.eval.synthetic` templates; dates over two
   years, 200 sessions, one owner), through the whole write path (``remember_many``).
2. Starts ``memroute serve --workers N`` on it in a subprocess, on a free loopback port, with one API key.
3. Drives ``POST /v1/recall`` from ``--concurrency`` keep-alive clients in a separate process (spawned;
   each client sends its next request when the previous answer arrives) for ``--seconds``, after a 3 s
   warm-up, with further texts of the same mix as the queries, and reports throughput, latency
   percentiles (client side: HTTP included) and errors. The clients (``--client raw``, the default) write
   each request on an asyncio stream and read the status line, the headers and the whole body
   (``Content-Length``), ~0.3 ms of CPU a request where httpx (``--client httpx``, the figures before
   2026-11-26 16:00 UTC) spent ~2 ms: the load generator shares the cores it measures.
4. Reports the CPU time the service (all its processes) and the load generator spent per request, and
   the throughput those imply on an otherwise idle machine: the cores divided by the CPU per request.
   On a shared machine the measured throughput is what was left over; the CPU per request is not.

The load generator shares the machine with the service: on 2 cores it takes part of one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
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
QUERIES = 20_000
"""Distinct query texts: more than a minute's requests, so that the service's embedding cache never answers a
repeated query (a real user's next message is new text). 10,000 was too few once a run reached 183 /s
(2026-11-26: 1,511 of its 10,986 requests repeated a query)."""


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


def start_service(store: Path, port: int, key: str, workers: int = 1) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MEMROUTE_API_KEYS": key_entry(key, [OWNER]), "MEMROUTE_RATE_LIMIT_PER_MINUTE": "0"}
    memroute = Path(sys.executable).with_name("memroute")
    return subprocess.Popen([str(memroute), "serve", "--store", f"sqlite:///{store}", "--port", str(port),
                             "--log-level", "warning", "--workers", str(workers)], env=env, stdout=subprocess.DEVNULL)


def cpu_by_process(pid: int) -> dict[int, float]:
    """User + system CPU time of a process and of each descendant still running, by pid (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            out[current] = (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its descendants still running."""
    return sum(cpu_by_process(pid).values())


def wait_workers(pid: int, workers: int, timeout_s: float = 300) -> None:
    """Wait until ``workers`` worker processes have loaded (their CPU time stops climbing with imports)."""
    if workers == 1:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        children = [c for task in Path(f"/proc/{pid}/task").iterdir()
                    for c in (task / "children").read_text().split()]
        if len(children) >= workers:
            before = cpu_seconds(pid)
            time.sleep(2)
            if cpu_seconds(pid) - before < 0.2:  # idle: every worker has started and warmed up
                return
        else:
            time.sleep(1)
    raise SystemExit(f"{workers} workers did not start within {timeout_s:.0f} s")


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


class RawClient:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads whole answers (``Content-Length``
    framing, which every answer of the service has); reconnects after an error or ``Connection: close``."""

    def __init__(self, url: str, key: str, timeout_s: float = 30) -> None:
        parsed = httpx.URL(url)
        self.host, self.port = parsed.host, parsed.port or 80
        self.head = (f"Host: {self.host}:{self.port}\r\nAuthorization: Bearer {key}\r\n"
                     "Content-Type: application/json\r\n").encode()
        self.timeout_s = timeout_s
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: bytes) -> int:
        """The answer's status; raises ``OSError``, ``TimeoutError`` or ``ValueError`` (a malformed answer)."""
        try:
            return await asyncio.wait_for(self._post(path, body), self.timeout_s)
        except BaseException:
            await self.close()
            raise

    async def _post(self, path: str, body: bytes) -> int:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        writer.write(b"POST " + path.encode() + b" HTTP/1.1\r\n" + self.head + b"Content-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
        if "content-length" not in fields:
            raise ValueError(f"an answer without Content-Length: {head[0]}")
        await reader.readexactly(int(fields["content-length"]))
        if fields.get("connection", "").lower() == "close":
            await self.close()
        return status

    async def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def drive(url: str, key: str, asks: list[str], seconds: float, concurrency: int,
                trace: bool, on_start: Callable[[], object] = lambda: None, client: str = "raw") -> dict[str, Any]:
    """3 s of warm-up, then ``seconds`` measured (``on_start`` is called between the two)."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    counter = 0
    headers = {"Authorization": f"Bearer {key}"}
    now = NOW.isoformat()

    async def send(post: Callable[[str], Awaitable[int]], stop: float) -> None:
        nonlocal counter
        while time.monotonic() < stop:
            text = asks[counter % len(asks)]
            counter += 1
            start = time.perf_counter()
            try:
                status = await post(text)
                if status != 200:
                    errors[f"HTTP {status}"] = errors.get(f"HTTP {status}", 0) + 1
                    continue
            except (httpx.HTTPError, OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            latencies.append((time.perf_counter() - start) * 1000)

    def body(text: str) -> bytes:
        return json.dumps({"text": text, "now": now, "trace": trace}).encode()

    async def run(posts: list[Callable[[str], Awaitable[int]]]) -> tuple[float, float]:
        await asyncio.gather(*(send(post, time.monotonic() + 3) for post in posts))  # warm-up
        latencies.clear()
        errors.clear()
        on_start()
        start, cpu = time.monotonic(), time.process_time()
        await asyncio.gather(*(send(post, start + seconds) for post in posts))
        return time.monotonic() - start, time.process_time() - cpu

    if client == "raw":
        raws = [RawClient(url, key) for _ in range(concurrency)]
        elapsed, cpu = await run([partial(_raw_post, raw, body) for raw in raws])
        for raw in raws:
            await raw.close()
    else:
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as http:
            async def post(text: str) -> int:
                return (await http.post("/v1/recall", content=body(text),
                                        headers={"Content-Type": "application/json"})).status_code
            elapsed, cpu = await run([post] * concurrency)
    arr = np.asarray(latencies) if latencies else np.zeros(1)
    return {"requests": len(latencies), "seconds": round(elapsed, 1),
            "throughput_per_s": round(len(latencies) / elapsed, 1),
            "latency_ms": {p: round(float(np.percentile(arr, int(p[1:]))), 1) for p in ("p50", "p95", "p99")},
            "max_ms": round(float(arr.max()), 1), "errors": sum(errors.values()), "error_kinds": errors,
            "repeated_queries": max(0, counter - len(asks)), "client_cpu_s": cpu}


async def _raw_post(raw: RawClient, body: Callable[[str], bytes], text: str) -> int:
    return await raw.post("/v1/recall", body(text))


def _generate(url: str, key: str, asks: list[str], seconds: float, concurrency: int, trace: bool, out: Any,
              started: Any, client: str) -> None:
    """The load process: :func:`drive`, whose result goes back through ``out``; ``started`` is set when the
    measured part begins."""
    out.send(asyncio.run(drive(url, key, asks, seconds, concurrency, trace, started.set, client)))


def run_load(url: str, key: str, asks: list[str], seconds: float, concurrency: int, trace: bool,
             service_pid: int, client: str = "raw") -> dict[str, Any]:
    """:func:`drive` in a spawned process; adds the service's CPU time over the measured part."""
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    started = ctx.Event()
    process = ctx.Process(target=_generate, args=(url, key, asks, seconds, concurrency, trace, send, started, client))
    process.start()
    started.wait()  # after drive()'s warm-up
    cpu_before = cpu_by_process(service_pid)
    result: dict[str, Any] = receive.recv()
    spent = {p: s - cpu_before.get(p, 0.0) for p, s in cpu_by_process(service_pid).items()}
    result["service_cpu_s"] = sum(spent.values())
    # How the load spread over the processes: a keep-alive connection stays with the worker that accepted it.
    result["cpu_by_process_s"] = sorted(spent.values(), reverse=True)
    process.join(60)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--workers", type=int, default=1, help="memroute serve --workers (default 1)")
    parser.add_argument("--no-trace", action="store_true", help="ask for recalls without the trace")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw",
                        help="the load generator's HTTP client (default raw: asyncio streams, ~0.3 ms of CPU a "
                             "request; httpx: the client of the figures before 2026-11-26 16:00 UTC, ~2 ms)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memroute-bench-service-") as tmp:
        store = Path(tmp) / "service.db"
        t0 = time.perf_counter()
        asks, source = build_store(store, args.memories, queries=QUERIES)
        print(f"stored {args.memories} memories in {time.perf_counter() - t0:.1f} s ({source})", flush=True)
        key, port = new_key(), free_port()
        url = f"http://127.0.0.1:{port}"
        process = start_service(store, port, key, args.workers)
        try:
            wait_ready(url, process)
            wait_workers(process.pid, args.workers)
            load_before = os.getloadavg()
            result = run_load(url, key, asks, args.seconds, args.concurrency, not args.no_trace, process.pid,
                              args.client)
            load_after = os.getloadavg()
        finally:
            process.terminate()
            process.wait(30)
    lat = result["latency_ms"]
    answered = max(1, result["requests"])
    service_ms = result["service_cpu_s"] * 1000 / answered
    client_ms = result["client_cpu_s"] * 1000 / answered
    cores = os.cpu_count() or 1
    print(f"recall over HTTP at {args.memories} memories, {args.workers} worker(s), {args.concurrency} concurrent "
          "clients, "
          f"{result['seconds']} s: {result['throughput_per_s']} requests/s; p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
          f"p99 {lat['p99']} ms, max {result['max_ms']} ms; {result['requests']} answered, {result['errors']} errors "
          f"{result['error_kinds'] or ''}; {len(asks)} distinct queries, {result['repeated_queries']} repeated")
    print(f"CPU per answered request: service {service_ms:.1f} ms (all its processes), load generator "
          f"{client_ms:.1f} ms; on {cores} otherwise idle cores that is at "
          f"most {cores * 1000 / (service_ms + client_ms):.0f} requests/s, {cores * 1000 / service_ms:.0f} with "
          "the load generated elsewhere")
    print(f"service CPU by process (the supervisor and each worker), largest first: "
          f"{', '.join(f'{s:.1f} s' for s in result['cpu_by_process_s'])}")
    # Latency on a shared machine means little without the load it was measured under.
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after; {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    trace = (" --no-trace" if args.no_trace else "") + (" --client httpx" if args.client == "httpx" else "")
    print(f"reproduce: python -m benchmarks.bench_service --memories {args.memories} --seconds {args.seconds:g} "
          f"--concurrency {args.concurrency} --workers {args.workers}{trace}")
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
