"""A local question-memory interaction model: does this memory answer this question, from their embeddings.

No cross-encoder works offline here (STACK.md), so this is the reranker built from what a recall already
holds: the query's vector and each candidate's. A logistic model reads, for a query vector ``q`` and a
memory vector ``m`` (both unit vectors of one encoder), the cosine ``q . m``, the element-wise product
``q * m`` and the element-wise distance ``|q - m|`` (the pair features of InferSent: Conneau et al. 2017,
"Supervised Learning of Universal Sentence Representations from Natural Language Inference Data"). The
product splits the cosine into its dimensions, so the model can weigh the directions of the encoder that
tell an answer from a neighbour of the same topic; the cosine is not shrunk by the fit (the model starts
from it), the per-dimension weights are, strongly (see :mod:`memroute.eval.interaction_fit`).

Its logit is a feature of the judge (:mod:`memroute.retrieval.judge`: ``interaction``, and against the
recall's other candidates ``interaction_z``, ``interaction_lead``); it does not reorder the reranker's list.
One model per packaged encoder ships in ``interaction_weights.json``, fitted on everything by ``memroute eval
recall --fit-judge`` while the judge is fitted on cross-fitted logits (stacking,
:func:`memroute.eval.interaction_fit.stacked`); an encoder without one gets no interaction features (zeros).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.errors import ConfigError

WEIGHTS_FILE = "interaction_weights.json"


def pair_features(query: npt.NDArray[np.floating[Any]],
                  memories: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float64]:
    """One row per memory: ``[q . m, q * m, |q - m|]`` (1 + 2 x dimension columns)."""
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray(memories, dtype=np.float64).reshape(-1, len(q))
    return np.hstack([(m @ q)[:, None], q[None, :] * m, np.abs(q[None, :] - m)])


@dataclass(frozen=True, slots=True)
class InteractionModel:
    """A logistic model over :func:`pair_features` in their raw scale (no standardisation at run time)."""

    dimension: int
    cosine: float
    product: npt.NDArray[np.float64]
    distance: npt.NDArray[np.float64]
    bias: float
    fitted_on: str = ""

    def logits(self, query: npt.NDArray[np.floating[Any]],
               memories: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float64]:
        """The logit that each memory (a row of ``memories``) answers the query; same as ``pair_features @ w``
        without building the rows."""
        q = np.asarray(query, dtype=np.float64)
        m = np.asarray(memories, dtype=np.float64).reshape(-1, self.dimension)
        out: npt.NDArray[np.float64] = m @ (q * (self.cosine + self.product)) + np.abs(m - q) @ self.distance \
            + self.bias
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"dimension": self.dimension, "cosine": self.cosine, "product": [round(float(v), 6) for v in
                                                                                 self.product],
                "distance": [round(float(v), 6) for v in self.distance], "bias": self.bias,
                "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InteractionModel:
        dim = int(data["dimension"])
        product = np.asarray(data["product"], dtype=np.float64)
        distance = np.asarray(data["distance"], dtype=np.float64)
        if product.shape != (dim,) or distance.shape != (dim,):
            raise ConfigError(f"interaction_weights.json: a model of dimension {dim} has {product.size} / "
                              f"{distance.size} weights; refit with `memroute eval recall --fit-judge`")
        return cls(dim, float(data["cosine"]), product, distance, float(data["bias"]), str(data.get("fitted_on", "")))


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    try:
        text = resources.files("memroute.retrieval").joinpath(WEIGHTS_FILE).read_text("utf-8")
    except FileNotFoundError:
        return {}
    data: dict[str, Any] = json.loads(text)
    return data


@lru_cache(maxsize=8)
def interaction_for(model_id: str) -> InteractionModel | None:
    """The model fitted for the encoder ``model_id``, None when it has none."""
    entry = _shipped().get("encoders", {}).get(model_id)
    return InteractionModel.from_dict(entry) if entry is not None else None


def clear_cache() -> None:
    _shipped.cache_clear()
    interaction_for.cache_clear()
