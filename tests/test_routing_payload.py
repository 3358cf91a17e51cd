"""A Japanese or Korean message that carries a payload is also scored on its frame (AgentRouter.frame_weight).

Catalogues and messages written for these tests (none is in an evaluation set)."""

from __future__ import annotations

import numpy as np
import pytest

from memroute.embed import LanguageAwareEmbedder
from memroute.errors import InputError
from memroute.memory import Memory
from memroute.routing import AgentRouter, ConversationRouter
from memroute.routing.composite import FRAME_WEIGHT
from memroute.types import Agent
from tests.recording import Recording

KO_AGENTS = (
    Agent("messenger", "messenger", "가족과 친구에게 메시지 보내기"),
    Agent("recipe", "recipe", "요리 레시피와 식단 추천"),
    Agent("weather", "weather", "날씨 예보 확인"),
    Agent("parcel", "parcel", "택배 배송 조회"),
)
JA_AGENTS = (
    Agent("messenger", "messenger", "家族や友人へのメッセージ送信"),
    Agent("recipe", "recipe", "料理のレシピと献立の提案"),
    Agent("weather", "weather", "天気予報の確認"),
    Agent("parcel", "parcel", "荷物の配送状況の確認"),
)


@pytest.mark.parametrize(("agents", "text"), [
    (KO_AGENTS, "아들한테 오늘 저녁은 김치찌개 끓이자고 전해 줘"),
    (KO_AGENTS, "남편한테 택배 도착했다고 보내 줘"),
    (KO_AGENTS, "언니한테 내일 비 온다고 알려 줘"),
    (JA_AGENTS, "息子に今夜はカレーを作ろうって送って"),
    (JA_AGENTS, "夫に荷物が届いたと伝えて"),
    (JA_AGENTS, "姉に明日は雨が降るって送っておいて"),
])
def test_a_message_to_pass_on_goes_to_the_messenger_because_of_its_frame(
        aware: LanguageAwareEmbedder, agents: tuple[Agent, ...], text: str) -> None:
    """On the whole message, the payload's words pull it to recipe, parcel or weather; with the frame blended
    in, the messenger wins."""
    on, off = AgentRouter(embedder=aware), AgentRouter(embedder=aware, frame_weight=0.0)
    assert on.frame_weight == FRAME_WEIGHT > 0  # on by default
    with_frame = on.score(on.prepare(text, frame=True), on.index(agents)).total
    without = off.score(text, off.index(agents)).total
    assert agents[int(np.argmax(without))].id != "messenger", without
    assert agents[int(np.argmax(with_frame))].id == "messenger", with_frame


def test_english_and_messages_without_a_payload_score_as_before(aware: LanguageAwareEmbedder) -> None:
    on, off = AgentRouter(embedder=aware), AgentRouter(embedder=aware, frame_weight=0.0)
    for agents, text in ((KO_AGENTS, 'Tell my son "we eat curry tonight"'), (KO_AGENTS, "Text mom: parcel arrived"),
                         (KO_AGENTS, "내일 날씨 알려 줘"), (JA_AGENTS, "今夜のおかずのレシピを教えて")):
        assert on.frame_of(text) is None
        scored = on.score(on.prepare(text, frame=True), on.index(agents)).total
        assert np.array_equal(scored, off.score(text, off.index(agents)).total)


def test_only_a_payload_turn_encodes_its_frame(aware: LanguageAwareEmbedder) -> None:
    calls: list[list[str]] = []
    router = AgentRouter(embedder=Recording(aware, lambda texts: calls.append(list(texts))))
    index = router.index(JA_AGENTS)
    calls.clear()
    router.score(router.prepare("夫に荷物が届いたと伝えて", frame=True), index)
    router.score(router.prepare("明日の天気を教えて", frame=True), index)
    assert calls == [["夫に荷物が届いたと伝えて", "夫に 伝えて"], ["明日の天気を教えて"]]
    # Encoded ahead, the message and its frame run on two workers at once: the same vectors.
    calls.clear()
    ahead = router.encode_ahead("妻に今日は遅くなると伝えて", frame=True)
    assert ahead is not None
    prepared = router.prepare("妻に今日は遅くなると伝えて", vector=ahead, frame=True)
    assert sorted(calls) == [["妻に 伝えて"], ["妻に今日は遅くなると伝えて"]]
    assert prepared.frame is not None and prepared.frame.text == "妻に 伝えて"
    assert prepared.vector is not None and prepared.frame.vector is not None
    direct = aware.embed(["妻に今日は遅くなると伝えて", "妻に 伝えて"], side="query")
    assert np.allclose(prepared.vector, direct[0], atol=1e-5)
    assert np.allclose(prepared.frame.vector, direct[1], atol=1e-5)


def test_only_the_routed_message_reads_its_frame(aware: LanguageAwareEmbedder) -> None:
    """Replies, the message joined with the previous turn and context are read without a frame: they would
    pay an encoding of their own."""
    calls: list[list[str]] = []
    router = AgentRouter(embedder=Recording(aware, lambda texts: calls.append(list(texts))))
    assert router.prepare("夫に荷物が届いたと伝えて").frame is None
    memory = Memory.open("sqlite://:memory:", owner="t", embedder=router.embedder)
    try:
        conv = ConversationRouter(memory, JA_AGENTS, router=router, use_memories=False)
        calls.clear()
        first = conv.route("夫に荷物が届いたと伝えて", "s")
        conv.add_reply("s", "「荷物が届いた」と送りました。")
        conv.route("ありがとう、あと明日の天気は？", "s")
    finally:
        memory.close()
    assert first.agent is not None and first.agent.id == "messenger"
    encoded = [t for texts in calls for t in texts]
    assert sorted(encoded) == sorted(["夫に荷物が届いたと伝えて", "夫に 伝えて", "「荷物が届いた」と送りました。",
                                      "ありがとう、あと明日の天気は？"]), encoded


def test_a_frame_weight_outside_0_1_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="frame_weight"):
        AgentRouter(embedder=None, frame_weight=1.5)



def test_the_calibration_fit_reads_a_request_on_its_frame_as_route_does(aware: LanguageAwareEmbedder) -> None:
    """``memroute fit``'s examples are routed as production routes them: payload messages labelled messenger
    are right in the fit only when their frame is read (fails if the fit scores the bare text)."""
    from memroute.routing.fit import LabelledExample, fit

    passed_on = ("아들한테 오늘 저녁은 김치찌개 끓이자고 전해 줘", "남편한테 택배 도착했다고 보내 줘",
                 "언니한테 내일 비 온다고 알려 줘", "동생한테 된장찌개 레시피 찾았다고 보내 줘",
                 "엄마한테 택배 내일 온다고 전해 줘", "아빠한테 주말에 눈 온다고 알려 줘")
    own = (("오늘 저녁 메뉴 추천해 줘", "recipe"), ("내일 비 와?", "weather"), ("택배 어디쯤 왔어?", "parcel"),
           ("김치찌개 끓이는 법 알려 줘", "recipe"), ("주말 날씨 어때?", "weather"), ("주문한 책 언제 와?", "parcel"))
    examples = [LabelledExample(t, "messenger") for t in passed_on] + [LabelledExample(t, a) for t, a in own]
    report = fit(AgentRouter(embedder=aware), KO_AGENTS, examples, folds=2)
    assert report.examples == 12 and report.accuracy_before == 1.0


def test_only_the_encoded_part_of_a_long_message_is_read_for_a_frame(aware: LanguageAwareEmbedder) -> None:
    """A hostile 100k-character message costs the frame readers no more than its encoded head: a payload past
    EMBED_CHARS is not read (reading the whole text grew faster than its length: 22 s at 200k characters)."""
    from memroute.routing.composite import EMBED_CHARS

    router = AgentRouter(embedder=aware)
    request = "남편한테 택배 도착했다고 보내 줘"
    assert router.frame_of(request) is not None
    assert router.frame_of("가" * EMBED_CHARS + request) is None
    long = ("동생한테 저녁 먹자고 보내 줘. " * 6000)[:100_000]
    found = router.frame_of(long)
    assert found is not None and len(found[0]) < EMBED_CHARS
    assert router.route(long, KO_AGENTS).agent is not None
