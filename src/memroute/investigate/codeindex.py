"""A cache of a repository's files (lines, symbols, references), refreshed by modification time.

The first call on a repository reads and parses every file; later calls only stat the files and
re-read the ones whose size or modification time changed, so the tools stay fast on a 100k-line
repository (figures: ``python -m benchmarks.bench_investigate``).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memroute.errors import InputError
from memroute.investigate.symbols import Parsed, parse_source
from memroute.investigate.workspace import Skipped, SourceFile, Workspace, read_text

MAX_SKIPPED_SHOWN = 20
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class FileEntry:
    source: SourceFile
    text: str
    lines: tuple[str, ...]
    """Split at \\n, \\r\\n and \\r only, as Python numbers lines (``str.splitlines`` also splits at form
    feeds and U+2028, which would shift every line number after them)."""
    starts: tuple[int, ...]
    """Offset in ``text`` where each line starts."""
    parsed: Parsed

    @property
    def rel(self) -> str:
        return self.source.rel


@dataclass(frozen=True, slots=True)
class Scan:
    files: tuple[FileEntry, ...]
    skipped: tuple[Skipped, ...]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a code-intelligence tool found: rows with ``file`` and ``line``, and what it could not read."""

    tool: str
    repo: str
    args: Mapping[str, Any]
    results: tuple[dict[str, Any], ...]
    total: int
    """Rows found before ``limit`` was applied."""
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()
    elapsed_ms: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "repo": self.repo, "args": dict(self.args), "results": list(self.results),
                "total": self.total, "truncated": self.total > len(self.results), **dict(self.extra),
                "notes": list(self.notes), "skipped": [s.to_dict() for s in self.skipped[:MAX_SKIPPED_SHOWN]],
                "skipped_count": len(self.skipped), "elapsed_ms": round(self.elapsed_ms, 2)}

    def summary(self) -> dict[str, Any]:
        """A short form for the decision log: the arguments, the count and the first few locations."""
        return {"tool": self.tool, "args": dict(self.args), "total": self.total,
                "top": [f"{r.get('file')}:{r.get('line')}" + (f" {r['qualname']}" if r.get("qualname") else "")
                        for r in self.results[:5]]}


class CodeIndex:
    """Files of the workspace's repositories, parsed once and kept while they do not change."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._cache: dict[str, tuple[int, int, FileEntry | Skipped]] = {}
        self._lock = threading.Lock()

    def scan(self, root: Path, under: Path | None = None) -> Scan:
        """The readable files below ``under`` (default: all of ``root``) and the ones skipped, with why."""
        files: list[FileEntry] = []
        skipped: list[Skipped] = []
        seen: set[str] = set()
        with self._lock:
            for item in self.workspace.walk(root, under):
                if isinstance(item, Skipped):
                    skipped.append(item)
                    continue
                seen.add(item.path)
                cached = self._cache.get(item.path)
                if cached is not None and cached[0] == item.mtime_ns and cached[1] == item.size:
                    entry = cached[2]
                else:
                    entry = _load(item)
                    self._cache[item.path] = (item.mtime_ns, item.size, entry)
                if isinstance(entry, Skipped):
                    skipped.append(entry)
                else:
                    files.append(entry)
            if under is None:  # forget files that were deleted
                inside = str(root) + os.sep
                for path in [p for p in self._cache if p.startswith(inside) and p not in seen]:
                    del self._cache[path]
        return Scan(tuple(files), tuple(skipped))

    def target(self, repo: str | Path | None, path: str | Path | None) -> tuple[Path, Path | None]:
        """The root of ``repo`` and ``path`` resolved inside it (``None``: the whole repository)."""
        root = self.workspace.root(repo)
        if path is None or str(path) in ("", "."):
            return root, None
        return root, self.workspace.resolve(path, root)


def _load(source: SourceFile) -> FileEntry | Skipped:
    try:
        text = read_text(source.path)
    except InputError as exc:
        return Skipped(source.rel, str(exc))
    lines = _LINE_BREAK.split(text)
    starts = [0, *(m.end() for m in _LINE_BREAK.finditer(text))]
    if lines and lines[-1] == "":
        lines.pop()
        starts.pop()
    return FileEntry(source, text, tuple(lines), tuple(starts), parse_source(text, source.rel, source.language))


def timed_result(tool: str, root: Path, args: Mapping[str, Any], rows: list[dict[str, Any]], limit: int,
                 start: float, skipped: Iterable[Skipped] = (), notes: Iterable[str] = (),
                 extra: Mapping[str, Any] | None = None, total: int | None = None) -> ToolResult:
    """The result of a tool: the first ``limit`` rows, and ``total`` (default: every row) found."""
    return ToolResult(tool, str(root), {k: v for k, v in args.items() if v is not None}, tuple(rows[:limit]),
                      len(rows) if total is None else total, tuple(skipped), tuple(notes),
                      (time.perf_counter() - start) * 1000, extra or {})
