"""benchmarks/late_candidates.py on the two small LoCoMo-format conversations written by the tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from benchmarks import late_candidates

from tests.locomo_files import write_locomo


def test_it_refuses_an_embedder_without_token_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memroute.embed import models

    monkeypatch.setattr(models, "LATE_INTERACTION", False)  # MEMROUTE_LATE_INTERACTION=0
    monkeypatch.setattr(models, "_SHARED", {})
    assert late_candidates.main(["--data", str(tmp_path), "--workdir", str(tmp_path / "w")]) == 2
    assert late_candidates.main(["--data", str(tmp_path), "--workdir", str(tmp_path / "w"),
                                 "--embedder", "e5-small"]) == 2


def test_a_run_reports_every_k_held_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from memroute.embed import models

    monkeypatch.setattr(models, "LATE_INTERACTION", True)
    monkeypatch.setattr(models, "_SHARED", {})  # a pair made with late interaction on
    data = tmp_path
    write_locomo(data)
    assert late_candidates.main(["--data", str(data), "--workdir", str(tmp_path / "w"), "--k", "50", "1",
                                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"50", "1"}
    for r in report.values():
        assert 0.0 <= r["recall@5"] <= 1.0 and 0 <= r["train_first"] <= r["train_answerable"]
    cut = late_candidates.first_k(np.arange(4.0), 2)
    assert cut[:2].tolist() == [0.0, 1.0] and np.isnan(cut[2:]).all()
