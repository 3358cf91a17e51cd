"""The repositories the code-intelligence tools may read, and nothing else.

Every path a caller names is resolved (symbolic links followed) and must land inside one of the
configured roots; a symbolic link inside a root that points outside it is skipped, never followed.
Binary files (a NUL byte in the first 8 KiB), files that are not UTF-8 text and files larger than
``max_file_bytes`` are skipped with a note instead of being read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from memroute.errors import ConfigError, InputError, NotFoundError

MAX_FILE_BYTES = 1_000_000
"""Files larger than this are skipped: generated or vendored code, data, minified bundles."""
MAX_FILES = 50_000
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "env", "dist", "build", "target", "site-packages",
                       "vendor", "third_party"})
"""Directories never walked (besides hidden ones such as ``.git`` or ``.venv``): dependencies and build output."""

LANGUAGES = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".ts": "typescript", ".tsx": "typescript", ".go": "go", ".rs": "rust", ".java": "java",
    ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".cs": "csharp", ".c": "c", ".h": "c", ".cc": "cpp",
    ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".rb": "ruby", ".php": "php", ".swift": "swift",
}
"""Source languages by file extension; every other UTF-8 file is text (searchable, without symbols)."""


@dataclass(frozen=True, slots=True)
class Skipped:
    file: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A readable file: its path, its path relative to its root (POSIX form) and its language."""

    path: str
    rel: str
    language: str
    size: int
    mtime_ns: int


class Workspace:
    """The allowed repository roots. ``resolve`` refuses any path outside them."""

    def __init__(self, roots: Sequence[str | Path], *, max_file_bytes: int = MAX_FILE_BYTES,
                 max_files: int = MAX_FILES) -> None:
        resolved: list[Path] = []
        for root in roots:
            path = Path(root).expanduser().resolve()
            if not path.is_dir():
                raise ConfigError(f"repository root {root} is not a directory; pass an existing folder")
            resolved.append(path)
        if not resolved:
            raise ConfigError("no repository root: give at least one folder the code tools may read")
        self.roots: tuple[Path, ...] = tuple(resolved)
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files

    def root(self, repo: str | Path | None = None) -> Path:
        """The root named by ``repo`` (a root itself, or any folder inside one), or the first root."""
        if repo is None or str(repo) == "":
            return self.roots[0]
        path = self._inside(Path(repo).expanduser(), self.roots[0])
        return next(r for r in self.roots if path == r or path.is_relative_to(r))

    def resolve(self, path: str | Path, root: Path) -> Path:
        """``path`` (relative to ``root``, or absolute) resolved, inside an allowed root, existing."""
        resolved = self._inside(Path(path).expanduser(), root)
        if not resolved.exists():
            raise NotFoundError(f"{path} does not exist in {root}")
        return resolved

    def rel(self, path: Path, root: Path) -> str:
        return path.relative_to(root).as_posix() if path != root else "."

    def _inside(self, path: Path, root: Path) -> Path:
        if "\x00" in str(path):
            raise InputError("a path cannot contain a NUL character")
        resolved = (path if path.is_absolute() else root / path).resolve()
        if not any(resolved == r or resolved.is_relative_to(r) for r in self.roots):
            allowed = ", ".join(str(r) for r in self.roots)
            raise InputError(f"{path} is outside the allowed repository roots ({allowed}); the code tools read "
                             "nothing else")
        return resolved

    def walk(self, root: Path, under: Path | None = None) -> Iterator[SourceFile | Skipped]:
        """Every file below ``under`` (default: the root), sorted, as a readable file or a skip note."""
        start = under or root
        prefix = len(str(root)) + 1
        if start.is_file():
            yield self._check(str(start), str(start)[prefix:], None)
            return
        count = 0
        stack = [str(start)]
        while stack:  # os.scandir, not pathlib: a warm scan of 100k lines is a few milliseconds of stat calls
            folder = stack.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError as exc:
                yield Skipped(folder[prefix:] or ".", f"cannot list: {exc.strerror or exc}")
                continue
            subfolders = []
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if not entry.name.startswith(".") and entry.name not in SKIP_DIRS:
                        subfolders.append(entry.path)
                    continue
                count += 1
                if count > self.max_files:
                    yield Skipped(folder[prefix:] or ".", f"more than {self.max_files:,} files: the rest were not "
                                  "read (narrow the path)")
                    return
                yield self._check(entry.path, entry.path[prefix:], entry)
            stack.extend(reversed(subfolders))

    def _check(self, path: str, rel: str, entry: os.DirEntry[str] | None) -> SourceFile | Skipped:
        try:
            if entry.is_symlink() if entry is not None else os.path.islink(path):
                target = Path(path).resolve()
                if not any(target == r or target.is_relative_to(r) for r in self.roots):
                    return Skipped(rel, "symbolic link to outside the allowed roots: not followed")
            st = entry.stat() if entry is not None else os.stat(path)
        except OSError as exc:
            return Skipped(rel, f"cannot read: {exc.strerror or exc}")
        if not stat.S_ISREG(st.st_mode):
            return Skipped(rel, "not a regular file")
        if st.st_size > self.max_file_bytes:
            return Skipped(rel, f"huge file ({st.st_size:,} bytes > {self.max_file_bytes:,}): not read")
        return SourceFile(path, rel.replace(os.sep, "/"), LANGUAGES.get(os.path.splitext(path)[1].lower(), "text"),
                          st.st_size, st.st_mtime_ns)


def read_text(path: str) -> str:
    """The file's text; raises ``InputError`` saying why it is not text (binary, not UTF-8)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read {os.path.basename(path)}: {exc.strerror or exc}") from None
    if b"\x00" in data[:8192]:
        raise InputError("binary file: not read")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text: not read") from None
