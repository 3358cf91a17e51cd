"""A Japanese or Korean request after subordinate clauses is also scored on its main clause
(AgentRouter.clause_weight).

Catalogues and messages written for these tests (none is in an evaluation set)."""

from __future__ import annotations

import numpy as np
import pytest

from memroute.embed import LanguageAwareEmbedder
from memroute.errors import InputError
from memroute.routing import AgentRouter
from memroute.routing.composite import FRAME_WEIGHT
from memroute.types import Agent
from tests.recording import Recording

KO_AGENTS = (
    Agent("music", "music", "음악 재생과 플레이리스트"),
    Agent("recipe", "recipe", "요리 레시피와 식단 추천"),
    Agent("smart_home", "smart_home", "집안 조명과 가전 제어"),
    Agent("weather", "weather", "날씨 예보 확인"),
    Agent("taxi", "taxi", "택시 호출과 예약"),
)
JA_AGENTS = (
    Agent("music", "music", "音楽の再生とプレイリスト"),
    Agent("recipe", "recipe", "料理のレシピと献立の提案"),
    Agent("smart_home", "smart_home", "家の照明と家電の操作"),
    Agent("weather", "weather", "天気予報の確認"),
    Agent("taxi", "taxi", "タクシーの配車と予約"),
)


def _best(router: AgentRouter, agents: tuple[Agent, ...], text: str) -> str:
    total = router.score(router.prepare(text, frame=True), router.index(agents)).total
    return agents[int(np.argmax(total))].id


@pytest.mark.parametrize(("agents", "text", "gold", "pulled_to"), [
    (KO_AGENTS, "레시피 보면서 요리할 거니까 잔잔한 노래 틀어 줘", "music", "recipe"),
    (JA_AGENTS, "料理しながらジャズ流して", "music", "recipe"),
    (JA_AGENTS, "雨だから窓閉めて", "smart_home", "weather"),
    (JA_AGENTS, "晩ご飯を作るから台所の電気つけて", "smart_home", "recipe"),
])
def test_a_request_after_a_clause_of_circumstance_goes_to_its_main_clauses_agent(
        aware: LanguageAwareEmbedder, agents: tuple[Agent, ...], text: str, gold: str, pulled_to: str) -> None:
    """On the whole message the subordinate clause's words win; with the main clause blended in, the request's
    agent does. Fails with the feature off."""
    on, off = AgentRouter(embedder=aware), AgentRouter(embedder=aware, clause_weight=0.0)
    assert on.clause_weight == on.frame_weight == FRAME_WEIGHT > 0  # on by default, one weight for both frames
    assert _best(off, agents, text) == pulled_to
    assert _best(on, agents, text) == gold


@pytest.mark.parametrize(("agents", "text"), [(KO_AGENTS, "비 오면 알려 줘"), (JA_AGENTS, "雨が降ったら教えて")])
def test_a_condition_that_is_the_requests_content_keeps_its_agent(
        aware: LanguageAwareEmbedder, agents: tuple[Agent, ...], text: str) -> None:
    """The frame is the bare "tell me"; the blend keeps the message's own reading, so weather stays."""
    router = AgentRouter(embedder=aware)
    found = router.frame_of(text)
    assert found is not None and found[1] == FRAME_WEIGHT
    assert _best(router, agents, text) == "weather"


def test_english_and_messages_without_a_clause_score_as_before(aware: LanguageAwareEmbedder) -> None:
    on, off = AgentRouter(embedder=aware), AgentRouter(embedder=aware, clause_weight=0.0)
    for agents, text in ((KO_AGENTS, "Play some jazz while I cook"),
                         (KO_AGENTS, "Close the window because it's raining"),
                         (KO_AGENTS, "거실 불 켜 줘"), (JA_AGENTS, "明日の天気を教えて")):
        assert on.frame_of(text) is None
        scored = on.score(on.prepare(text, frame=True), on.index(agents)).total
        assert np.array_equal(scored, off.score(off.prepare(text, frame=True), off.index(agents)).total)


def test_a_payloads_frame_loses_its_clauses_too_and_keeps_the_payload_weight(aware: LanguageAwareEmbedder) -> None:
    router = AgentRouter(embedder=aware, frame_weight=0.4, clause_weight=0.7)
    assert router.frame_of("遅くなるから、妻に先に寝てていいよって送って") == ("妻に 送って", 0.4)
    assert router.frame_of("寝るから電気消して") == ("電気消して", 0.7)
    assert AgentRouter(embedder=None, frame_weight=0.3).frame_of("寝るから電気消して") == ("電気消して", 0.3)
    assert AgentRouter(embedder=None, frame_weight=0.0).frame_of("寝るから電気消して") is None


def test_only_a_clause_turn_encodes_its_frame(aware: LanguageAwareEmbedder) -> None:
    calls: list[list[str]] = []
    router = AgentRouter(embedder=Recording(aware, lambda texts: calls.append(list(texts))))
    index = router.index(JA_AGENTS)
    calls.clear()
    router.score(router.prepare("寝るから電気消して", frame=True), index)
    router.score(router.prepare("電気消して", frame=True), index)
    assert calls == [["寝るから電気消して", "電気消して"], ["電気消して"]]


def test_a_clause_weight_outside_0_1_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="clause_weight"):
        AgentRouter(embedder=None, clause_weight=-0.1)
