"""Store commands: migrate, copy."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memroute.cli.common import add_common, emit_json, settings_from
from memroute.errors import InputError
from memroute.stores import open_store
from memroute.stores.copy import copy_store


def register(sub: Any, groups: dict[str, Any]) -> None:
    del groups
    p = sub.add_parser("migrate", help="create or upgrade a store's schema (also done on every open)")
    add_common(p)
    p.set_defaults(handler=_migrate)

    p = sub.add_parser("copy", help="copy every memory, message and state from one store to another")
    p.add_argument("--from", dest="source", required=True, help="source store URL")
    p.add_argument("--to", dest="target", required=True, help="target store URL (empty, or a resumed copy)")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_copy)


def _migrate(args: argparse.Namespace) -> int:
    url = settings_from(args).store
    store = open_store(url)
    try:
        st = store.stats()
        owned = store.count(args.owner) if args.owner else None
    finally:
        store.close()
    if args.json:
        emit_json({"store": store.url, "schema_version": st.schema_version, "memories": st.memories,
                   **({"owner": args.owner, "owner_memories": owned} if args.owner else {})})
    else:
        mine = f" ({owned} of owner {args.owner!r})" if args.owner else ""
        print(f"{store.url}: schema version {st.schema_version}, {st.memories} memories{mine}")
    return 0


def _copy(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    if args.source == args.target:
        raise InputError("--from and --to name the same store")
    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    source = open_store(args.source)
    try:
        target = open_store(args.target)
        try:
            total = source.count()
            with tqdm(total=total, unit="mem", disable=not args.progress, file=sys.stderr) as bar:
                report = copy_store(source, target, args.batch_size, progress=bar.update)
        finally:
            target.close()
    finally:
        source.close()
    if args.json:
        emit_json({"memories": report.memories, "messages": report.messages, "state": report.state,
                   "resumed_from": report.resumed_from, "checksum": report.checksum, "verified": True})
    else:
        resumed = f" (resumed after {report.resumed_from})" if report.resumed_from else ""
        print(f"copied {report.memories} memories{resumed}, {report.messages} messages, {report.state} state "
              f"entries; counts and checksum {report.checksum} verified")
    return 0
