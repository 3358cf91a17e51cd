"""`memroute investigate ...`: a session walked by hand, one process per step, sharing a SQLite file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memroute.cli import main
from tests.test_investigate_sessions import make_repo


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_walk_a_session_by_hand(capsys: pytest.CaptureFixture[str], tmp_path: Path, db_url: str) -> None:
    repo = str(make_repo(tmp_path / "repo"))
    common = ("--store", db_url, "--owner", "carol", "--repo", repo, "--code-cache", str(tmp_path / "cache"))
    start = _json(capsys, "investigate", "start", "Why is an empty password accepted?", *common)
    sid = start["session_id"]
    assert start["intent"] == "INVESTIGATE" and start["phase"] == "FRAME"

    slots = tmp_path / "slots.json"
    slots.write_text(json.dumps({"observed_issue": {"value": "empty password accepted",
                                                    "quote": "empty password accepted"}}), "utf-8")
    code, out, _ = _run(capsys, "investigate", "frame", sid, f"@{slots}", *common)
    assert code == 0 and "phase EXPLORATION" in out and "risk_level: \"LOW\"" in out and out.rstrip().endswith(
        "then call submit_understanding")

    found = _json(capsys, "investigate", "code", "query", "password check", "--session", sid, "--limit", "3",
                  *common)
    assert found["results"][0]["qualname"].startswith("PasswordValidator")
    defs = _json(capsys, "investigate", "code", "find_definitions", "validate", "--kind", "method", *common)
    assert [r["qualname"] for r in defs["results"]] == ["PasswordValidator.validate", "UserValidator.validate"]

    semantic = _json(capsys, "investigate", "submit", sid, "--symbol", "PasswordValidator", "--file",
                     "auth/validators.py", *common)
    assert semantic["phase"] == "SEMANTIC"
    _json(capsys, "investigate", "hypothesize", sid, json.dumps(
        [{"slot": "target_feature", "value": "password validation", "symbols": ["PasswordValidator"]}]), *common)
    ready = _json(capsys, "investigate", "verify", sid, "target_feature",
                  '[{"tool": "get_symbols", "args": {"path": "auth/validators.py"}}]', *common)
    assert ready["verified"] is True and ready["phase"] == "READY"

    shown = _json(capsys, "investigate", "show", sid, *common)
    assert [h["target"] for h in shown["history"]][-1] == "READY"
    listed = _json(capsys, "investigate", "show", *common)
    assert [s["session_id"] for s in listed] == [sid]

    out_file = tmp_path / "log.jsonl"
    code, _, err = _run(capsys, "investigate", "log", "--session", sid, "--out", str(out_file), *common)
    assert code == 0 and "wrote 6 records" in err
    assert [json.loads(line)["step"] for line in out_file.read_text("utf-8").splitlines()] == [
        "start_session", "set_query_frame", "tool", "submit_understanding", "submit_hypotheses", "verify_hypothesis"]

    code, out, _ = _run(capsys, "investigate", "log", "--session", sid, "--phase", "VERIFICATION", *common)
    # the hypotheses left the session in VERIFICATION; their verification moved it on to READY
    assert code == 0 and [json.loads(line)["step"] for line in out.splitlines()] == ["submit_hypotheses"]
    code, out, _ = _run(capsys, "investigate", "log", "--step", "tool", "--risk-level", "LOW", *common)
    assert code == 0 and len(out.splitlines()) == 1
    code, out, _ = _run(capsys, "investigate", "log", "--since", "2999-01-01T00:00:00Z", *common)
    assert code == 0 and out == ""
    code, _, err = _run(capsys, "investigate", "log", "--since", "yesterday", *common)
    assert code == 1 and "not an ISO 8601 time" in err

    code, _, err = _run(capsys, "investigate", "submit", sid, "--symbol", "X", *common)
    assert code == 1 and err.startswith("memroute: error: submit_understanding is not possible in phase READY")
    code, _, err = _run(capsys, "investigate", "code", "get_symbols", "/etc", *common)
    assert code == 1 and "outside the allowed repository roots" in err
    code, _, err = _run(capsys, "investigate", "frame", "no-such-session", "{}", *common)
    assert code == 1 and "no investigation session 'no-such-session' for owner 'carol'" in err
    code, _, err = _run(capsys, "investigate", "frame", sid, "{not json", *common)
    assert code == 1 and "slots is not valid JSON" in err
