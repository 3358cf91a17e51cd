"""The language-aware embedder: use-m3 for every text, multilingual-e5-small added for Japanese and Korean."""

from __future__ import annotations

import numpy as np
import pytest

from memroute.embed import CachedEmbedder, E5SmallEmbedder, Embedder, LanguageAwareEmbedder, routing_embedder
from memroute.embed.by_language import ANCHORS, STRONG_SHARE
from memroute.errors import EmbeddingError
from tests.recording import Recording, thread_names


@pytest.fixture(scope="module")
def e5() -> E5SmallEmbedder:
    return E5SmallEmbedder()


def _made(fast: Embedder, strong: Embedder, calls: list[int]) -> LanguageAwareEmbedder:
    def make() -> Embedder:
        calls.append(1)
        return strong

    return LanguageAwareEmbedder(fast, make, strong.model_id, strong.dimension)


def test_english_is_use_m3_alone_and_never_loads_the_strong_model(embedder: CachedEmbedder,
                                                                  e5: E5SmallEmbedder) -> None:
    calls: list[int] = []
    model = _made(embedder, e5, calls)
    texts = ["book a table for two tonight", "what's the weather in Paris?"]
    vecs = model.embed(texts, side="query")
    assert vecs.shape == (2, embedder.dimension + e5.dimension)
    assert np.allclose(vecs[:, : embedder.dimension], embedder.embed(texts, side="query"), atol=1e-6)
    assert not vecs[:, embedder.dimension :].any()
    assert calls == []  # an English deployment never pays for e5


def test_japanese_and_korean_get_a_weighted_mean_of_both_cosines(embedder: CachedEmbedder,
                                                                  e5: E5SmallEmbedder) -> None:
    calls: list[int] = []
    model = _made(embedder, e5, calls)
    texts = ["近くの飲食店を探しています", "레스토랑 예약하고 싶어요", "find a restaurant nearby"]
    vecs = model.embed(texts, side="passage")
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    use, e = embedder.embed(texts[:2], side="passage"), e5.embed(texts[:2], side="passage")
    mean = np.vstack([e5.embed(ANCHORS, "query"), e5.embed(ANCHORS, "passage")]).mean(axis=0)
    centred = (e - mean) / np.linalg.norm(e - mean, axis=1, keepdims=True)
    share = STRONG_SHARE
    assert vecs[0] @ vecs[1] == pytest.approx((1 - share) * use[0] @ use[1] + share * centred[0] @ centred[1],
                                              abs=1e-4)
    # Japanese against English: use-m3's cosine, scaled (the ranking among candidates of one language is
    # unchanged).
    cross = embedder.embed([texts[0], texts[2]], side="passage")
    assert vecs[0] @ vecs[2] == pytest.approx(float(cross[0] @ cross[1]) * np.sqrt(1 - share), abs=1e-5)
    assert calls == [1]
    model.embed(["明日の天気は？"])
    assert calls == [1]  # made once


def test_a_strong_model_of_the_wrong_size_is_a_clear_error(embedder: CachedEmbedder, e5: E5SmallEmbedder) -> None:
    model = LanguageAwareEmbedder(embedder, lambda: e5, e5.model_id, 100)
    with pytest.raises(EmbeddingError, match="dimension 384, expected 100"):
        model.embed(["こんにちは"])


def test_routers_beside_a_use_m3_memory_get_the_language_aware_encoder(embedder: CachedEmbedder,
                                                                        e5: E5SmallEmbedder) -> None:
    assert routing_embedder("use-m3") == "use-m3+e5-ja-ko"
    assert routing_embedder(embedder) == "use-m3+e5-ja-ko"
    assert routing_embedder(e5) is e5 and routing_embedder("e5-small") == "e5-small" and routing_embedder(None) is None


def test_unrelated_japanese_sentences_no_longer_look_alike(embedder: CachedEmbedder, e5: E5SmallEmbedder) -> None:
    """multilingual-e5 gives any two Japanese sentences a cosine near 0.8; with the shared direction removed,
    a paraphrase stays close and an unrelated sentence does not."""
    model = _made(embedder, e5, [])
    texts = ["近くで安い飲食店を探しています", "この辺に手頃なレストランはありますか", "来週の会議の資料を英語に訳して"]
    raw = e5.embed(texts, "query")
    assert raw[0] @ raw[2] > 0.7
    part = model.embed(texts, "query")[:, embedder.dimension:] / np.sqrt(STRONG_SHARE)
    assert part[0] @ part[2] < 0.3 < part[0] @ part[1]


def test_a_capability_is_scored_by_e5_in_its_agents_context(embedder: CachedEmbedder, e5: E5SmallEmbedder) -> None:
    from memroute.routing import AgentRouter
    from memroute.routing.strategies import EmbeddingStrategy
    from memroute.types import Agent

    model = CachedEmbedder(_made(embedder, e5, []))
    agents = [Agent(id="weather", name="weather", description="날씨 에이전트: 지역별 기상 예보",
                    metadata={"capabilities": ["지역", "미세먼지 정보"]}),
              Agent(id="restaurant", name="restaurant", description="맛집 에이전트: 식당 추천과 예약",
                    metadata={"capabilities": ["지역", "음식 종류"]})]
    plain = EmbeddingStrategy(in_context=0.0)
    mixed = EmbeddingStrategy(in_context=0.3)
    router = AgentRouter([mixed], embedder=model)
    index = router.index(agents)
    assert index.strong_from == embedder.dimension
    query = router.prepare("부산 쪽 내일 비 와?")
    assert query.vector is not None
    raw = index.piece_matrix @ query.vector
    split = embedder.dimension
    strong = index.piece_matrix[:, split:] @ query.vector[split:]
    got = mixed._piece_sims(query.vector, index)
    # The descriptions (each agent's first piece) are their own context; the shared "지역" is not the same
    # for both agents any more: each is pulled towards its agent's description.
    for start in index.piece_starts:
        assert got[start] == pytest.approx(raw[start], abs=1e-5)
    for row in range(len(raw)):
        desc = index.piece_starts[index.piece_owner[row]]
        if row != desc:
            assert got[row] == pytest.approx(raw[row] - 0.3 * strong[row] + 0.3 * strong[desc], abs=1e-5)
    assert np.allclose(plain._piece_sims(query.vector, index), raw, atol=1e-6)
    # English has no e5 part: its scores are exactly the plain ones.
    english = router.prepare("will it rain in Busan tomorrow?")
    assert english.vector is not None
    assert np.allclose(mixed._piece_sims(english.vector, index), index.piece_matrix @ english.vector, atol=1e-6)


def test_the_strong_encoder_runs_on_its_own_thread_and_concurrent_callers_agree(embedder: CachedEmbedder,
                                                                                 e5: E5SmallEmbedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    where: list[str] = []
    model = LanguageAwareEmbedder(embedder, lambda: Recording(e5, thread_names(where)), e5.model_id, e5.dimension)
    texts = ["明日の天気は？", "레스토랑 예약하고 싶어요", "find a restaurant nearby", "この文を英語にして"]
    alone = [model.embed([t], side="query") for t in texts]
    assert where and all(name.startswith("memroute-strong") for name in where)
    with ThreadPoolExecutor(4) as pool:  # callers on several threads at once: same vectors, no deadlock
        together = list(pool.map(lambda t: model.embed([t], side="query"), texts * 3))
    for i, vec in enumerate(together):
        assert np.allclose(vec, alone[i % len(texts)], atol=1e-6)


def test_a_forked_child_encodes_on_threads_of_its_own(embedder: CachedEmbedder, e5: E5SmallEmbedder) -> None:
    import multiprocessing

    model = LanguageAwareEmbedder(embedder, lambda: e5, e5.model_id, e5.dimension)
    parent = model.embed(["明日の天気は？"], side="query")  # the parent's worker threads exist now

    def child(out: multiprocessing.Queue[object]) -> None:
        out.put(model.embed(["明日の天気は？"], side="query").tolist())

    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[object] = context.Queue()
    process = context.Process(target=child, args=(queue,))
    process.start()
    got = queue.get(timeout=60)  # with the parent's dead threads the child would wait forever
    process.join(10)
    assert np.allclose(np.array(got), parent, atol=1e-6)


def test_runs_strong_says_when_e5_would_run(embedder: CachedEmbedder, e5: E5SmallEmbedder) -> None:
    from memroute.embed.by_language import runs_strong

    cached = CachedEmbedder(LanguageAwareEmbedder(embedder, lambda: e5, e5.model_id, e5.dimension))
    assert runs_strong(cached, "明日の天気は？（確認 7）") and runs_strong(cached, "내일 날씨 어때? (확인 7)")
    assert not runs_strong(cached, "what's the weather tomorrow?") and not runs_strong(embedder, "明日の天気は？")
    cached.embed(["明日の天気は？（確認 7）"], side="query")
    assert not runs_strong(cached, "明日の天気は？（確認 7）", "query")  # cached: nothing to wait for
    assert runs_strong(cached, "明日の天気は？（確認 7）", "passage")
