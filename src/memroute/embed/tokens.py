"""Token vectors for late interaction: what an encoder that can give them gives, and how they are centred.

An embedder that keeps the vector of every token of a text beside its pooled vector (ColBERT's late interaction:
Khattab & Zaharia 2020) says so with ``token_dimension`` (above 0) and gives them, from the same pass as the
pooled vector, by ``embed_with_tokens(texts, side)``; ``embed_tokens(texts, side)`` gives them alone (for a
memory whose pooled vector comes from another text, e.g. a chat turn embedded with its neighbours). Today the
e5-small member of ``use-m3+e5-small`` gives them (:class:`memroute.embed.models.E5SmallEmbedder`); any other
encoder may, through the same two methods (:class:`TokenEmbedder`): the store and the reranker read nothing
model-specific but the token ids, which are the encoder's vocabulary, and the dimension.

Every token vector is centred: the direction all of a multilingual encoder's token vectors share is taken out
(one fixed mean vector, :func:`token_mean`), then the vector is L2-normalised again. Without it any two tokens
of e5 are at cosine ~0.8 and MaxSim reads that shared part more than the text (docs/benchmarks.md, the
eleventh everyday-recall pass: centred and idf-weighted MaxSim gained LoCoMo recall@5 0.014-0.017 held out).
The mean is fixed, not the store's, so that a memory's vectors are centred once at ingest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memroute.embed.base import Side, Vectors
from memroute.errors import ConfigError

MEAN_FILE = "e5_token_mean.json"
"""The fixed mean token vector of e5-small (beside this module), with the texts it was computed from."""


@dataclass(frozen=True, slots=True)
class TokenVectors:
    """One text's token ids (the encoder's vocabulary) and their centred, L2-normalised vectors, row ``i`` for
    ``ids[i]``."""

    ids: npt.NDArray[np.int32]
    vectors: npt.NDArray[np.float32]

    def __len__(self) -> int:
        return len(self.ids)


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that can also give token vectors (see the module docstring)."""

    model_id: str
    dimension: int
    token_dimension: int

    def embed(self, texts: Sequence[str], side: Side = "passage") -> Vectors: ...

    def embed_with_tokens(self, texts: Sequence[str], side: Side = "passage") -> tuple[Vectors, list[TokenVectors]]:
        """The pooled vectors of ``texts`` (as ``embed`` gives them) and their token vectors, from one pass."""
        ...

    def embed_tokens(self, texts: Sequence[str], side: Side = "passage") -> list[TokenVectors]: ...


LATE_KEY = "#late"
"""Appended to an embedder's ``model_id`` to key its reranker and judge when it gives token vectors
(:func:`ranking_id`): a model fitted with the late-interaction column, and the judge fitted on its logits."""


def ranking_id(embedder: object) -> str:
    """The key of ``embedder``'s reranker and judge in the shipped weights: its ``model_id``, with :data:`LATE_KEY`
    when it gives token vectors (late interaction is on: the pair's default, ``MEMROUTE_LATE_INTERACTION``)."""
    model_id = str(getattr(embedder, "model_id", ""))
    return model_id + LATE_KEY if token_source(embedder) is not None else model_id


def token_source(embedder: object) -> TokenEmbedder | None:
    """``embedder`` if it gives token vectors (``token_dimension`` above 0), else ``None``."""
    if int(getattr(embedder, "token_dimension", 0) or 0) > 0 and isinstance(embedder, TokenEmbedder):
        return embedder
    return None


def centred(ids: Sequence[int], vectors: npt.ArrayLike, mean: npt.NDArray[np.float32]) -> TokenVectors:
    """``vectors`` less ``mean``, each row L2-normalised again."""
    shifted = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1) - mean
    shifted /= np.maximum(np.linalg.norm(shifted, axis=1, keepdims=True), np.float32(1e-6))
    return TokenVectors(np.asarray(ids, dtype=np.int32), np.ascontiguousarray(shifted, dtype=np.float32))


@lru_cache(maxsize=4)
def token_mean(name: str = MEAN_FILE) -> npt.NDArray[np.float32]:
    """The shipped mean token vector (:data:`MEAN_FILE`). It is the mean of e5-small's passage-side token vectors
    of the sentences written for it in the same file (everyday statements in English, Japanese and Korean; no
    evaluation data), recomputed by :func:`mean_of` (``tests/test_late_interaction.py`` checks it does)."""
    try:
        data = json.loads(resources.files("memroute.embed").joinpath(name).read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"memroute/embed/{name} is missing from the installation; reinstall memroute") from None
    mean = np.asarray(data["mean"], dtype=np.float32)
    mean.setflags(write=False)
    return mean


def mean_texts(name: str = MEAN_FILE) -> list[str]:
    """The sentences the shipped mean was computed from."""
    data = json.loads(resources.files("memroute.embed").joinpath(name).read_text("utf-8"))
    return list(data["texts"])


def mean_of(raw: Sequence[npt.NDArray[np.float32]]) -> npt.NDArray[np.float32]:
    """The mean of every row of ``raw`` (texts' uncentred, normalised token vectors)."""
    rows = np.concatenate([np.asarray(r, dtype=np.float32) for r in raw if len(r)])
    return np.asarray(rows.mean(axis=0), dtype=np.float32)
