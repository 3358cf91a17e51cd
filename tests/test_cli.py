"""The command line, called in-process through ``main`` (and once as a real subprocess)."""

from __future__ import annotations

import json
import os
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
    run(capsys, "remember", "a first memory", "--store", db_url)
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
        ("translator", "routed"), ("translator", "stayed"), ("calendar", "switched"), (None, "no_route")]
    assert demo["recall"]["memories"][0]["id"] == "demo-05"  # 「あれ」 resolved to プロジェクトX
    assert demo["recall"]["inject"] and "プロジェクトX" in demo["recall"]["pack"]  # on any day: dates are relative


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
    subprocess.run([str(exe), "remember", "one memory", "--store", db_url], capture_output=True, check=True)
    proc = subprocess.run([str(exe), "stats", "--store", db_url, "--json"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema_version"] >= 1


def test_init_writes_a_starter_catalogue_and_the_demo_commands_work_when_pasted(tmp_path: Path) -> None:
    """`memroute init` in an empty folder, then `memroute demo`: every "try it yourself" line it prints runs
    as pasted (in a shell, on today's date), and the recall one gives a memory pack."""
    memroute = Path(sys.executable).parent / "memroute"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMROUTE_")}
    env["HOME"] = str(tmp_path)
    init = subprocess.run([str(memroute), "init"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert init.returncode == 0, init.stderr
    assert "memroute route" in init.stdout and (tmp_path / "agents.toml").is_file()
    # the next steps it prints work when pasted (all but `memroute serve`, which the README test runs)
    steps = [line.split("#")[0].strip() for line in init.stdout.splitlines() if line.startswith("  memroute ")]
    outputs = {}
    for step in steps:
        if step != "memroute serve":
            done = subprocess.run(["bash", "-c", step], cwd=tmp_path, env=dict(env, PATH=f"{memroute.parent}:"
                                  f"{env['PATH']}"), capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, (step, done.stderr)
            outputs[step] = done.stdout
    assert len(outputs) == 4
    assert [o.split("\t")[0] for o in outputs.values() if "confidence" in o] == ["translator", "(no route)"]
    assert "[EPISODE_EVIDENCE]" in outputs['memroute recall "how is Project X doing?" --pack']
    again = subprocess.run([str(memroute), "init"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 1 and "--force" in again.stderr  # nothing is overwritten silently
    demo = subprocess.run([str(memroute), "demo", "--store", "sqlite:///demo.db"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    tries = demo.stdout.split("Try it yourself", 1)[1].splitlines()[1:]
    commands = [line.strip() for line in tries if line.strip()]
    assert len(commands) == 3
    outputs = []
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    assert "[EPISODE_EVIDENCE]" in outputs[0] and "プロジェクトX" in outputs[0]  # recall, with a pack
    assert "田中" in outputs[1]  # search: the budget meeting, across languages
    assert outputs[2].startswith("(no route)")  # "hi" -> no agent


def test_demo_memories_are_dated_relative_to_now() -> None:
    from datetime import datetime, timedelta

    from memroute.cli.demo import demo_items
    from memroute.types import as_utc

    for now in ("2026-11-20T10:00:00+00:00", "2027-03-01T08:00:00+00:00", "2031-07-13T23:00:00+00:00"):
        at = as_utc(now)
        assert at is not None
        items = {i["id"]: datetime.fromisoformat(i["occurred_at"]) for i in demo_items(now)}
        assert max(items.values()) <= at  # nothing in the future
        assert at - min(items.values()) < timedelta(days=35)
        monday = (at - timedelta(days=at.weekday())).date()
        # the Project X memory is always in "last week", so 「先週のあれ」 finds it on any day
        assert monday - timedelta(days=7) <= items["demo-05"].date() < monday


def test_read_only_commands_never_create_a_store(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (["stats"], ["search", "x"], ["recall", "x"], ["stats", "--owner", "alice"]):
        code, _, err = run(capsys, *argv, "--store", "sqlite:///home/me/memroute.db")
        assert code == 1 and "no store at" in err and "did you mean sqlite:////home/me/memroute.db?" in err
    code, out, _ = run(capsys, "doctor", "--store", "sqlite:///not-yet-here/x.db")
    assert code == 0 and "no store at" in out  # not yet created: fine for a new installation
    # a command that writes refuses a path that looks like a mistyped absolute one, before creating anything
    code, _, err = run(capsys, "remember", "a note", "--store", "sqlite:///home/me/memroute.db")
    assert code == 1 and "did you mean sqlite:////home/me/memroute.db?" in err
    assert list(tmp_path.iterdir()) == []  # no file, no folder


def test_mistyped_options_get_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["recall", "--sesion", "s1", "what about it?"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--sesion: did you mean --session?" in err and "usage: memroute recall" in err
    with pytest.raises(SystemExit):
        main(["stats", "--ownr", "alice"])
    assert "did you mean --owner?" in capsys.readouterr().err


def test_every_command_has_examples_and_owner_where_a_store_is_read() -> None:
    from memroute.cli import commands

    parser = build_parser()
    for name, command in commands(parser):
        help_text = command.format_help()
        assert "\nexamples:\n  memroute " in help_text, f"memroute {name} --help has no example"
        options = {o for action in command._actions for o in action.option_strings}
        if "--store" in options and not name.startswith(("bench", "eval", "demo")):  # demo: always owner demo
            assert "--owner" in options, f"memroute {name} reads a store but takes no --owner"


def test_recall_trace_in_text(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    run(capsys, "remember", "Project X is two weeks late", "--store", db_url)
    code, out, _ = run(capsys, "recall", "how is Project X doing?", "--store", db_url, "--trace")
    assert code == 0 and "\ntrace:\n" in out and '"queries"' in out and '"candidates"' in out


def test_an_interrupted_import_says_it_can_be_resumed(capsys: pytest.CaptureFixture[str], db_url: str,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memroute import Memory

    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps({"text": f"memory number {i}", "id": f"m{i}"}) + "\n" for i in range(6)))
    calls = []
    real = Memory.records

    def stop_on_second(self: Memory, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the second batch is prepared
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Memory, "records", stop_on_second)
    code, _, err = run(capsys, "import", str(f), "--store", db_url, "--batch-size", "2", "--progress")
    assert code == 130
    assert "interrupted" in err and "2 memories stored so far are kept" in err
    assert "Run the same command again to resume at line 3" in err
    assert "import:" in err and "/6" in err  # the progress bar has the total


def test_mcp_with_a_missing_catalogue_stops_with_one_line(capsys: pytest.CaptureFixture[str], db_url: str,
                                                          tmp_path: Path) -> None:
    code, _, err = run(capsys, "mcp", "--store", db_url, "--owner", "me", "--agents", str(tmp_path / "agents.toml"))
    assert code == 1 and err.count("\n") == 1 and "does not exist" in err and "memroute init" in err
