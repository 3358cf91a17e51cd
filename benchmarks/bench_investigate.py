"""Benchmark of the code-intelligence tools on a ~100k-line Python repository.

The repository is built in a temporary folder by copying real Python files of installed packages
(site-packages: pydantic, starlette, anyio, ...) until it reaches the target line count. Measured: the
first scan (read + parse every file), a scan with nothing changed, a scan after one file changed, each
tool's p50 / p95 over many calls, ``query`` (first call: the symbol index is built and embedded), and
``memroute investigate code query`` as a new process, twice with the same ``--code-cache``: the first
builds the cached index, the second only scans the files and finds them unchanged.

Run: ``python -m benchmarks.bench_investigate [LINES]`` (default 100000).
"""

from __future__ import annotations

import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memroute.investigate import CodeIndex, Workspace
from memroute.investigate import codetools as tools
from memroute.investigate.codesearch import SymbolSearch

COMMAND = "python -m benchmarks.bench_investigate"
PACKAGES = ("pydantic", "starlette", "anyio", "httpx", "mcp", "uvicorn", "fastapi", "yaml", "hypothesis", "tqdm",
            "click", "jinja2", "idna", "sniffio", "attr", "certifi", "pydantic_core", "mypy", "_pytest")
QUERIES = ("validate the fields of a model", "where is the HTTP request parsed", "close the connection",
           "parse a JSON schema", "ログイン機能", "設定の読み込み", "요청 헤더 파싱", "retry when the server fails")


def build_repo(target: Path, lines: int) -> tuple[int, int]:
    """Copy Python files of installed packages into ``target`` until it holds ``lines`` lines."""
    site = Path(sysconfig.get_paths()["purelib"])
    total = files = 0
    for package in PACKAGES:
        source = site / package
        if not source.is_dir():
            continue
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            text = path.read_text("utf-8", errors="replace")
            dest = target / path.relative_to(site)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, "utf-8")
            total += len(text.splitlines())
            files += 1
            if total >= lines:
                return files, total
    return files, total


def timed(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.95) - 1)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    lines = int(args[0]) if args else 100_000
    tmp = Path(tempfile.mkdtemp(prefix="memroute-bench-"))
    try:
        files, total = build_repo(tmp, lines)
        index = CodeIndex(Workspace([tmp]))
        start = time.perf_counter()
        scan = index.scan(tmp)
        cold = (time.perf_counter() - start) * 1000
        symbols = [s for e in scan.files for s in e.parsed.symbols]
        print(f"repository: {files:,} Python files, {total:,} lines, {len(symbols):,} symbols "
              f"(copied from site-packages: {', '.join(p for p in PACKAGES if (tmp / p).is_dir())})")
        print(f"first scan (read + parse every file): {cold:,.0f} ms")
        warm = timed(lambda: index.scan(tmp), 10)
        print(f"scan, nothing changed: p50 {warm[0]:.1f} ms, p95 {warm[1]:.1f} ms")
        one = Path(scan.files[len(scan.files) // 2].source.path)
        one.write_text(one.read_text("utf-8") + "\n# touched\n", "utf-8")
        start = time.perf_counter()
        index.scan(tmp)
        print(f"scan after one file changed: {(time.perf_counter() - start) * 1000:.1f} ms")

        rng = random.Random(7)
        names = [s.name for s in rng.sample(symbols, 200)]
        dotted = [s.qualname for s in rng.sample([s for s in symbols if "." in s.qualname], 100)]
        rels = [e.rel for e in rng.sample(list(scan.files), 100)]
        words = ["def __init__", "raise ValueError", "return None", "async def", "self._", "TODO", "import typing"]
        cases: list[tuple[str, Callable[[int], Any], int]] = [
            ("find_definitions (name)", lambda i: tools.find_definitions(index, names[i % 200]), 100),
            ("find_definitions (Class.method)", lambda i: tools.find_definitions(index, dotted[i % 100]), 100),
            ("find_references", lambda i: tools.find_references(index, names[i % 200]), 100),
            ("search_text (literal)", lambda i: tools.search_text(index, words[i % len(words)]), 50),
            ("search_text (regex)", lambda i: tools.search_text(index, r"def \w+_cache\(", regex=True), 30),
            ("get_symbols (one file)", lambda i: tools.get_symbols(index, rels[i % 100]), 100),
            ("analyze_structure (one file)", lambda i: tools.analyze_structure(index, rels[i % 100]), 100),
            ("analyze_structure (whole repository)", lambda i: tools.analyze_structure(index), 20),
        ]
        for label, call, n in cases:
            counter = iter(range(n))
            p50, p95 = timed(lambda call=call, counter=counter: call(next(counter)), n)  # type: ignore[misc]
            print(f"{label:38} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  ({n} calls)")

        search = SymbolSearch(index)
        start = time.perf_counter()
        first = search.query(QUERIES[0])
        build = (time.perf_counter() - start) * 1000
        print(f"query, first call (index and embed {first.extra['indexed_symbols']:,} symbols): {build:,.0f} ms")
        counter = iter(range(40))
        p50, p95 = timed(lambda: search.query(QUERIES[next(counter) % len(QUERIES)]), 40)
        print(f"{'query (hybrid BM25 + vector)':38} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  (40 calls, en/ja/ko)")
        cli = [sys.executable, "-c", "import sys; from memroute.cli import main; sys.exit(main(sys.argv[1:]))",
               "investigate", "code", "query", QUERIES[1], "--repo", str(tmp), "--code-cache", str(tmp / ".cache"),
               "--store", f"sqlite:///{tmp / '.investigate.db'}", "--json"]
        for label in ("empty cache", "cache kept"):
            start = time.perf_counter()
            subprocess.run(cli, check=True, stdout=subprocess.DEVNULL)
            print(f"{'memroute investigate code query, ' + label:38} {(time.perf_counter() - start) * 1000:9,.0f} ms "
                  "(a new process: start, load the model, scan, query)")
        print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
        print(f"python {platform.python_version()} on {platform.machine()}; reproduce with: {COMMAND} {lines}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
