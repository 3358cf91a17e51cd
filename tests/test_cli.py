"""The command line, called in-process through ``main`` (and once as a real subprocess)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memroute.cli import build_parser, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_remember_search_forget(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    code, out, _ = run(capsys, "remember", "プロジェクトXは進捗が遅れている", "--store", db_url, "--owner", "u1")
    assert code == 0
    mid = out.strip()
    code, out, _ = run(capsys, "search", "プロジェクトXの進捗", "--store", db_url, "--owner", "u1", "--json")
    hits = json.loads(out)
    assert hits[0]["id"] == mid and hits[0]["language"] == "ja"
    code, out, _ = run(capsys, "search", "プロジェクトX", "--store", db_url, "--owner", "u2", "--json")
    assert json.loads(out) == []
    code, out, _ = run(capsys, "forget", mid, "--store", db_url, "--owner", "u1", "--json")
    assert json.loads(out) == {"deleted": 1}


def test_import_reports_bad_lines_and_resumes(capsys: pytest.CaptureFixture[str], db_url: str,
                                              tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_bytes(
        b'{"text": "first memory", "id": "a"}\n'
        b'{"text": ""}\n'
        b"not json\n"
        b'{"text": "bad \xff utf8"}\n'
        b'{"session": "chat1", "messages": [{"role": "user", "text": "\xe3\x81\x93\xe3\x82\x93"},'
        b' {"role": "assistant", "text": "hi"}]}\n'
        b'{"text": "second memory", "id": "b", "kind": "fact"}\n'
    )
    code, out, _ = run(capsys, "import", str(f), "--store", db_url, "--owner", "u", "--json", "--batch-size", "1")
    result = json.loads(out)
    assert code == 3  # some lines were rejected
    assert result["stored"] == 3 and result["messages"] == 2
    assert [r["line"] for r in result["rejected"]] == [2, 3, 4]
    assert "UTF-8" in result["rejected"][2]["error"] and "JSON" in result["rejected"][1]["error"]
    # a finished import is not imported again; --again starts over from line 1, and ids make it idempotent
    code, out, _ = run(capsys, "import", str(f), "--store", db_url, "--owner", "u", "--json")
    again = json.loads(out)
    assert code == 0 and again["stored"] == 0 and again["already_imported"]["stored"] == 3
    code, out, _ = run(capsys, "import", str(f), "--store", db_url, "--owner", "u", "--json", "--again")
    assert json.loads(out)["resumed_at_line"] == 1 and json.loads(out)["stored"] == 3
    code, out, _ = run(capsys, "stats", "--store", db_url, "--json")
    assert json.loads(out)["memories"] == 3  # a, b and the conversation's user turn, each once


def test_import_resumes_after_interruption(capsys: pytest.CaptureFixture[str], db_url: str, tmp_path: Path) -> None:
    from memroute import Memory
    from memroute.importing import file_sha256

    f = tmp_path / "big.jsonl"
    f.write_text("".join(json.dumps({"text": f"memory number {i}", "id": f"m{i}"}) + "\n" for i in range(10)))
    with Memory.open(db_url, owner="u") as mem:  # as an import interrupted after line 6 leaves it
        mem.store.put_state("import", f"sha256:{file_sha256(f)}", {"next_line": 7}, "u")
    _, out, _ = run(capsys, "import", str(f), "--store", db_url, "--owner", "u", "--json")
    assert json.loads(out) == {"stored": 4, "messages": 0, "rejected": [], "resumed_at_line": 7,
                               "sha256": file_sha256(f), "already_imported": None}


def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], db_url: str, tmp_path: Path) -> None:
    code, _, err = run(capsys, "remember", "   ", "--store", db_url)
    assert code == 1 and err.startswith("memroute: error:") and err.count("\n") == 1
    code, _, err = run(capsys, "import", str(tmp_path / "missing.jsonl"), "--store", db_url)
    assert code == 1 and "does not exist" in err
    code, _, err = run(capsys, "stats", "--store", "mysql://x")
    assert code == 1 and "unknown store URL" in err


def test_doctor_and_demo(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    code, out, _ = run(capsys, "doctor", "--store", db_url, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and "ja" not in report["checks"]["tokenizer ko"]
    code, out, _ = run(capsys, "demo", "--store", db_url, "--json")
    demo = json.loads(out)
    assert demo["stored"] == 12
    by_query = {s["query"]: s["hits"][0]["text"] for s in demo["searches"]}
    assert "田中" in by_query["budget meeting with Tanaka"]  # cross-lingual
    assert "지난주" in by_query["지난주 회의"]
    assert [(r["agent"], r["action"]) for r in demo["routing"]] == [
        ("translator", "routed"), ("translator", "stayed"), ("calendar", "switched")]
    assert demo["recall"]["memories"][0]["id"] == "demo-05"  # 「あれ」 resolved to プロジェクトX


def test_every_command_is_documented_in_readme() -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text("utf-8")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        nested = [a for a in p._actions if a.dest == "subcommand"]
        names = [f"{name} {s}" for s in nested[0].choices] if nested else [name]  # type: ignore[union-attr]
        for full in names:
            assert re.search(rf"memroute {re.escape(full)}\b", readme), f"README does not document `{full}`"


def test_entry_point_runs(db_url: str) -> None:
    exe = Path(sys.executable).parent / "memroute"
    proc = subprocess.run([str(exe), "stats", "--store", db_url, "--json"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema_version"] >= 1
