"""README.md's fenced code blocks, as the README test reads them.

A block may be preceded (on the line before its fence, blank lines allowed) by an HTML comment that tells
the test how to handle it; the comment is invisible on the rendered page::

    <!-- readme-test: server -->            a shell block that starts a long-running server: started, probed
    <!-- readme-test: needs-server -->      a Python block that talks to the server the last such block started
    <!-- readme-test: skip: REASON -->      not run; REASON says where it is covered instead

Every other block is run by its language: ``python`` (one interpreter for the whole README, in order, so
later blocks use earlier blocks' names), ``sh`` (bash, ``set -e``), ``json`` (an MCP client configuration,
connected to) and ``toml`` (a file named by its first comment line, then read back).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int
    """The line of the opening fence (1-based)."""
    marker: str | None
    """The readme-test comment before the block (``server``, ``needs-server``, ``skip: reason``), or None."""

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.lang})"


def read_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order, with their markers. An unclosed fence is an error."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise ValueError(f"README.md:{start + 1}: a code fence is never closed")
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = _MARKER.match(lines[k]) if k >= 0 else None
        blocks.append(Block(m.group(1) or "text", "\n".join(lines[start + 1 : j]) + "\n", start + 1,
                            mk.group(1) if mk else None))
        i = j + 1
    return blocks
