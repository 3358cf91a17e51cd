"""The code-intelligence tools of seed 002 over a local repository, with file and line in every result.

``find_definitions`` (where a name is defined), ``find_references`` (where it is used), ``search_text``
(plain or regular-expression search), ``get_symbols`` (the symbols of a file or folder) and
``analyze_structure`` (the outline of a file, or the layout of a folder). Every path is checked against
the workspace's allowed roots; skipped files (binary, huge, not UTF-8, links leaving the roots) are
listed with the reason.
"""

from __future__ import annotations

import bisect
import fnmatch
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 has no type hints

from memroute.errors import InputError
from memroute.investigate.codeindex import CodeIndex, FileEntry, ToolResult, timed_result

MAX_PATTERN_CHARS = 500
_LINE_CHARS = 200
_NAME = re.compile(r"^[^\W\d][\w$]*(?:(?:\.|::)[^\W\d][\w$]*)*[?!]?$")


def _name(value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError("name is empty: give a function, class or variable name (e.g. LoginService.authenticate)")
    name = value.strip().removesuffix("()")
    if len(name) > 200 or not _NAME.match(name):
        raise InputError(f"{value[:80]!r} is not a symbol name: letters, digits and _ joined by dots "
                         "(LoginService.authenticate); to search any text use search_text")
    return name


def _re2(pattern: str, case_sensitive: bool, multiline: bool = False) -> Any:
    """``pattern`` compiled by RE2, which matches in time linear in the text (no backtracking), so no pattern
    can hold the tool: ``(a|aa)+$`` or ``(\\w+\\s?)+:`` answer at once on any line. RE2 has no
    backreferences, lookaround, atomic groups or possessive repeats; those are refused with a clear error."""
    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.log_errors = False  # the caller gets the error; nothing on stderr
    try:
        return re2.compile(("(?m)" if multiline else "") + pattern, options)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else exc
        reason = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        lacks = next((what for marks, what in _RE2_LACKS if re.search(marks, reason)), None)
        if lacks is not None:
            raise InputError(f"{pattern[:80]!r} uses {lacks}, which the regular-expression engine (RE2, linear "
                             f"time) does not have ({reason}); rewrite the pattern without it, or pass "
                             "regex=false to search the text as is") from None
        raise InputError(f"not a valid regular expression: {reason} (RE2 syntax; pass regex=false to search the "
                         "text as is)") from None


_RE2_LACKS = (
    (r"escape sequence: \\[1-9]|operator: \(\?P=?$", "a backreference"),  # \1, (?P=name)
    (r"\(\?[=!]", "a lookahead"),
    (r"\(\?<[=!]", "a lookbehind"),
    (r"\(\?>", "an atomic group"),
    (r"repetition operator: [*+?}]\+", "a possessive repeat"),
    (r"escape sequence: \\Z", r"\Z (write \z for the end of the text)"),
)
"""Constructs of Python's ``re`` that RE2 refuses: what its error message shows, and what to call them."""


def _limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < 1:
        raise InputError(f"limit must be a positive whole number, got {limit!r}")
    return limit


def _line(entry: FileEntry, number: int) -> str:
    text = entry.lines[number - 1].strip() if 0 < number <= len(entry.lines) else ""
    return text if len(text) <= _LINE_CHARS else text[:_LINE_CHARS - 1] + "…"


def find_definitions(index: CodeIndex, name: str, *, repo: str | None = None, path: str | None = None,
                     kind: str | None = None, limit: int = 50) -> ToolResult:
    """Where ``name`` is defined: a bare name (``authenticate``) or a dotted one (``LoginService.authenticate``)."""
    start = time.perf_counter()
    wanted = _name(name).replace("::", ".")
    last = wanted.rsplit(".", 1)[-1]
    root, under = index.target(repo, path)
    scan = index.scan(root, under)
    rows: list[dict[str, Any]] = []
    names: set[str] = set()
    for entry in scan.files:
        for sym in entry.parsed.symbols:
            names.add(sym.name)
            if sym.name != last or (kind and sym.kind != kind):
                continue
            if "." in wanted and sym.qualname != wanted and not sym.qualname.endswith("." + wanted):
                continue
            rows.append({**sym.to_dict(), "language": sym.language, "parser": entry.parsed.parser})
    notes = []
    if not rows:
        lower = last.lower()
        close = sorted(n for n in names if n.lower() == lower or (len(lower) >= 4 and lower in n.lower()))[:8]
        notes.append(f"no definition of {wanted!r}" + (f"; similar names: {', '.join(close)}" if close else ""))
    return timed_result("find_definitions", root, {"name": name, "path": path, "kind": kind}, rows, _limit(limit),
                        start, scan.skipped, notes)


def find_references(index: CodeIndex, name: str, *, repo: str | None = None, path: str | None = None,
                    limit: int = 200) -> ToolResult:
    """Where ``name`` is used: from the syntax tree for Python (not in strings or comments), by whole-word
    search in other source files; definitions are not references."""
    start = time.perf_counter()
    last = _name(name).replace("::", ".").rsplit(".", 1)[-1]
    word = re.compile(rf"(?<![\w$]){re.escape(last)}(?![\w$])")
    root, under = index.target(repo, path)
    scan = index.scan(root, under)
    rows: list[dict[str, Any]] = []
    files = 0
    for entry in scan.files:
        parsed = entry.parsed
        if parsed.parser == "none":
            continue
        if parsed.references is not None:
            lines: list[int] = list(parsed.references.get(last, ()))
        else:
            defined = {s.line for s in parsed.symbols if s.name == last}
            lines = [i for i, text in enumerate(entry.lines, 1) if i not in defined and word.search(text)]
        files += bool(lines)
        rows.extend({"file": entry.rel, "line": n, "text": _line(entry, n)} for n in lines)
    notes = [] if rows else [f"no reference to {last!r} in source files"]
    return timed_result("find_references", root, {"name": name, "path": path}, rows, _limit(limit), start,
                        scan.skipped, notes, {"files": files})


def search_text(index: CodeIndex, pattern: str, *, repo: str | None = None, path: str | None = None,
                regex: bool = False, case_sensitive: bool = False, glob: str | None = None,
                limit: int = 100) -> ToolResult:
    r"""Lines matching ``pattern`` (literal text, or with ``regex`` a regular expression in RE2 syntax, matched
    in linear time: Perl's syntax without backreferences or lookaround; ``\w`` and ``\d`` are ASCII,
    ``\p{L}`` any letter) in every text file, optionally only files whose path matches ``glob``
    (``*.py``, ``src/**/auth*``)."""
    start = time.perf_counter()
    if not isinstance(pattern, str) or not pattern:
        raise InputError("pattern is empty: give the text to search for")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(f"pattern has {len(pattern)} characters; at most {MAX_PATTERN_CHARS}")
    if not regex and ("\n" in pattern or "\r" in pattern):
        raise InputError("a literal pattern is searched line by line: it cannot contain a line break")
    if regex:
        compiled = _re2(pattern, case_sensitive)
        # A whole-file search first skips the files without a match (most of them); `^` and `$` keep their
        # per-line meaning in multi-line mode. \A and \z could differ between the two: no skip.
        whole = None if re.search(r"\\[Az]", pattern) else _re2(pattern, case_sensitive, multiline=True)
    else:
        compiled = whole = re.compile(re.escape(pattern), 0 if case_sensitive else re.IGNORECASE)
    root, under = index.target(repo, path)
    scan = index.scan(root, under)
    hits: list[tuple[FileEntry, int, int]] = []
    for entry in scan.files:
        if glob and not (fnmatch.fnmatch(entry.rel, glob) or fnmatch.fnmatch(Path(entry.rel).name, glob)):
            continue
        if whole is not None and whole.search(entry.text) is None:
            continue
        if not regex:  # a literal cannot span lines: find it in the whole text, one row per line
            last = 0
            for match in compiled.finditer(entry.text):
                number = bisect.bisect_right(entry.starts, match.start())
                if number != last:
                    last = number
                    hits.append((entry, number, match.start() - entry.starts[number - 1] + 1))
            continue
        for number, text in enumerate(entry.lines, 1):
            found = compiled.search(text)
            if found:
                hits.append((entry, number, found.start() + 1))
    limit = _limit(limit)
    rows = [{"file": e.rel, "line": n, "column": c, "text": _line(e, n)} for e, n, c in hits[:limit]]
    return timed_result("search_text", root, {"pattern": pattern, "regex": regex or None, "glob": glob,
                                              "path": path}, rows, limit, start, scan.skipped, total=len(hits))


def get_symbols(index: CodeIndex, path: str | None = None, *, repo: str | None = None, kind: str | None = None,
                limit: int = 500) -> ToolResult:
    """The classes, functions, methods and variables defined in a file or below a folder, in file order."""
    start = time.perf_counter()
    root, under = index.target(repo, path)
    scan = index.scan(root, under)
    rows = [{**s.to_dict(), "language": s.language, "parser": e.parsed.parser}
            for e in scan.files for s in e.parsed.symbols if not kind or s.kind == kind]
    notes = [f"{e.rel}: {e.parsed.note}" for e in scan.files if e.parsed.note]
    if under is not None and under.is_file() and scan.files and scan.files[0].parsed.parser == "none":
        notes.append(f"{scan.files[0].rel} is not source code in a known language: no symbols")
    return timed_result("get_symbols", root, {"path": path, "kind": kind}, rows, _limit(limit), start, scan.skipped,
                        notes)


def analyze_structure(index: CodeIndex, path: str | None = None, *, repo: str | None = None,
                      limit: int = 200) -> ToolResult:
    """A file's outline (classes with their methods, functions, imports), or a folder's layout (files and
    lines per language and per sub-folder, entry points, the most imported modules)."""
    start = time.perf_counter()
    root, under = index.target(repo, path)
    scan = index.scan(root, under)
    args = {"path": path}
    if under is not None and under.is_file():
        if not scan.files:
            return timed_result("analyze_structure", root, args, [], limit, start, scan.skipped,
                                [f"{path} could not be read"])
        entry = scan.files[0]
        rows = []
        for sym in entry.parsed.symbols:
            if sym.kind == "method" or (sym.kind != "class" and "." in sym.qualname):
                continue
            row = {"name": sym.name, "kind": sym.kind, "file": entry.rel, "line": sym.line, "end_line": sym.end_line,
                   "signature": sym.signature, "doc": sym.doc}
            if sym.kind == "class":
                row["members"] = [{"name": m.name, "kind": m.kind, "line": m.line} for m in entry.parsed.symbols
                                  if m.qualname.startswith(sym.qualname + ".") and m.qualname.count(".") ==
                                  sym.qualname.count(".") + 1]
            rows.append(row)
        extra = {"kind": "file", "language": entry.source.language, "lines": len(entry.lines),
                 "parser": entry.parsed.parser, "imports": list(entry.parsed.imports)}
        notes = [entry.parsed.note] if entry.parsed.note else []
        return timed_result("analyze_structure", root, args, rows, _limit(limit), start, scan.skipped, notes, extra)
    base_rel = "" if under is None or under == root else index.workspace.rel(under, root)
    languages: Counter[str] = Counter()
    lines_by_language: Counter[str] = Counter()
    folders: dict[str, dict[str, int]] = {}
    imports: Counter[str] = Counter()
    entry_points: list[dict[str, Any]] = []
    for entry in scan.files:
        lang = entry.source.language
        languages[lang] += 1
        lines_by_language[lang] += len(entry.lines)
        inside = entry.rel[len(base_rel) + 1:].split("/") if base_rel else entry.rel.split("/")
        top = inside[0] if len(inside) > 1 else "."
        info = folders.setdefault(top, {"files": 0, "lines": 0, "symbols": 0})
        info["files"] += 1
        info["lines"] += len(entry.lines)
        info["symbols"] += len(entry.parsed.symbols)
        imports.update(entry.parsed.imports)
        if lang == "python":
            main = next((i for i, t in enumerate(entry.lines, 1) if t.startswith("if __name__ ==")), None)
            if main is not None or entry.rel.endswith("__main__.py"):
                entry_points.append({"file": entry.rel, "line": main or 1})
    rows = [{"path": name if name == "." else f"{name}/", **info} for name, info in sorted(folders.items())]
    extra = {"kind": "folder", "files": len(scan.files), "lines": sum(lines_by_language.values()),
             "languages": {k: {"files": v, "lines": lines_by_language[k]} for k, v in languages.most_common()},
             "entry_points": entry_points[:50], "most_imported": [{"module": m, "files": n}
                                                                   for m, n in imports.most_common(15)]}
    return timed_result("analyze_structure", root, args, rows, _limit(limit), start, scan.skipped, (), extra)
