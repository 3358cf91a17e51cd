"""``memroute bench store`` on the default SQLite store: it runs, and measures what SQLite has."""

from __future__ import annotations

import json

import pytest

from memroute.cli import main


def test_bench_store_runs_on_sqlite(capsys: pytest.CaptureFixture[str]) -> None:
    # the approximate-search check once swept PostgreSQL's hnsw.ef_search on SQLite too, whose URL refuses it
    assert main(["bench", "store", "--memories", "300", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["backend"] == "sqlite" and row["memories"] == 300
    assert list(row["hnsw"]["ef_search"]) == ["default"]  # no deeper PostgreSQL settings on SQLite
    assert row["hnsw"]["ef_search"]["default"]["recall@10"] == 1.0  # below the graph's size: the exact scan
    assert 0 < row["bm25_ms"]["p50"] <= row["bm25_ms"]["p95"]
