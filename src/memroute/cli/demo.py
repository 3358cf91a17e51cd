"""`memroute demo` (what `make run` runs): ingest a bundled multilingual conversation and search it."""

from __future__ import annotations

import json
import time
from importlib import resources
from typing import Any

from memroute.cli.common import emit_json
from memroute.config import Settings
from memroute.memory import Memory

DEMO_OWNER = "demo"
QUERIES = (
    ("en", "when is the Atlas release and who owns it?"),
    ("en", "what did I say about my seat on the flight"),
    ("ja", "プロジェクトXの進捗"),
    ("ja", "パスワードが空のときのエラー"),
    ("ko", "지난주 회의"),
    ("ko", "어머니 선물"),
    ("en→ja", "budget meeting with Tanaka"),
)


def demo_items() -> list[dict[str, Any]]:
    text = resources.files("memroute.data").joinpath("demo_memories.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_demo(settings: Settings, as_json: bool = False) -> int:
    t0 = time.perf_counter()
    with Memory.open(settings.store, owner=DEMO_OWNER, settings=settings) as mem:
        report = mem.remember_many(demo_items())
        ingest_ms = (time.perf_counter() - t0) * 1000
        results: list[dict[str, Any]] = []
        for lang, query in QUERIES:
            t = time.perf_counter()
            hits = mem.search(query, limit=3)
            results.append({"language": lang, "query": query, "ms": round((time.perf_counter() - t) * 1000, 2),
                            "hits": [{"score": round(h.score, 4), "id": h.memory.id, "text": h.memory.text,
                                      "sources": {k: round(v, 3) for k, v in h.scores.items()}} for h in hits]})
        url = mem.store.url
    if as_json:
        emit_json({"store": url, "stored": report.stored, "ingest_ms": round(ingest_ms, 1), "searches": results})
        return 0
    print(f"memroute demo: stored {report.stored} memories (en/ja/ko) in {url} as owner {DEMO_OWNER!r} "
          f"in {ingest_ms:.0f} ms (includes loading the embedding model)\n")
    for r in results:
        print(f"[{r['language']}] {r['query']}   ({r['ms']} ms)")
        for h in r["hits"]:
            print(f"   {h['score']:.4f}  {h['text'][:90]}")
        print()
    print("Try it yourself:  .venv/bin/memroute search 'Osaka hotel' --owner demo")
    return 0
