"""AgentRouter: strategies, status gating, deterministic order, confidence and no-route, bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from memroute.embed import CachedEmbedder, E5SmallEmbedder, LanguageAwareEmbedder
from memroute.errors import InputError
from memroute.routing import AgentRouter, Calibration, ContentItem, LabelledExample, RouterQuery, fit
from memroute.routing.index import BM25
from memroute.routing.strategies import BM25Strategy, EmbeddingStrategy, MentionStrategy
from memroute.types import Agent, AgentStatus

AGENTS = (
    Agent("translate", "Translator", "Translates text between languages", keywords=("translate",),
          examples=("How do I say thank you in French?", "この文を英語に訳して")),
    Agent("code_review", "Code reviewer", "Reviews source code for bugs and performance problems",
          tools=("run_linter",), examples=("Can you check my pull request?",)),
    Agent("weather", "Weather", "Current weather and forecasts for any city",
          examples=("Will it rain in Osaka tomorrow?", "내일 서울 날씨 어때?")),
    Agent("vision", "Image describer", "Describes and captions photos", input_types=("text", "image")),
)


@pytest.fixture(scope="module")
def router(embedder: CachedEmbedder) -> AgentRouter:
    return AgentRouter(embedder=embedder)


@pytest.mark.parametrize(("text", "expected"), [
    ("Please translate this sentence into German", "translate"),
    ("明日の東京の天気は？", "weather"),
    ("이 코드에 버그가 있는지 봐 주세요", "code_review"),
    ("Is there a bug in this function? It is slow", "code_review"),
])
def test_routes_by_meaning_in_three_languages(router: AgentRouter, text: str, expected: str) -> None:
    out = router.route(text, AGENTS)
    assert out.agent is not None and out.agent.id == expected and not out.no_route


def test_mention_wins_and_is_explained(router: AgentRouter) -> None:
    out = router.route("@weather translate this code please", AGENTS, top_k=2, include_scores=True)
    assert out.agent is not None and out.agent.id == "weather"
    top = out.scores[0]
    mention = next(s for s in top.strategies if s.name == "mention")
    assert mention.score == 1.0 and mention.details == {"matched": "@weather"}
    assert 0.0 <= top.score <= 1.0 and top.rank == 1 and len(out.scores) == 2


def test_explanations_carry_terms_never_the_raw_text(router: AgentRouter) -> None:
    text = "Could you translate my secret diary entry"
    out = router.route(RouterQuery(text=text, hints=("run_linter",)), AGENTS, top_k=4, include_scores=True)
    dumped = json.dumps(out.as_dict(), ensure_ascii=False)
    assert text not in dumped and "secret diary entry" not in dumped
    bm25 = next(s for s in out.scores[0].strategies if s.name == "bm25")
    assert "translat" in " ".join(bm25.details["matched_terms"])
    tools = next(s for sc in out.scores for s in sc.strategies if s.name == "tools")
    assert tools.details == {"tool_hits": ["run linter"]}


def test_file_type_and_keyword_strategies(router: AgentRouter) -> None:
    out = router.route(RouterQuery(text="what is in this?", content=(ContentItem("file", name="cat.PNG"),)),
                       AGENTS, top_k=4, include_scores=True)
    vision = next(s for s in out.scores if s.agent.id == "vision")
    assert any(s.name == "file_type" and s.details == {"file_types": ["image"]} for s in vision.strategies)
    out = router.route(RouterQuery(text="hello", tags=("translate",)), AGENTS, include_scores=True)
    assert any(s.name == "keywords" for s in out.scores[0].strategies)


def test_status_gating(router: AgentRouter) -> None:
    agents = (
        Agent("idle_w", "idle weather", "Current weather and forecasts", status=AgentStatus.IDLE),
        Agent("broken", "broken weather", "Current weather and forecasts", status=AgentStatus.ERROR),
        Agent("cook", "Cook", "Recipes and cooking tips"),
    )
    out = router.route("What's the weather in Paris?", agents, top_k=3)
    assert [a.id for a in out.agents] == ["cook"]  # idle and error are not candidates by default
    out = router.route("@idle_w what's the weather in Paris?", agents, top_k=3)
    assert out.agent is not None and out.agent.id == "idle_w" and "broken" not in [a.id for a in out.agents]
    out = router.route(RouterQuery(text="weather please", hints=("idle_w",)), agents)
    assert out.agent is not None and out.agent.id == "idle_w"
    out = router.route("@broken weather please", agents)
    assert out.agent is not None and out.agent.id == "broken"
    only_inactive = (Agent("x", "x", "weather", status=AgentStatus.INACTIVE),)
    out = router.route("weather please", only_inactive)
    assert out.no_route and out.agent is None and "available" in out.reason


def test_ties_follow_seed_order_deterministically() -> None:
    # Lexical strategies only, and names that differ only in case: every score is exactly equal.
    lexical = AgentRouter(embedder=None)
    t = datetime(2025, 1, 1, tzinfo=UTC)
    agents = [
        Agent("b2", "summariser", "Summarises documents"),
        Agent("b1", "summariser", "Summarises documents"),
        Agent("a9", "Summariser", "Summarises documents"),
        Agent("used", "SUMMARISER", "Summarises documents", usage_count=5),
        Agent("recent", "sUmmariser", "Summarises documents", last_used=t),
        Agent("idle", "summariser", "Summarises documents", status=AgentStatus.IDLE),
    ]
    out = lexical.route("summarise this report", agents, top_k=6)
    # score, then status, last used (newest first), usage (most first), name, id
    assert [a.id for a in out.agents] == ["recent", "used", "a9", "b1", "b2"]
    out = lexical.route("@idle summarise this report", agents, top_k=6)
    assert out.agents[0].id == "idle"  # mentioned: highest score, and idle is allowed when named


def test_ten_thousand_identical_agents_stay_deterministic(router: AgentRouter) -> None:
    agents = [Agent(f"id{(i * 7919) % 10_000:05d}", "Gardener", "Answers questions about gardening")
              for i in range(10_000)]
    first = router.route("how do I grow tomatoes?", agents, top_k=3)
    again = router.route("how do I grow tomatoes?", list(reversed(agents)), top_k=3)
    assert [a.id for a in first.agents] == ["id00000", "id00001", "id00002"]
    assert [a.id for a in again.agents] == [a.id for a in first.agents]


def test_bad_input_is_a_clear_error_or_a_decision(router: AgentRouter) -> None:
    with pytest.raises(InputError, match="no agents"):
        router.route("hello", [])
    with pytest.raises(InputError, match="empty"):
        router.route("   ", AGENTS)
    with pytest.raises(InputError, match="duplicate agent id"):
        router.route("hello", [Agent("a", "a"), Agent("a", "b")])
    with pytest.raises(InputError, match="top_k"):
        router.route("hello", AGENTS, top_k=0)
    out = router.route("😀🎉", AGENTS)
    assert out.no_route and "no words" in out.reason
    empty = (Agent("e1", "first"), Agent("e2", "second"))
    out = router.route("first", empty)
    assert out.agent is not None and out.agent.id == "e1"


def test_per_agent_threshold_gives_no_route(router: AgentRouter) -> None:
    strict = tuple(Agent(a.id, a.name, a.description, examples=a.examples, threshold=0.999) for a in AGENTS)
    out = router.route("Please translate this sentence into German", strict)
    assert out.no_route and out.agent is None and "threshold" in out.reason
    assert out.agents and out.agents[0].id == "translate"  # the ranking is still there to show the user
    gated = AgentRouter(embedder=router.embedder, calibration=Calibration(threshold=0.999), cache=router.cache)
    assert gated.route("Please translate this sentence", AGENTS).no_route


def test_fit_learns_a_threshold_that_rejects_out_of_scope(router: AgentRouter) -> None:
    in_scope = [("translate", t) for t in ("say good night in Spanish", "what is 'cat' in Japanese",
                                          "translate 'where is the station' to Korean",
                                          "how do you say thanks in German")]
    in_scope += [("weather", t) for t in ("is it sunny in Rome", "forecast for Tokyo this weekend",
                                          "will it snow tomorrow", "how hot is it in Cairo today")]
    in_scope += [("code_review", t) for t in ("look at my python diff", "is this loop too slow",
                                              "find the bug in my function", "review this pull request")]
    oos = ["who won the football match", "book me a haircut", "what is the capital of Peru",
           "play some jazz music", "order a pizza", "tell me a joke"]
    examples = [LabelledExample(t, a) for a, t in in_scope] + [LabelledExample(t, None) for t in oos]
    report = fit(router, AGENTS, examples, folds=2)
    assert 0.0 <= report.calibration.threshold <= 1.0
    assert 0.0 <= report.in_scope_accuracy <= 1.0 and 0.0 <= report.out_of_scope_recall <= 1.0
    assert report.calibration.w_gap >= 0 and report.calibration.w_top >= 0  # confidence is monotone
    assert set(report.as_dict()) >= {"calibration", "accuracy", "in_scope_accuracy", "out_of_scope_recall"}


def test_bm25_term_weights_match_rank_bm25() -> None:
    docs = [["hotel", "room", "book"], ["train", "ticket", "book", "book"], ["hotel", "spa"], ["taxi"],
            ["bus", "ticket"], ["weather", "rain", "forecast", "city"], ["music"]]
    ours = BM25(docs)
    reference = BM25Okapi(docs, k1=1.2, b=0.75)
    for term in ("hotel", "book", "taxi"):
        ref = np.array(reference.get_scores([term])) / reference.idf[term]
        mine = ours.raw_scores([term]) / ours.idf[term]
        assert np.allclose(mine, ref, atol=1e-5)
    assert ours.scores(["unknown"]).max() == 0.0


def test_catalogue_cache_reuses_agent_versions(router: AgentRouter) -> None:
    first = router.index(AGENTS)
    assert router.index(AGENTS) is first
    changed = (*AGENTS[:3], Agent("vision", "Image describer", "Describes photos and screenshots"))
    second = router.index(changed)
    assert second is not first and second.entries[0] is first.entries[0]
    assert second.entries[3] is not first.entries[3]


def test_japanese_and_korean_messages_read_the_agents_names_across_languages(embedder: CachedEmbedder) -> None:
    """Agents described alike: what reading their (English) names adds to a Korean or Japanese message's scores
    points to the right one and takes from the others, and an English message is scored as without."""
    e5 = E5SmallEmbedder()
    aware = LanguageAwareEmbedder(embedder, lambda: e5, e5.model_id, e5.dimension)
    same = "사용자의 요청을 받아 처리하는 개인 비서 기능입니다."
    agents = (Agent("weather", "weather", same), Agent("music", "music", same), Agent("calendar", "calendar", same))

    def router(by_name: float) -> AgentRouter:
        return AgentRouter([MentionStrategy(), EmbeddingStrategy(by_name=by_name), BM25Strategy()], embedder=aware)

    assert EmbeddingStrategy().by_name > 0  # on by default
    named, unnamed = router(EmbeddingStrategy().by_name), router(0.0)
    for text, expected in (("노래 좀 틀어 줘", "music"), ("내일 비 와?", "weather"), ("好きな曲を流して", "music"),
                           ("明日は雨が降りますか", "weather"), ("다음 주 일정 알려 줘", "calendar")):
        added = (named.score(text, named.index(agents)).parts["embedding"]
                 - unnamed.score(text, unnamed.index(agents)).parts["embedding"])
        assert agents[int(np.argmax(added))].id == expected, (text, added)
        assert float(added.max()) > 0.005 and float(added.min()) <= 0  # centred over the catalogue
    english = "Play some relaxing songs"
    assert np.array_equal(named.score(english, named.index(agents)).total,
                          unnamed.score(english, unnamed.index(agents)).total)
