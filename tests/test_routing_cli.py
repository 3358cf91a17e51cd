"""`memroute route`, `memroute fit`, `memroute eval route|intents` on small fixtures of our own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memroute.cli import main

CATALOGUE = """
[[agents]]
id = "weather"
description = "Weather forecasts for any city"
examples = ["will it rain tomorrow", "how warm is it in Paris"]

[[agents]]
id = "music"
description = "Plays songs and playlists"
examples = ["play some jazz", "put on my running playlist"]
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def catalogue(tmp_path: Path) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(CATALOGUE, encoding="utf-8")
    return path


def test_route_and_session(capsys: pytest.CaptureFixture[str], catalogue: Path, db_url: str) -> None:
    code, out, _ = run(capsys, "route", "Is it going to snow in Oslo?", "--agents", str(catalogue), "--json")
    assert code == 0 and json.loads(out)["agent"] == "weather"
    code, out, _ = run(capsys, "route", "play something relaxing", "--agents", str(catalogue), "--session", "c1",
                       "--store", db_url, "--json")
    decision = json.loads(out)
    assert code == 0 and decision["agent"] == "music" and decision["action"] == "routed"
    code, out, _ = run(capsys, "route", "louder please", "--agents", str(catalogue), "--session", "c1",
                       "--store", db_url, "--json")
    assert json.loads(out)["previous"] == "music"


def test_bad_catalogue_is_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "agents.json"
    bad.write_text('{"agents": [\n {"id": "a",,}]}', encoding="utf-8")
    code, _, err = run(capsys, "route", "hello", "--agents", str(bad))
    assert code == 1 and "line 2, column" in err and err.count("\n") == 1


def test_fit_writes_thresholds(capsys: pytest.CaptureFixture[str], catalogue: Path, tmp_path: Path) -> None:
    examples = tmp_path / "labelled.jsonl"
    rows = [("sunny in Rome?", "weather"), ("forecast for Berlin", "weather"), ("storm warning today?", "weather"),
            ("play the Beatles", "music"), ("next song", "music"), ("shuffle my playlist", "music"),
            ("order a pizza", "oos"), ("what is two plus two", ""), ("book a dentist", "oos"),
            ("how tall is Everest", "oos"), ("rain in Tokyo next week?", "weather"), ("some piano music", "music")]
    examples.write_text("\n".join(json.dumps({"text": t, "label": label}) for t, label in rows), encoding="utf-8")
    out_file = tmp_path / "thresholds.json"
    code, out, _ = run(capsys, "fit", "--agents", str(catalogue), "--examples", str(examples), "--out",
                       str(out_file), "--json")
    assert code == 0 and out_file.is_file()
    assert set(json.loads(out_file.read_text())) >= {"threshold", "w_gap", "w_top", "bias"}
    code, out, _ = run(capsys, "route", "order a pizza", "--agents", str(catalogue), "--thresholds", str(out_file),
                       "--json")
    assert code == 0 and "no_route" in json.loads(out)


def _write_dialogues(path: Path, turns: list[tuple[str, int, list[tuple[str, str]], str, list[str]]]) -> None:
    path.write_text("\n".join(json.dumps({"dialogue_id": d, "turn_idx": i, "history": [
        {"speaker": s, "utterance": u} for s, u in h], "utterance": u, "gold_services": g})
        for d, i, h, u, g in turns), encoding="utf-8")


def test_eval_route_and_intents_on_small_fixtures(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    services = tmp_path / "services.jsonl"
    services.write_text("\n".join(json.dumps(s) for s in [
        {"name": "Weather_1", "description": "Weather forecasts", "intents": [
            {"name": "GetWeather", "description": "Get the forecast for a city"}], "slots": [], "splits": ["dev"]},
        {"name": "Music_1", "description": "Play songs", "intents": [
            {"name": "PlaySong", "description": "Play a song"}], "slots": [], "splits": ["dev"]},
    ]), encoding="utf-8")
    turns = [("d1", 0, [], "What's the weather in Lyon?", ["Weather_1"]),
             ("d1", 2, [("USER", "What's the weather in Lyon?"), ("SYSTEM", "Sunny. Anything else?")],
              "Yes, play a jazz song please", ["Music_1"]),
             ("d1", 4, [("SYSTEM", "Playing.")], "Thanks!", ["Music_1"])]
    data = tmp_path / "dev.jsonl"
    _write_dialogues(data, turns)
    code, out, _ = run(capsys, "eval", "route", "--data", str(data), "--candidates", str(services), "--json")
    report = json.loads(out)
    assert code == 0 and report["turns"] == 3
    assert set(report["accuracy"]) == {"all", "first", "stay", "switch_new", "family_all"}
    assert report["accuracy"]["all"] == 1.0 and set(report["latency_ms"]) == {"p50", "p95"}
    # The switch ceiling: a bare "jazz" after a weather task is a switch only the gold can see; the oracle resets
    # the session there (routed on its own text, 2 first messages) and switches nowhere else.
    turns[1] = ("d1", 2, turns[1][2], "jazz", ["Music_1"])
    _write_dialogues(data, turns)
    code, out, _ = run(capsys, "eval", "route", "--data", str(data), "--candidates", str(services), "--json",
                       "--oracle-switches")
    oracle = json.loads(out)
    assert code == 0 and oracle["actions"]["routed"] == 2 and "switched" not in oracle["actions"]
    assert oracle["accuracy"]["switch_new"] == 1.0
    train = tmp_path / "train.jsonl"
    rows = [(t, "weather") for t in ("rain today?", "forecast for Rome", "is it cold outside", "sunny tomorrow?")]
    rows += [(t, "music") for t in ("play jazz", "next song", "turn up the music", "play my playlist")]
    rows += [(t, "oos") for t in ("what is the capital of Chile", "order food", "book a flight")]
    train.write_text("\n".join(json.dumps({"text": t, "label": label}) for t, label in rows), encoding="utf-8")
    code, out, _ = run(capsys, "eval", "intents", "--train", str(train), "--test", str(train), "--json")
    report = json.loads(out)
    assert code == 0 and set(report) >= {"accuracy", "in_scope_accuracy", "oos_recall", "latency_ms"}
