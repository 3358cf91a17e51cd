"""`memroute init`: a commented starter catalogue (agents.toml) and settings file (memroute.toml) here."""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

from memroute.cli.common import examples
from memroute.errors import InputError

FILES = (("agents.toml", "demo_agents.toml"), ("memroute.toml", "starter_memroute.toml"))
"""(file written, the packaged file it is copied from)."""

NEXT_STEPS = """next:
  memroute route "Translate 'good morning' to Korean"       # -> translator (agents.toml, this folder)
  memroute route "hi"                                        # -> no agent: below every threshold
  memroute remember "Project X is two weeks late" --session standup
  memroute recall "how is Project X doing?" --pack
  memroute serve                                             # the API, /docs and the console at http://127.0.0.1:8765
edit agents.toml to describe your own agents; memroute.toml holds the settings for this folder."""


def register(sub: Any, groups: dict[str, Any]) -> None:
    del groups
    p = sub.add_parser("init", help="write a commented starter agents.toml and memroute.toml in this folder",
                       description="Write a commented starter agent catalogue (agents.toml: three agents, each "
                       "with a no-agent threshold) and settings file (memroute.toml) into a folder, and print "
                       "what to try next. Existing files are kept unless --force.",
                       epilog=examples("memroute init", "memroute init --dir ~/assistant --force"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default=".", help="the folder to write into (default: the current folder)")
    p.add_argument("--force", action="store_true", help="overwrite agents.toml and memroute.toml if they exist")
    p.set_defaults(handler=_init)


def _init(args: argparse.Namespace) -> int:
    folder = Path(args.dir).expanduser()
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder; create it first (mkdir -p {folder})")
    targets = [(folder / name, source) for name, source in FILES]
    existing = [str(path) for path, _ in targets if path.exists()]
    if existing and not args.force:
        raise InputError(f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                         "nothing was written (--force overwrites)")
    data = resources.files("memroute.data")
    for path, source in targets:
        path.write_text(data.joinpath(source).read_text("utf-8"), encoding="utf-8")
        print(f"wrote {path}")
    print(NEXT_STEPS)
    return 0
