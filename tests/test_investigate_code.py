"""The code-intelligence tools on memroute's own source tree, checked against `ast` and `tokenize`."""

from __future__ import annotations

import ast
import io
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

import memroute
from memroute.investigate import CodeIndex, Workspace
from memroute.investigate import codetools as tools

SRC = Path(memroute.__file__).parent


@pytest.fixture(scope="module")
def index() -> CodeIndex:
    return CodeIndex(Workspace([SRC]))


def _python_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_symbols_match_ast_for_every_file(index: CodeIndex) -> None:
    result = tools.get_symbols(index, limit=1_000_000)
    assert result.total == len(result.results) > 500
    found: dict[str, set[tuple[str, int, str]]] = defaultdict(set)
    for row in result.results:
        if row["kind"] in ("class", "function", "method"):
            found[row["file"]].add((row["name"], row["line"], row["kind"] == "class"))
    for path in _python_files():
        tree = ast.parse(path.read_text("utf-8"))
        expected = {(n.name, n.lineno, isinstance(n, ast.ClassDef)) for n in ast.walk(tree)
                    if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)}
        assert found[path.relative_to(SRC).as_posix()] == expected, path


def test_methods_are_methods_of_their_class(index: CodeIndex) -> None:
    tree = ast.parse((SRC / "memory.py").read_text("utf-8"))
    memory_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Memory")
    methods = {(n.name, n.lineno) for n in memory_class.body if isinstance(n, ast.FunctionDef)}
    rows = tools.get_symbols(index, "memory.py", kind="method").results
    assert {(r["name"], r["line"]) for r in rows if r["qualname"].startswith("Memory.")} == methods
    outline = tools.analyze_structure(index, "memory.py")
    memory_row = next(r for r in outline.results if r["name"] == "Memory")
    assert {(m["name"], m["line"]) for m in memory_row["members"]} == methods
    assert outline.to_dict()["imports"][:2] == ["__future__", "asyncio"]


@pytest.mark.parametrize("name", ["validate_frame", "NotFoundError", "open_store", "RecallOptions"])
def test_definitions_and_references_match_ast_and_tokenize(index: CodeIndex, name: str) -> None:
    definitions = tools.find_definitions(index, name)
    expected_defs = set()
    expected_refs = set()
    for path in _python_files():
        rel = path.relative_to(SRC).as_posix()
        text = path.read_text("utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
                expected_defs.add((rel, node.lineno))
        # References by another method: NAME tokens outside strings and comments, minus `def name` / `class name`.
        previous = ""
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and tok.string == name and previous not in ("def", "class"):
                expected_refs.add((rel, tok.start[0]))
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                previous = tok.string
    assert {(r["file"], r["line"]) for r in definitions.results} == expected_defs
    assert expected_defs
    references = tools.find_references(index, name, limit=100_000)
    assert {(r["file"], r["line"]) for r in references.results} == expected_refs
    for row in references.results:
        assert name in row["text"] or len(row["text"]) >= 199


def test_dotted_definition_and_search(index: CodeIndex) -> None:
    rows = tools.find_definitions(index, "Memory.recall").results
    assert [(r["file"], r["qualname"], r["kind"]) for r in rows] == [("memory.py", "Memory.recall", "method")]
    hits = tools.search_text(index, "def recall(", glob="*.py", limit=100)
    lines = (SRC / "memory.py").read_text("utf-8").splitlines()
    memory_hits = [r for r in hits.results if r["file"] == "memory.py"]
    assert memory_hits and all("def recall(" in lines[r["line"] - 1] for r in memory_hits)
    assert rows[0]["line"] in {r["line"] for r in memory_hits}
    regex = tools.search_text(index, r"^class \w+Error\(", regex=True, case_sensitive=True, glob="errors.py")
    assert {r["text"].split("(")[0] for r in regex.results} >= {"class InputError", "class NotFoundError"}


@pytest.mark.parametrize("needle", ["self.", "Raise", "ログ"])
def test_literal_search_finds_every_line(index: CodeIndex, needle: str) -> None:
    expected = set()
    for path in SRC.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and not any(p.startswith(".") for p in path.parts):
            try:
                lines = io.StringIO(path.read_text("utf-8"), newline=None).readlines()
            except UnicodeDecodeError:
                continue
            expected |= {(path.relative_to(SRC).as_posix(), i) for i, line in enumerate(lines, 1)
                         if needle.lower() in line.lower()}
    result = tools.search_text(index, needle, limit=1_000_000)
    assert {(r["file"], r["line"]) for r in result.results} == expected
    assert all(needle.lower() in r["text"].lower() or len(r["text"]) >= 199 for r in result.results)


def test_structure_of_the_tree(index: CodeIndex) -> None:
    result = tools.analyze_structure(index).to_dict()
    assert result["kind"] == "folder"
    assert result["languages"]["python"]["files"] == len(_python_files())
    assert result["languages"]["python"]["lines"] == sum(len(io.StringIO(p.read_text("utf-8"), newline=None)
                                                             .readlines()) for p in _python_files())
    folders = {r["path"] for r in result["results"]}
    assert {"analysis/", "investigate/", "stores/", "."} <= folders
    assert any(m["module"] == "__future__" for m in result["most_imported"])
