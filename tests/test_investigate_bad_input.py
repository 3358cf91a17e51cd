"""Bad input to investigations and code tools: clear errors, never a crash, nothing read outside the roots."""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memroute.errors import ConfigError, InputError, NotFoundError, StoreError
from memroute.investigate import CodeIndex, Investigator, Phase, Workspace
from memroute.investigate import codetools as tools
from memroute.stores import open_store
from tests.test_investigate_sessions import make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "repo")
    (root / "blob.bin").write_bytes(b"LoginService\x00\x01\x02" * 10)
    (root / "big.py").write_text("def huge_function():\n    pass\n" + "x = 1\n" * 400_000, "utf-8")
    (root / "latin1.txt").write_bytes("caf\xe9 LoginService".encode("latin-1"))
    (root / "broken.py").write_text("def fine():\n    pass\n\ndef broken(:\n    LoginService\n", "utf-8")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "keys.py").write_text("class LoginService:\n    SECRET = 'hunter2'\n", "utf-8")
    os.symlink(outside / "keys.py", root / "auth" / "linked_keys.py")
    os.symlink(outside, root / "linked_dir")
    return root


@pytest.fixture
def inv(repo: Path, db_url: str) -> Iterator[Investigator]:
    store = open_store(db_url)
    yield Investigator(store, Workspace([repo], max_file_bytes=1_000_000), owner="alice")
    store.close()


def test_unknown_and_foreign_session_ids(inv: Investigator) -> None:
    with pytest.raises(NotFoundError, match="no investigation session 'nope' for owner 'alice'"):
        inv.set_query_frame("nope", {})
    with pytest.raises(InputError, match="session id is empty"):
        inv.get_session("")
    s = inv.start_session("Where is LoginService defined?")
    with pytest.raises(NotFoundError, match="for owner 'bob'"):
        inv.get_session(s.session_id, owner="bob")
    with pytest.raises(NotFoundError):
        inv.find_definitions("LoginService", session=s.session_id, owner="bob")
    assert inv.decision_log(s.session_id, owner="bob") == []


def test_steps_out_of_order(inv: Investigator) -> None:
    s = inv.start_session("Fix the login: an empty password is accepted", "MODIFY")
    with pytest.raises(InputError, match=r"submit_understanding is not possible in phase FRAME.*set_query_frame"):
        inv.submit_understanding(s.session_id, symbols=["LoginService"])
    with pytest.raises(InputError, match="submit_hypotheses is not possible in phase FRAME"):
        inv.submit_hypotheses(s.session_id, [{"slot": "target_feature", "value": "login", "symbols": ["X"]}])
    inv.set_query_frame(s.session_id, {"target_feature": {"value": "login", "quote": "the login"},
                                       "observed_issue": {"value": "empty password is accepted",
                                                          "quote": "an empty password is accepted"}})
    with pytest.raises(InputError, match="verify_hypothesis is not possible in phase EXPLORATION"):
        inv.verify_hypothesis(s.session_id, "target_feature", [{"tool": "find_definitions", "args": {"name": "X"}}])
    done = inv.submit_understanding(s.session_id, symbols=["LoginService", "PasswordValidator", "AuthController"],
                                    entry_points=["login_route"], patterns=["service"],
                                    files=["auth/login_service.py", "auth/validators.py"])
    assert done.phase == Phase.READY
    for step in (lambda: inv.set_query_frame(s.session_id, {}),
                 lambda: inv.submit_understanding(s.session_id, symbols=["LoginService"])):
        with pytest.raises(InputError, match=r"phase READY.*READY"):
            step()
    assert inv.get_session(s.session_id).phase == Phase.READY


def test_bad_slots_and_queries(inv: Investigator) -> None:
    s = inv.start_session("ログインできない")
    framed = inv.set_query_frame(s.session_id, {
        "target_feature": {"value": "ログイン", "quote": "ログインできないときに毎回エラーになるログイン画面の問題"},
        "observed_issue": "できない", "colour": {"value": "red", "quote": "red"}}).to_dict()
    reasons = {r["slot"]: r["reason"] for r in framed["rejected"]}
    assert reasons["target_feature"].startswith("quote is longer than the query")
    assert reasons["observed_issue"].startswith("malformed") and reasons["colour"].startswith("unknown slot")
    assert framed["missing_slots"] == ["target_feature", "trigger_condition", "observed_issue", "desired_action"]
    with pytest.raises(InputError, match="slots must be an object"):
        inv.set_query_frame(s.session_id, ["target_feature"])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown intent 'DELETE'"):
        inv.start_session("remove it", "DELETE")
    with pytest.raises(InputError, match="query is empty"):
        inv.start_session("   ")
    with pytest.raises(InputError, match="at most 10,000"):
        inv.start_session("x" * 10_001)
    with pytest.raises(InputError, match="symbols must be a list"):
        inv.submit_understanding(s.session_id, symbols="LoginService")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown tool 'rm'"):
        inv.submit_understanding(s.session_id, evidence=[{"tool": "rm", "args": {}}])
    with pytest.raises(InputError, match="find_definitions does not take command"):
        inv.submit_understanding(s.session_id, evidence=[{"tool": "find_definitions", "args": {"command": "ls"}}])
    assert inv.get_session(s.session_id).phase == Phase.EXPLORATION  # failed steps changed nothing


def test_paths_outside_the_root_are_refused(inv: Investigator, repo: Path) -> None:
    for path in ("../secret/keys.py", str(repo.parent / "secret"), "/etc/passwd", "auth/linked_keys.py",
                 "linked_dir/keys.py", "auth/../../secret"):
        with pytest.raises(InputError, match="outside the allowed repository roots"):
            inv.get_symbols(path)
    with pytest.raises(InputError, match="outside the allowed repository roots"):
        inv.find_definitions("LoginService", repo=str(repo.parent))
    with pytest.raises(InputError, match="outside the allowed repository roots"):
        inv.start_session("Where is LoginService?", repo="/tmp")
    everywhere = inv.search_text("hunter2")
    assert everywhere.total == 0
    assert {"file": "auth/linked_keys.py", "reason": "symbolic link to outside the allowed roots: not followed"} \
        in [s.to_dict() for s in everywhere.skipped]
    assert [r["file"] for r in inv.find_definitions("LoginService").results] == ["auth/login_service.py"]
    with pytest.raises(ConfigError, match="not a directory"):
        Workspace([repo / "missing"])


def test_binary_huge_and_broken_files(inv: Investigator, repo: Path) -> None:
    result = inv.search_text("LoginService").to_dict()
    skipped = {s["file"]: s["reason"] for s in result["skipped"]}
    assert skipped["blob.bin"] == "binary file: not read"
    assert skipped["big.py"].startswith("huge file (")
    assert skipped["latin1.txt"] == "not UTF-8 text: not read"
    assert not {r["file"] for r in result["results"]} & {"blob.bin", "big.py", "latin1.txt"}
    assert inv.find_definitions("huge_function").total == 0
    with pytest.raises(NotFoundError):
        inv.get_symbols("nope.py")
    broken = inv.get_symbols("broken.py").to_dict()
    assert [(r["name"], r["parser"]) for r in broken["results"]] == [("fine", "regex"), ("broken", "regex")]
    assert "syntax error at line 4" in broken["notes"][0]
    refs = inv.find_references("LoginService").to_dict()
    assert ("broken.py", 5) in {(r["file"], r["line"]) for r in refs["results"]}  # word search in the fallback
    assert inv.analyze_structure("blob.bin").to_dict()["notes"] == ["blob.bin could not be read"]


def test_tool_argument_errors(repo: Path) -> None:
    index = CodeIndex(Workspace([repo]))
    for call, message in [
        (lambda: tools.find_definitions(index, "rm -rf /"), "is not a symbol name"),
        (lambda: tools.find_definitions(index, ""), "name is empty"),
        (lambda: tools.search_text(index, "(", regex=True), "not a valid regular expression"),
        (lambda: tools.search_text(index, ""), "pattern is empty"),
        (lambda: tools.search_text(index, "x" * 501), "at most 500"),
        (lambda: tools.get_symbols(index, limit=0), "limit must be a positive"),
        (lambda: tools.get_symbols(index, "a\x00b"), "NUL"),
        (lambda: tools.search_text(index, r"(\w+)\s+\1", regex=True), "uses a backreference"),
        (lambda: tools.search_text(index, r"(?P<w>\w+) (?P=w)", regex=True), "uses a backreference"),
        (lambda: tools.search_text(index, r"foo(?=bar)", regex=True), "uses a lookahead"),
        (lambda: tools.search_text(index, r"foo(?!bar)", regex=True), "uses a lookahead"),
        (lambda: tools.search_text(index, r"(?<=def )\w+", regex=True), "uses a lookbehind"),
        (lambda: tools.search_text(index, r"(?<!def )\w+", regex=True), "uses a lookbehind"),
        (lambda: tools.search_text(index, r"(?>\w+)", regex=True), "uses an atomic group"),
        (lambda: tools.search_text(index, r"\w++:", regex=True), "uses a possessive repeat"),
        (lambda: tools.search_text(index, r"end\Z", regex=True), r"write \\z"),
    ]:
        with pytest.raises(InputError, match=message):
            call()


@pytest.mark.parametrize("pattern", [r"(a|aa)+$", r"(a+)+$", r"(\w+\s?)+:", r"(?:a*b*)*c"])
def test_patterns_that_backtrack_exponentially_run_in_linear_time(repo: Path, pattern: str) -> None:
    """With a backtracking engine each of these takes time doubling with every character of the 41-character
    line ((a|aa)+$: about 30 s); a linear-time engine answers at once. The search must return (the timeout
    is only a guard against a hang, far above any machine's time for a linear scan)."""
    (repo / "long.txt").write_text("a" * 40 + "!\n" + "word " * 40 + "\n", "utf-8")
    index = CodeIndex(Workspace([repo]))
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(
        tools.search_text(index, pattern, regex=True, glob="long.txt").total), daemon=True)
    worker.start()
    worker.join(2.0)
    assert done == [0], f"{pattern} did not return within 2 s"


def test_regular_expressions_still_find_what_they_match(repo: Path) -> None:
    (repo / "long.txt").write_text("a" * 41 + "\n" + "word " * 40 + "\nキーワード: 値\n", "utf-8")
    index = CodeIndex(Workspace([repo]))
    rows = tools.search_text(index, r"(a|aa)+$", regex=True, glob="long.txt").results
    assert [(r["line"], r["column"]) for r in rows] == [(1, 1)]
    assert [r["line"] for r in tools.search_text(index, r"(wo\w+\s?)+$", regex=True, glob="long.txt").results] == [2]
    found = tools.search_text(index, r"[\p{Katakana}ー]+: (\S+)", regex=True, glob="long.txt").results
    assert [(r["line"], r["column"]) for r in found] == [(3, 1)]
    assert tools.search_text(index, r"^WORD", regex=True, glob="long.txt").total == 1  # case-insensitive
    assert tools.search_text(index, r"^WORD", regex=True, case_sensitive=True, glob="long.txt").total == 0


def test_a_broken_code_index_cache_says_what_to_do(repo: Path, db_url: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    store = open_store(db_url)
    inv = Investigator(store, Workspace([repo]), owner="alice", code_cache=cache)
    inv.query("login")  # builds the cache file
    inv.close()
    for path in cache.glob("code-*.db*"):
        path.write_bytes(b"not a database" * 100)
    broken = Investigator(store, Workspace([repo]), owner="alice", code_cache=cache)
    with pytest.raises(StoreError, match=r"cannot be used .*delete it"):
        broken.query("login")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="cannot create the code index cache"):
        Investigator(store, Workspace([repo]), code_cache=tmp_path / "file" / "sub").query("login")
    store.close()


def test_javascript_by_regular_expressions(repo: Path) -> None:
    index = CodeIndex(Workspace([repo]))
    rows = tools.get_symbols(index, "web/app.js").results
    assert [(r["name"], r["kind"], r["line"]) for r in rows] == [
        ("renderLoginForm", "function", 1), ("LoginView", "class", 5), ("constructor", "method", 6)]
    refs = tools.find_references(index, "LoginView").results
    assert [(r["file"], r["line"]) for r in refs] == [("web/app.js", 2)]


def test_line_numbers_follow_python_line_breaks(tmp_path: Path) -> None:
    root = tmp_path / "lines"
    root.mkdir()
    source = "x = 1\x0c\ny = '\u2028'\r\n\rdef target():\n    return y\n"
    (root / "odd.py").write_bytes(source.encode("utf-8"))
    index = CodeIndex(Workspace([root]))
    row = tools.find_definitions(index, "target").results[0]
    assert row["line"] == 4 == next(n.lineno for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
    assert [(r["line"], r["text"]) for r in tools.search_text(index, "return").results] == [(5, "return y")]
    with pytest.raises(InputError, match="cannot contain a line break"):
        tools.search_text(index, "a\nb")
