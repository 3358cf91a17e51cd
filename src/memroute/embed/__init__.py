"""Embeddings: the ``Embedder`` protocol and the packaged offline models."""

from memroute.embed.base import CachedEmbedder, Embedder, Side, Vectors, normalise_rows
from memroute.embed.models import EMBEDDERS, E5SmallEmbedder, PairEmbedder, UseM3Embedder, get_embedder

__all__ = [
    "EMBEDDERS",
    "CachedEmbedder",
    "E5SmallEmbedder",
    "Embedder",
    "PairEmbedder",
    "Side",
    "UseM3Embedder",
    "Vectors",
    "get_embedder",
    "normalise_rows",
]
