"""``LanguageAwareEmbedder``: the fast encoder for every text, a stronger one added for Japanese and Korean.

use-m3 is the strongest cross-lingual encoder here and costs ~2 ms a text; multilingual-e5-small is much
better on Japanese and Korean paraphrases (native words against loanwords, casual against polite) but costs
~20 ms. Routing measured both (``docs/benchmarks.md``): on English sets the pair is no better than use-m3
alone, on JMultiWOZ-TC it gained six points. So the strong encoder is paid for only where it pays: a text
whose dominant language is Japanese or Korean gets ``[sqrt(1 - s) * use-m3, sqrt(s) * e5]`` with the strong
share ``s`` = :data:`STRONG_SHARE` (a dot product of two such vectors is ``(1 - s) * use-m3 cosine + s * e5
cosine``), any other text gets ``[use-m3, 0]`` (two English texts compare exactly as under use-m3 alone).

A Japanese or Korean text against an English one compares on use-m3 alone, scaled by ``sqrt(1 - s)``
(0.45): the ranking among candidates of one language is unchanged, but in a catalogue described in English
for Korean users the scores are smaller than the catalogue's own scale, so switching in a conversation needs
a larger lead; describe such a catalogue in the users' language, or route with ``use-m3``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence

import numpy as np

from memroute.embed.base import Embedder, Side, Vectors
from memroute.errors import EmbeddingError
from memroute.text.language import detect_language

STRONG_LANGUAGES = frozenset({"ja", "ko"})
STRONG_SHARE = 0.8
"""The strong encoder's share of a Japanese or Korean cosine. Chosen on the dev splits of JMultiWOZ-TC and of
memroute's own Japanese and Korean routing sets (the best mean of the three over 0.3, 0.5, 0.7, 0.8, 0.85 and
0.9: 0.5 is the plain pair; docs/benchmarks.md)."""


class LanguageAwareEmbedder:
    """``fast`` for every text, plus the strong encoder for texts in ``languages`` (see the module docstring).

    ``strong`` makes the strong encoder, called on the first Japanese or Korean text (an English deployment
    never loads it); ``strong_id`` and ``strong_dimension`` describe it before it is loaded."""

    def __init__(self, fast: Embedder, strong: Callable[[], Embedder], strong_id: str, strong_dimension: int,
                 languages: frozenset[str] = STRONG_LANGUAGES) -> None:
        self.fast, self.languages = fast, languages
        self._factory = strong
        self._strong: Embedder | None = None
        self._strong_dimension = strong_dimension
        self._lock = threading.Lock()
        self.model_id = f"{fast.model_id}|{'+'.join(sorted(languages))}:{strong_id}"
        self.dimension = fast.dimension + strong_dimension

    @property
    def strong(self) -> Embedder:
        with self._lock:
            if self._strong is None:
                made = self._factory()
                if made.dimension != self._strong_dimension:
                    raise EmbeddingError(f"{made.model_id} has dimension {made.dimension}, "
                                         f"expected {self._strong_dimension}")
                self._strong = made
            return self._strong

    def strong_rows(self, texts: Sequence[str]) -> list[int]:
        return [i for i, t in enumerate(texts) if detect_language(t) in self.languages]

    def embed(self, texts: Sequence[str], side: Side = "passage") -> Vectors:
        out = self._fast_part(texts, side)
        rows = self.strong_rows(texts)
        if rows:
            out[rows, : self.fast.dimension] *= np.float32(math.sqrt(1 - STRONG_SHARE))
            out[rows, self.fast.dimension :] = (self.strong.embed([texts[i] for i in rows], side)
                                                * np.float32(math.sqrt(STRONG_SHARE)))
        return out

    def _fast_part(self, texts: Sequence[str], side: Side) -> Vectors:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if texts:
            out[:, : self.fast.dimension] = self.fast.embed(texts, side)
        return out
