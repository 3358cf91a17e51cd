"""The payload detector (memroute.analysis.payload): a request's frame and the text it carries.

The messages are written for these tests (none is in an evaluation set)."""

from __future__ import annotations

import pytest

from memroute.analysis.payload import find_payload


@pytest.mark.parametrize(("text", "frame", "payload", "kind"), [
    # Korean reported speech: a quotative ending (alone or fused with its stem) before a predicate
    ("아들한테 오늘 저녁은 김치찌개 끓이자고 전해 줘", "아들한테 전해 줘", "오늘 저녁은 김치찌개 끓이자고", "reported"),
    ("남편한테 택배 도착했다고 보내 줘", "남편한테 보내 줘", "택배 도착했다고", "reported"),
    ("팀장님께 회의가 몇 시냐고 여쭤봐 줘", "팀장님께 여쭤봐 줘", "회의가 몇 시냐고", "reported"),
    ("동생한테도 우산 챙기라고 해", "동생한테도 해", "우산 챙기라고", "reported"),
    # Korean embedded question
    ("민지한테 토요일에 시간 있는지 물어봐", "민지한테 물어봐", "토요일에 시간 있는지", "reported"),
    # Japanese quotative と / って after a predicate, って after a noun with an addressee, embedded か
    ("息子に今夜はカレーを作ろうって送って", "息子に 送って", "今夜はカレーを作ろうって", "reported"),
    ("夫に荷物が届いたと伝えて", "夫に 伝えて", "荷物が届いたと", "reported"),
    ("部長には会議は3時からだよって伝えといて", "部長には 伝えといて", "会議は3時からだよって", "reported"),
    ("妹に夕飯はパスタって伝えて", "妹に 伝えて", "夕飯はパスタって", "reported"),
    ("佐藤さんに土曜は空いてるか聞いてみて", "佐藤さんに 聞いてみて", "土曜は空いてるか", "reported"),
    # quotes and a colon, any language
    ("「駅はどこですか」を韓国語に訳して", "を韓国語に訳して", "「駅はどこですか」", "quote"),
    ("이거 요약해 줘: 분기 매출이 전년 대비 늘었다", "이거 요약해 줘", ": 분기 매출이 전년 대비 늘었다", "colon"),
    ('Translate "where is the station" into Japanese', "Translate into Japanese", '"where is the station"', "quote"),
    ("Review this: def add(a, b): return a - b", "Review this", ": def add(a, b): return a - b", "colon"),
])
def test_a_payload_is_cut_from_its_frame(text: str, frame: str, payload: str, kind: str) -> None:
    found = find_payload(text)
    assert found is not None, text
    assert found.frame == frame
    assert found.texts(text)[0] == payload
    assert found.kinds[0] == kind


@pytest.mark.parametrize("text", [
    "田中さんと会う予定を入れて",   # と = "with"
    "新幹線って何時に出る？",       # って = topic
    "誰か来た？",                   # 誰か: an indefinite pronoun
    "뭐라고?",                      # 라고 with no predicate after it
    "내일 눈 온다고 했어?",         # reported, but nothing is asked to be passed on
    "週末は箱根へ行こうと思っています",   # a thought, not a request
    "駐車場があるか教えていただけると助かります",  # conditional と
    "밥 먹고 가자",                 # -고 = "and"
    "먹고 싶어",
    "明日の天気を教えて",
    "내일 날씨 알려 줘",
    "Meet me at 7:30 tomorrow",     # a colon between digits
    "CS:GO 대회 일정 알려 줘",        # a colon inside a name
    "https://example.com 열어 줘",   # a colon inside an address
    "What's the weather in Paris?",
    "「おはよう」",                 # all payload: no frame left
    "",
])
def test_no_payload_where_the_morphology_says_none(text: str) -> None:
    assert find_payload(text) is None


def test_the_spans_point_into_the_message_in_order() -> None:
    text = "母に「傘持った？」って送って、あと兄に夕飯いらないって伝えて"
    found = find_payload(text)
    assert found is not None
    starts = [a for a, _ in found.spans]
    assert starts == sorted(starts)
    assert all(0 <= a < b <= len(text) for a, b in found.spans)
    assert "傘持った" in found.texts(text)[0] and "夕飯いらない" in found.texts(text)[-1]
    assert "送って" in found.frame and "伝えて" in found.frame and "夕飯" not in found.frame
