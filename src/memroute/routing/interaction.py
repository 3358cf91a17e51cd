"""A learned message-agent interaction model: how a short user message belongs to an agent's description.

The router's zero-shot score is a cosine between the message and each piece of an agent (its description,
intents, slots, name). This model reads more of the two vectors than their cosine: a logistic model over the
InferSent pair features ``[q . a, q * a, |q - a|]`` (Conneau et al. 2017; the same form as recall's
:mod:`memroute.retrieval.interaction`), where ``q`` is the message's use-m3 vector and ``a`` the normalised mean
of the agent's pieces' use-m3 vectors. use-m3 is the encoder strongest across languages, so a model fitted on
English requests and English intent names is read on Japanese and Korean messages against pieces written in
those languages.

It is fitted by :mod:`memroute.eval.route_interaction_fit` on CLINC150's training side (150 intents over ten
everyday domains, each intent described by its name); the data sets of one domain (SGD, JMultiWOZ-TC: travel and
booking) taught it their domains and cost the unseen ones (docs/benchmarks.md, "branch route7"). The weights
ship in ``interaction_weights.json`` keyed by the encoder they were fitted for; without a model for the router's
encoder the term is 0. :class:`memroute.routing.strategies.EmbeddingStrategy` adds ``learned * (logit - mean
logit over the catalogue)`` for Japanese and Korean messages only.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.retrieval.interaction import InteractionModel

WEIGHTS_FILE = "interaction_weights.json"
F32 = npt.NDArray[np.float32]


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    try:
        text = resources.files("memroute.routing").joinpath(WEIGHTS_FILE).read_text("utf-8")
    except FileNotFoundError:
        return {}
    data: dict[str, Any] = json.loads(text)
    return data


@lru_cache(maxsize=8)
def message_interaction(model_id: str) -> InteractionModel | None:
    """The model fitted for the encoder ``model_id`` (the fast encoder's id), None when none ships."""
    entry = _shipped().get("encoders", {}).get(model_id)
    return InteractionModel.from_dict(entry) if entry is not None else None


def clear_cache() -> None:
    _shipped.cache_clear()
    message_interaction.cache_clear()


def unit_rows(matrix: npt.NDArray[np.floating[Any]]) -> F32:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: F32 = (matrix / np.maximum(norms, 1e-9)).astype(np.float32)
    return out


def agent_centroids(piece_matrix: F32, piece_owner: npt.NDArray[np.int32], agents: int, columns: int) -> F32:
    """Per agent, the normalised mean of its pieces' first ``columns`` columns (the fast encoder's part), each
    piece normalised first (a Japanese piece's use-m3 part is shrunk by the language-aware encoder)."""
    pieces = unit_rows(piece_matrix[:, :columns])
    sums = np.zeros((agents, columns), dtype=np.float64)
    np.add.at(sums, piece_owner, pieces)
    return unit_rows(sums)
