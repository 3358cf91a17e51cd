"""Bad input: a valid analysis or a clear error, never a crash. Also the CLI."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memroute.analysis import MAX_CHARS, analyze
from memroute.cli import main
from memroute.errors import InputError
from memroute.types import Message

NOW = datetime(2025, 3, 12, 15, 0, tzinfo=UTC)


@pytest.mark.parametrize("text", ["", "   ", "🙂🎉🔥", "\x00\x01\x1b[31mred\x7f", "a\u200bb\ufeff", "ｔｅｓｔ　全角",
                                  "Deploy は終わった? 배포 완료 🙂", "\U0010ffff\ud7ff", "?" * 500])
def test_odd_text_gives_an_analysis(text: str) -> None:
    a = analyze(text, now=NOW)
    assert a.to_dict()["language"] in ("en", "ja", "ko", "und")
    json.dumps(a.to_dict(), ensure_ascii=False)


def test_empty_text() -> None:
    a = analyze("", now=NOW)
    assert a.language == "und" and a.parts == [] and a.keywords == [] and not a.needs_context


def test_very_long_text_is_cut_not_crashed() -> None:
    text = ("It was yesterday that プロジェクトX の締切 and 그거 happened. " * 2000)[:100_000]
    a = analyze(text, now=NOW)
    assert len(a.text) <= MAX_CHARS and a.time_range is not None


def test_history_of_messages_and_dicts() -> None:
    history = [Message("s", "user", "Translate 'Hello' to Japanese", NOW),
               {"role": "assistant", "content": "こんにちは"}]
    assert analyze("Now to French", history, NOW).references[0].resolved == "Translate 'Hello' to Japanese"


@pytest.mark.parametrize(("history", "message"), [
    ([{"role": "user"}], "recent_messages[0] has no 'text'"),
    ([{"role": "user", "text": 3}], "int 'text'"),
    (["just a string"], "recent_messages[0] is a str"),
    ([{"role": 1, "text": "hi"}], "int 'role'"),
    ("not a list", "not a single str"),
    (42, "not int"),
])
def test_malformed_history_is_a_clear_input_error(history: object, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        analyze("it", history, NOW)  # type: ignore[arg-type]


def test_bad_text_and_now() -> None:
    with pytest.raises(InputError):
        analyze(None, now=NOW)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        analyze("x", now="yesterday-ish")
    with pytest.raises(InputError):
        analyze("x", now=12)  # type: ignore[arg-type]


def test_cli_analyze_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    hist = tmp_path / "h.jsonl"
    hist.write_text('{"role": "user", "text": "Translate \'Hello\' to Japanese"}\n', encoding="utf-8")
    code = main(["analyze", "Now to French", "--history", str(hist), "--now", "2025-03-12T15:00:00Z", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["continuation"] == "follow_up" and out["needs_context"] is True
    assert out["references"][0] == {"type": "ellipsis", "surface": "Now to French",
                                    "resolved": "Translate 'Hello' to Japanese"}
    assert {"language", "query_type", "time_range", "keywords", "parts"} <= out.keys()
    code = main(["analyze", "先週の議事録", "--now", "2025-03-12T15:00:00+09:00", "--json"])
    tr = json.loads(capsys.readouterr().out)["time_range"]
    assert tr["start"] == "2025-03-03T00:00:00+09:00"  # --now keeps its offset: the user's own week


def test_cli_bad_history_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    assert main(["analyze", "it", "--history", str(bad)]) == 1
    assert "bad.jsonl:1" in capsys.readouterr().err
    wrong = tmp_path / "wrong.json"
    wrong.write_text('[{"role": "user"}]', encoding="utf-8")
    assert main(["analyze", "it", "--history", str(wrong)]) == 1
    assert "has no 'text'" in capsys.readouterr().err


def test_cli_eval_analysis_meets_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "analysis", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["all_at_target"], report["languages"]
    for lang in ("en", "ja", "ko"):
        assert report["languages"][lang]["language"]["n"] >= 200
