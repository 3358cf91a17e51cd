"""The main-clause reader (memroute.analysis.clauses): a request without the clauses that set its circumstances.

The messages are written for these tests (none is in an evaluation set)."""

from __future__ import annotations

import pytest

from memroute.analysis.clauses import find_main_clause


@pytest.mark.parametrize(("text", "frame"), [
    # Korean connective endings: reason, time, purpose, condition (alone or fused with the stem)
    ("청소하면서 들을 팟캐스트 틀어 줘", "들을 팟캐스트 틀어 줘"),     # the adnominal 들을 stays with its noun
    ("손님 올 거니까 거실 불 켜 줘", "거실 불 켜 줘"),
    ("추워서 보일러 좀 올려 줘", "보일러 좀 올려 줘"),
    ("잘 수 있도록 파도 소리 틀어 줘", "파도 소리 틀어 줘"),
    ("퇴근하면 택시 불러 줘", "택시 불러 줘"),
    ("오늘 저녁 약속 있는데 식당 예약해 줘", "오늘 식당 예약해 줘"),  # the opening adverb stays
    # Japanese connective particles and conditional / purpose forms
    ("掃除しながらジャズ流して", "ジャズ流して"),
    ("寝るから電気全部消しといて", "電気全部消しといて"),
    ("寒いので暖房つけて", "暖房つけて"),
    ("集中できるように静かな曲かけて", "静かな曲かけて"),
    ("雪が降ったらタクシー呼んで", "タクシー呼んで"),
    ("来週の月曜、映画見る時間ほしいから19時から2時間押さえて", "来週の月曜、 19時から2時間押さえて"),
])
def test_the_leading_subordinate_clauses_are_dropped(text: str, frame: str) -> None:
    found = find_main_clause(text)
    assert found is not None, text
    assert found.frame == frame
    assert all(0 <= a < b <= len(text) for a, b in found.dropped)


def test_a_condition_that_is_the_requests_content_is_dropped_from_the_frame_only() -> None:
    """"비 오면 알려 줘": the frame is the bare request; the router blends it with the whole message
    (tests/test_routing_clauses.py checks the route stays with weather)."""
    found = find_main_clause("비 오면 알려 줘")
    assert found is not None and found.frame == "알려 줘"


@pytest.mark.parametrize("text", [
    "비 오면?",                         # only a subordinate clause: nothing to route on in the frame
    "出かけるから",
    "내일 아침 7시에 깨워 줘",          # a time adverbial is an argument, not a clause
    "明日の朝7時に起こして",
    "12時半から30分押さえて",           # から after a number is "from"
    "雨が強いか教えて",                 # が after a noun is the subject
    "식당 찾고 예약해 줘",              # -고 coordinates: part of the request
    "電気を消してくれる？",             # て inside one predicate chain
    "창문 열지 말아 줘",                # -지 before an auxiliary, one predicate
    "Turn the lights off because I'm going out",
    "",
])
def test_no_main_clause_where_nothing_precedes_the_request(text: str) -> None:
    assert find_main_clause(text) is None
