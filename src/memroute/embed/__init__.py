"""Embeddings: the ``Embedder`` protocol and the packaged offline models."""

from memroute.embed.base import CachedEmbedder, Embedder, Side, Vectors, embed_ahead, normalise_rows
from memroute.embed.by_language import LanguageAwareEmbedder
from memroute.embed.models import (
    EMBEDDERS,
    ROUTING_EMBEDDER,
    E5SmallEmbedder,
    PairEmbedder,
    UseM3Embedder,
    get_embedder,
    routing_embedder,
)

__all__ = [
    "EMBEDDERS",
    "ROUTING_EMBEDDER",
    "CachedEmbedder",
    "E5SmallEmbedder",
    "Embedder",
    "LanguageAwareEmbedder",
    "PairEmbedder",
    "Side",
    "UseM3Embedder",
    "Vectors",
    "embed_ahead",
    "get_embedder",
    "normalise_rows",
    "routing_embedder",
]
