"""`memroute demo` (what `make run` runs): ingest a bundled multilingual conversation and search it."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import time
from datetime import date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from memroute.cli.common import emit_json
from memroute.config import Settings, default_store_url
from memroute.memory import Memory
from memroute.types import Agent, as_utc, utcnow

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


WRITTEN_WEEK = date(2026, 11, 16)
"""The Monday of the week the demo memories' dates were written in (``demo_memories.jsonl``)."""
DEMO_SESSION = "ja-work"
DEMO_LOG = "プロジェクトXのデザインレビュー、まだ？"
"""The last turn of the demo's Japanese work chat, stored in its conversation log: あれ in 「あれどうなった？」
asked in that session is Project X."""


def demo_items(now: datetime | str | None = None) -> list[dict[str, Any]]:
    """The demo memories, dated relative to ``now`` (default: the clock) so that the demo works on any day:
    moved by whole weeks so that the week they were written in is ``now``'s week (「先週」, "last week" keep
    their memories), and any that would then lie after ``now`` one week earlier still."""
    at = as_utc(now) or utcnow()
    shift = timedelta(days=7 * ((at.date() - WRITTEN_WEEK).days // 7))
    text = resources.files("memroute.data").joinpath("demo_memories.jsonl").read_text("utf-8")
    items = [json.loads(line) for line in text.splitlines() if line.strip()]
    for item in items:
        when = datetime.fromisoformat(item["occurred_at"].replace("Z", "+00:00")) + shift
        if when > at:
            when -= timedelta(days=7)
        item["occurred_at"] = when.isoformat()
    return items


def load_demo(mem: Memory, owner: str = DEMO_OWNER) -> int:
    """Store the demo memories (dated relative to now; storing them again replaces them) and the last turn
    of the demo's work chat, once. The number of memories stored."""
    report = mem.remember_many(demo_items(), owner=owner)
    if not any(m.text == DEMO_LOG for m in mem.recent_messages(DEMO_SESSION, owner=owner, limit=5)):
        mem.add_message(DEMO_SESSION, "user", DEMO_LOG, owner=owner)
    return report.stored


def try_commands(settings: Settings) -> list[str]:
    """The "try it yourself" commands the demo prints: they work when pasted, on any day."""
    exe = _program()
    store = "" if settings.store == default_store_url() else f" --store {shlex.quote(settings.store)}"
    return [f"{exe} recall '先週のあれどうなった？' --session {DEMO_SESSION} --owner {DEMO_OWNER}{store} --pack",
            f"{exe} search 'budget meeting with Tanaka' --owner {DEMO_OWNER}{store}",
            f"{exe} route 'hi' --agents {shlex.quote(str(demo_catalogue_path()))}"]


def _program() -> str:
    """``memroute``, or the path this memroute was started by when that is not the one on PATH."""
    argv0 = sys.argv[0]
    if Path(argv0).name != "memroute":
        return "memroute"
    found = shutil.which("memroute")
    if found and Path(found).resolve() == Path(argv0).resolve():
        return "memroute"
    return shlex.quote(argv0)


def demo_catalogue_path() -> Path:
    """The demo catalogue's file inside the installed package."""
    return Path(str(resources.files("memroute.data").joinpath("demo_agents.toml")))


CONVERSATION = (
    "Translate 'good morning' to Japanese",
    "Now to Korean",
    "By the way, what's on my calendar tomorrow?",
)
NO_AGENT = "hi"
RECALL = ("先週のあれどうなった？", [{"role": "user", "text": DEMO_LOG}])


def run_demo(settings: Settings, as_json: bool = False) -> int:
    t0 = time.perf_counter()
    with Memory.open(settings.store, owner=DEMO_OWNER, settings=settings) as mem:
        stored = load_demo(mem)
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
        text, history = RECALL
        recalled = mem.recall(text, recent_messages=history)
        recall: dict[str, Any] = {"text": text, "history": history, "memories": [
            {"id": m.memory.id, "relevance": m.relevance, "score": round(m.score, 3), "text": m.memory.text}
            for m in recalled.memories], "inject": recalled.should_inject, "pack": recalled.memory_pack()}
    if as_json:
        emit_json({"store": url, "stored": stored, "ingest_ms": round(ingest_ms, 1), "searches": results,
                   "routing": routes, "recall": recall, "try": try_commands(settings)})
        return 0
    print(f"memroute demo: stored {stored} memories (en/ja/ko) in {url} as owner {DEMO_OWNER!r} "
          f"in {ingest_ms:.0f} ms (includes loading the embedding model)\n")
    for r in results:
        print(f"[{r['language']}] {r['query']}   ({r['ms']} ms)")
        for h in r["hits"]:
            print(f"   {h['score']:.4f}  {h['text'][:90]}")
        print()
    print(f"Routing a conversation (agents: {demo_catalogue_path()}):")
    for r in routes:
        print(f"   {r['text']!r:48} -> {r['agent'] or 'no agent'} ({r['action']}: {r['reason']})")
    print(f"\nRecall for {recall['text']!r} after {history[0]['text']!r} (あれ is resolved from that turn):")
    for m in recall["memories"]:
        print(f"   {m['score']:.3f} {m['relevance']:6} {m['text'][:80]}")
    if recall["inject"]:
        print("   " + "\n   ".join(str(recall["pack"]).splitlines()))
    else:
        print("   (not put in the prompt: that takes one memory of 'high' relevance or two of 'medium')")
    print("\nTry it yourself (the memories are dated relative to today):")
    for command in try_commands(settings):
        print(f"   {command}")
    return 0


def demo_agents() -> tuple[Agent, ...]:
    """The bundled multilingual demo catalogue (``memroute/data/demo_agents.toml``)."""
    from memroute.routing import load_catalogue

    return load_catalogue(demo_catalogue_path())


def _route_conversation(mem: Memory) -> list[dict[str, Any]]:
    from memroute.routing import ConversationRouter

    router = ConversationRouter(mem, demo_agents(), owner=DEMO_OWNER)
    router.reset("demo-chat")
    out = []
    for text in CONVERSATION:
        decision = router.route(text, "demo-chat")
        out.append({"text": text, "agent": decision.agent.id if decision.agent else None,
                    "action": str(decision.action), "reason": decision.reason})
    # a message no agent is for: below every agent's threshold, the answer is "no agent" (ask the user)
    alone = router.router.route(NO_AGENT, router.agents)
    out.append({"text": NO_AGENT, "agent": alone.agent.id if alone.agent else None,
                "action": "no_route" if alone.no_route else "routed", "reason": alone.reason})
    return out
