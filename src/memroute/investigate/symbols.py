"""Symbols and references of one source file: Python through its syntax tree, other languages by rules.

Python (the ``ast`` module): classes, functions and methods (nested ones with a dotted ``qualname``),
module- and class-level variables, the modules imported, and every reference to a name (a ``Name`` that
is read or deleted, an attribute, an imported name), so that references in strings and comments are
not counted. A Python file that does not parse, and files in other languages, fall back to regular
expressions over the lines that define functions, classes and types; their references are found by
whole-word search.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_DOC_CHARS = 200
_SIG_CHARS = 240


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    qualname: str
    kind: str
    """class, function, method, variable, or a language's own word (struct, interface, trait, type, ...)."""
    file: str
    line: int
    end_line: int
    signature: str
    doc: str
    language: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "qualname": self.qualname, "kind": self.kind, "file": self.file,
                "line": self.line, "end_line": self.end_line, "signature": self.signature, "doc": self.doc}


@dataclass(frozen=True, slots=True)
class Parsed:
    symbols: tuple[Symbol, ...]
    references: Mapping[str, tuple[int, ...]] | None
    """Lines referring to each name (from the syntax tree); ``None``: search words instead."""
    imports: tuple[str, ...]
    parser: str
    """``ast``, ``regex`` (fallback) or ``none`` (plain text)."""
    note: str | None = None


def parse_source(text: str, rel: str, language: str) -> Parsed:
    if language == "python":
        try:
            tree = ast.parse(text, filename=rel)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            line = getattr(exc, "lineno", None)
            where = f" at line {line}" if line else ""
            found = _regex_symbols(text, rel, language)
            return Parsed(found, None, (), "regex", f"Python syntax error{where}: symbols found by regular "
                          "expressions, references by word search")
        return _python(tree, rel)
    if language in _PATTERNS:
        return Parsed(_regex_symbols(text, rel, language), None, (), "regex")
    return Parsed((), None, (), "none")


# ------------------------------------------------------------------------------------------ Python
def _python(tree: ast.Module, rel: str) -> Parsed:
    symbols: list[Symbol] = []
    stack: list[tuple[ast.AST, str, str]] = [(tree, "", "module")]  # node, qualname prefix, container kind
    while stack:
        node, prefix, container = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                qual = f"{prefix}.{child.name}" if prefix else child.name
                if isinstance(child, ast.ClassDef):
                    kind = "class"
                else:
                    kind = "method" if container == "class" else "function"
                symbols.append(Symbol(child.name, qual, kind, rel, child.lineno, child.end_lineno or child.lineno,
                                      _signature(child), _doc(child), "python"))
                stack.append((child, qual, "class" if kind == "class" else "function"))
            elif container in ("module", "class") and isinstance(child, ast.Assign | ast.AnnAssign):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        qual = f"{prefix}.{target.id}" if prefix else target.id
                        symbols.append(Symbol(target.id, qual, "variable", rel, child.lineno,
                                              child.end_lineno or child.lineno,
                                              _clip(ast.unparse(child).splitlines()[0]), "", "python"))
            elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                stack.append((child, prefix, container))  # definitions under `if TYPE_CHECKING:`, `try:`, ...
    refs: dict[str, set[int]] = {}
    imports: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            refs.setdefault(node.id, set()).add(node.lineno)
        elif isinstance(node, ast.Attribute):
            refs.setdefault(node.attr, set()).add(node.end_lineno or node.lineno)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.ImportFrom):
                imports.append("." * node.level + (node.module or ""))
            else:
                imports.extend(alias.name for alias in node.names)
            for alias in node.names:  # each name on its own line in a parenthesised import
                for name in [*alias.name.split("."), *([alias.asname] if alias.asname else [])]:
                    refs.setdefault(name, set()).add(alias.lineno)
    symbols.sort(key=lambda s: (s.line, s.qualname))
    return Parsed(tuple(symbols), {k: tuple(sorted(v)) for k, v in refs.items()}, tuple(dict.fromkeys(imports)),
                  "ast")


def _signature(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(b) for b in [*node.bases, *node.keywords])
        return _clip(f"class {node.name}({bases})" if bases else f"class {node.name}")
    head = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return _clip(f"{head} {node.name}({ast.unparse(node.args)}){returns}")


def _doc(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    doc = ast.get_docstring(node, clean=True) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")[:_DOC_CHARS]


def _clip(text: str) -> str:
    return text if len(text) <= _SIG_CHARS else text[:_SIG_CHARS - 1] + "…"


# ------------------------------------------------------------------------------- other languages
_C_FAMILY_METHOD = (r"^\s*(?:(?:public|private|protected|internal|static|final|abstract|synchronized|override|"
                    r"virtual|async|open|sealed|extern|inline|const|unsafe|native)\s+)*[\w<>\[\],.?*&:]+\s+"
                    r"(?P<name>[A-Za-z_]\w*)\s*\([^;{}]*\)\s*(?:const\s*)?(?:throws\s+[\w.,\s]+)?\s*\{?\s*$")
_PATTERNS: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "python": (("class", re.compile(r"^\s*class\s+(?P<name>[A-Za-z_]\w*)")),
               ("function", re.compile(r"^\s*(?:async\s+)?def\s+(?P<name>[A-Za-z_]\w*)"))),
    "javascript": (
        ("class", re.compile(r"^\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?class\s+(?P<name>[A-Za-z_$][\w$]*)")),
        ("function", re.compile(r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*"
                                r"(?P<name>[A-Za-z_$][\w$]*)")),
        ("function", re.compile(r"^\s*(?:export\s+)?(?:const|let|var)\s+(?P<name>[A-Za-z_$][\w$]*)\s*(?::[^=]+)?="
                                r"\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>)")),
        ("method", re.compile(r"^\s+(?:(?:public|private|protected|static|async|readonly|override|get|set)\s+)*"
                              r"(?!(?:if|for|while|switch|catch|function|return|else|do|with)\b)"
                              r"(?P<name>[A-Za-z_$][\w$]*)\s*\([^)]*\)\s*(?::\s*[^{]+)?\{\s*$")),
        ("type", re.compile(r"^\s*(?:export\s+)?(?:declare\s+)?(?:interface|type|enum)\s+(?P<name>[A-Za-z_$][\w$]*)")),
    ),
    "go": (("function", re.compile(r"^func\s+(?:\([^)]*\)\s*)?(?P<name>[A-Za-z_]\w*)")),
           ("type", re.compile(r"^type\s+(?P<name>[A-Za-z_]\w*)\s+"))),
    "rust": (("function", re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
                                     r"(?:extern\s+\"\w+\"\s+)?fn\s+(?P<name>[A-Za-z_]\w*)")),
             ("type", re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|type|union)\s+"
                                 r"(?P<name>[A-Za-z_]\w*)"))),
    "ruby": (("class", re.compile(r"^\s*(?:class|module)\s+(?P<name>[A-Z]\w*(?:::\w+)*)")),
             ("function", re.compile(r"^\s*def\s+(?:self\.)?(?P<name>[A-Za-z_]\w*[?!=]?)"))),
    "php": (("class", re.compile(r"^\s*(?:abstract\s+|final\s+)?(?:class|interface|trait|enum)\s+(?P<name>\w+)")),
            ("function", re.compile(r"^\s*(?:(?:public|private|protected|static|abstract|final)\s+)*function\s+"
                                    r"&?(?P<name>\w+)"))),
    "swift": (("class", re.compile(r"^\s*(?:(?:public|private|internal|open|final|fileprivate)\s+)*"
                                   r"(?:class|struct|enum|protocol|extension|actor)\s+(?P<name>\w+)")),
              ("function", re.compile(r"^\s*(?:(?:public|private|internal|open|static|override|final|"
                                      r"fileprivate|mutating)\s+)*func\s+(?P<name>\w+)"))),
    "kotlin": (("class", re.compile(r"^\s*(?:(?:public|private|internal|open|abstract|data|sealed|enum|inner)\s+)*"
                                    r"(?:class|interface|object)\s+(?P<name>\w+)")),
               ("function", re.compile(r"^\s*(?:(?:public|private|internal|open|override|suspend|inline|"
                                       r"protected)\s+)*fun\s+(?:<[^>]+>\s+)?(?:[\w.]+\.)?(?P<name>\w+)"))),
    "scala": (("class", re.compile(r"^\s*(?:(?:case|abstract|sealed|final)\s+)*(?:class|trait|object)\s+"
                                   r"(?P<name>\w+)")),
              ("function", re.compile(r"^\s*(?:(?:override|private|protected|final)\s+)*def\s+(?P<name>\w+)"))),
}
_CLASS_LIKE = re.compile(r"^\s*(?:(?:public|private|protected|internal|static|final|abstract|sealed|partial)\s+)*"
                         r"(?:class|interface|enum|record|struct)\s+(?P<name>[A-Za-z_]\w*)")
_KEYWORDS = frozenset({"if", "for", "while", "switch", "catch", "return", "else", "new", "sizeof", "do", "case"})
for _lang in ("java", "csharp", "c", "cpp"):
    _PATTERNS[_lang] = (("class", _CLASS_LIKE), ("function", re.compile(_C_FAMILY_METHOD)))


def _regex_symbols(text: str, rel: str, language: str) -> tuple[Symbol, ...]:
    out: list[Symbol] = []
    for number, line in enumerate(text.splitlines(), 1):
        if len(line) > 1000:
            continue
        for kind, pattern in _PATTERNS[language]:
            match = pattern.match(line)
            if match and match["name"] not in _KEYWORDS:
                name = match["name"]
                out.append(Symbol(name.split("::")[-1], name, kind, rel, number, number, _clip(line.strip()), "",
                                  language))
                break
    return tuple(out)
