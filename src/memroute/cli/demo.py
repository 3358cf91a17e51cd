"""`memroute demo` (what `make run` runs): ingest a bundled multilingual conversation and search it."""

from __future__ import annotations

import json
import time
from importlib import resources
from typing import Any

from memroute.cli.common import emit_json
from memroute.config import Settings
from memroute.memory import Memory
from memroute.types import Agent

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


CONVERSATION = (
    "Translate 'good morning' to Japanese",
    "Now to Korean",
    "By the way, what's on my calendar tomorrow?",
)
RECALL = ("あれどうなった？", [{"role": "user", "text": "プロジェクトXのデザインレビュー、まだ？"}],
          "2026-11-12T09:00:00+09:00")


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
        routes = _route_conversation(mem)
        text, history, now = RECALL
        recalled = mem.recall(text, recent_messages=history, now=now)
        recall: dict[str, Any] = {"text": text, "history": history, "memories": [
            {"id": m.memory.id, "relevance": m.relevance, "score": round(m.score, 3), "text": m.memory.text}
            for m in recalled.memories], "inject": recalled.should_inject, "pack": recalled.memory_pack()}
    if as_json:
        emit_json({"store": url, "stored": report.stored, "ingest_ms": round(ingest_ms, 1), "searches": results,
                   "routing": routes, "recall": recall})
        return 0
    print(f"memroute demo: stored {report.stored} memories (en/ja/ko) in {url} as owner {DEMO_OWNER!r} "
          f"in {ingest_ms:.0f} ms (includes loading the embedding model)\n")
    for r in results:
        print(f"[{r['language']}] {r['query']}   ({r['ms']} ms)")
        for h in r["hits"]:
            print(f"   {h['score']:.4f}  {h['text'][:90]}")
        print()
    print("Routing a conversation (agents: src/memroute/data/demo_agents.toml):")
    for r in routes:
        print(f"   {r['text']!r:48} -> {r['agent']} ({r['action']}: {r['reason']})")
    print(f"\nRecall for {recall['text']!r} after {history[0]['text']!r} (あれ is resolved from that turn):")
    for m in recall["memories"]:
        print(f"   {m['score']:.3f} {m['relevance']:6} {m['text'][:80]}")
    if recall["inject"]:
        print("   " + "\n   ".join(str(recall["pack"]).splitlines()))
    else:
        print("   (not injected: seed 001 asks for one 'high' or two 'medium' memories)")
    print("\nTry it yourself:  .venv/bin/memroute recall '先週のあれどうなった？' --owner demo --pack")
    return 0


def demo_agents() -> tuple[Agent, ...]:
    """The bundled multilingual demo catalogue (``memroute/data/demo_agents.toml``)."""
    from memroute.routing import load_catalogue

    with resources.as_file(resources.files("memroute.data").joinpath("demo_agents.toml")) as path:
        return load_catalogue(path)


def _route_conversation(mem: Memory) -> list[dict[str, Any]]:
    from memroute.routing import ConversationRouter

    router = ConversationRouter(mem, demo_agents(), owner=DEMO_OWNER)
    router.reset("demo-chat")
    out = []
    for text in CONVERSATION:
        decision = router.route(text, "demo-chat")
        out.append({"text": text, "agent": decision.agent.id if decision.agent else None,
                    "action": str(decision.action), "reason": decision.reason})
    return out
