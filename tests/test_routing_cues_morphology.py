"""The Japanese and Korean additive particle as an "also" cue, read from the morphology (hand-written phrases)."""

from __future__ import annotations

import pytest

from memroute.routing.cues import additive_particle, read_cues, read_morphology
from memroute.routing.policy import PolicyParams, TurnFeatures, margin_for


@pytest.mark.parametrize("text", [
    "駅の近くでレストランも探しているのですが",  # noun + も
    "ホテルにも駐車場はありますか",  # noun + case particle + も
    "날씨도 알려 줘",  # noun + 도
    "호텔에도 주차장이 있나요",  # noun + case particle + 도
])
def test_a_noun_marked_with_the_additive_particle_adds_a_task(text: str) -> None:
    assert additive_particle(text)
    assert read_cues(text, None).also


@pytest.mark.parametrize("text", [
    "何もいりません",  # "nothing": after a pronoun
    "行ってもいいですか",  # concession: after a verb
    "いつもありがとう",  # part of "always"
    "아무도 없어",  # "nobody"
    "온도가 몇 도야",  # 도 as a noun (degrees), not a particle
    "커피라도 마실까",  # another particle ending in 도
    "I need a hotel too much",  # not Japanese or Korean: the English rules decide
])
def test_the_same_characters_elsewhere_are_no_cue(text: str) -> None:
    assert not additive_particle(text)


@pytest.mark.parametrize(("text", "history"), [
    ("明日の15時に歯医者入れといて", ["明日は雨が降りますか", "午後から雨の予報です"]),  # clause-final te-form
    ("駅前のカフェを探してください", []),  # verb + ください
    ("노동요 좀 틀어 줘", ["오늘 날씨 어때?", "맑아요"]),  # verb + benefactive 주
    ("제주도 항공권 예약하고 싶어요", []),  # desiderative 싶
    ("마스크 좀 주문해 줘", []),  # a noun's verbal suffix + benefactive 주
    ("면접 장소 판교로 적어 놔", ["면접은 목요일이에요"]),  # 놓: done in advance
    ("소리 조금만 키워", []),  # closing on a plain verb form (casual imperative)
    ("내일 비 와?", ["치과 일정 넣었어요"]),  # ... or a casual question about something new
    ("会議のメモに場所を書いといて", []),  # とく: done in advance
])
def test_a_request_predicate_with_a_new_noun_is_a_new_request(text: str, history: list[str]) -> None:
    reading = read_morphology(text)
    assert reading is not None and reading.request
    assert read_cues(text, None, history).new_request


@pytest.mark.parametrize(("text", "history"), [
    ("うん、それで", ["3時でよろしいですか"]),  # a bare answer: no predicate
    ("歯医者の予約を入れといて", ["歯医者の予約はいつにしますか"]),  # a request about what was just said
    ("네 오전 걸로요", ["오전 편과 오후 편이 있어요"]),  # a bare answer
    ("그거 세 시로 바꿔 줘", ["치과 일정은 두 시예요"]),  # a request without a content noun
    ("몇 시부터?", ["내일 비 와?"]),  # a question without a content noun
    ("明日は雨が降りますか", []),  # a polite Japanese question: no request predicate
    ("find me a dentist", []),  # English: the English rules decide
])
def test_answers_and_requests_about_the_same_thing_are_not_new_requests(text: str, history: list[str]) -> None:
    assert not read_cues(text, None, history).new_request


def test_a_new_request_lowers_the_bar_for_a_switch() -> None:
    p = PolicyParams()
    new = TurnFeatures(read_cues("노동요 좀 틀어 줘", None, ["오늘 날씨 어때?"]), words=2)
    same = TurnFeatures(read_cues("노동요 좀 틀어 줘", None, ["노동요 뭐가 좋아?"]), words=2)
    assert new.cues.new_request and not same.cues.new_request
    assert margin_for(p, new) < margin_for(p, same)


@pytest.mark.parametrize("text", ["ありがと", "完璧、ありがと", "さんきゅ", "고마워", "알겠어요 고마워요",
                                  "ㅇㅋ 고마워", "오 좋다 땡큐", "감사해요"])
def test_thanks_in_any_form_is_a_closing(text: str) -> None:
    assert read_cues(text, None).closing


@pytest.mark.parametrize("text", [
    "감사 보고서 요약해 줘",  # 감사 as "audit", in a request
    "고마워 이제 날씨 알려 줘",  # thanks, then a new request
    "ありがとう、次は天気を調べて",
])
def test_thanks_with_a_request_is_no_closing(text: str) -> None:
    assert not read_cues(text, None).closing


@pytest.mark.parametrize(("text", "switch"), [
    ("아 맞다 그 회의 다음 주로 옮겨 줘", True),  # "oh right": the user remembers something else
    ("아 참, 금요일 오후에 비 와요?", True),
    ("맞다 그거야", False),  # agreeing, no interjection before it
])
def test_oh_right_announces_a_switch(text: str, switch: bool) -> None:
    assert read_cues(text, None).switch is switch


@pytest.mark.parametrize("text", ["그건 그렇고 내일 회의 몇 시야?", "그나저나 이 문장 영어로 바꿔 줘",
                                  "그건 그렇다 치고 우산 필요해?", "そういえば、明日の予定は？",
                                  "By the way, what's the weather tomorrow?"])
def test_by_the_way_announces_a_switch(text: str) -> None:
    assert read_cues(text, None).switch
