"""The kind of answer a question asks for (a place, a time, a person, a number) as a reranker feature
(issue 21, third pass), in English, Japanese and Korean; the reranker's features with real SQLite and the
real encoder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memroute import Memory
from memroute.retrieval import FEATURES, default_model
from memroute.retrieval.answer_type import asked_type, holds

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)


@pytest.mark.parametrize(("question", "kind"), [
    ("Where does my sister live?", "place"),
    ("Which city are we moving to?", "place"),
    ("姉はどこに住んでる？", "place"),
    ("여동생은 어디 살아?", "place"),
    ("When is the dentist appointment?", "time"),
    ("What time does the class start?", "time"),
    ("歯医者はいつだっけ？", "time"),
    ("수업이 몇 시에 시작해?", "time"),
    ("Who is my manager?", "person"),
    ("誰と行くんだっけ？", "person"),
    ("누구랑 가기로 했지?", "person"),
    ("How many cats do we have?", "number"),
    ("How many days is the trip?", "number"),
    ("猫は何匹いる？", "number"),
    ("고양이 몇 마리 키워?", "number"),
])
def test_the_question_says_what_kind_of_answer_it_wants(question: str, kind: str) -> None:
    assert asked_type(question) == kind


@pytest.mark.parametrize("question", ["What breed is Biscuit?", "Plan a dinner menu", "おすすめある？",
                                      "맛집 추천해 줘", ""])
def test_a_question_without_a_kind_of_answer_has_none(question: str) -> None:
    assert asked_type(question) is None


@pytest.mark.parametrize(("text", "kind", "expected"), [
    ("We bought a flat in Kyoto last month", "place", True),
    ("My sister Lauren lives in Denver", "place", True),
    ("横浜の日吉に住んでいる", "place", True),
    ("망원동에서 분당으로 이사했다", "place", True),
    ("I love spicy food", "place", False),
    ("The dentist is on Tuesday at 3pm", "time", True),
    ("毎週火曜の夜はピアノ教室", "time", True),
    ("매주 월요일 오전엔 주간 회의가 있다", "time", True),
    ("I love spicy food", "time", False),
    ("My boss is strict", "person", True),
    ("夫は辛いものが苦手", "person", True),
    ("엄마 생신이 5월 8일이에요", "person", True),
    ("in the morning I run along the river", "person", False),
    ("We have two cats", "number", True),
    ("猫を二匹飼っている", "number", True),
    ("고양이 두 마리를 키운다", "number", True),
    ("We have cats", "number", False),
])
def test_a_memory_holds_a_thing_of_a_kind(text: str, kind: str, expected: bool) -> None:
    assert holds(kind, text) is expected  # type: ignore[arg-type]


def test_the_shipped_reranker_reads_the_answer_type() -> None:
    model = default_model()
    weights = dict(zip(FEATURES, model.weights, strict=True))
    assert weights["type_match"] > 0 > weights["type_miss"]


def test_a_where_question_marks_the_memory_that_holds_a_place(memory: Memory) -> None:
    memory.remember_many([
        {"id": "moved", "text": "We moved to a house in Beaverton in March", "occurred_at": NOW - timedelta(days=60)},
        {"id": "cafe", "text": "We love the little coffee shops around here", "occurred_at": NOW - timedelta(days=9)},
    ])
    r = memory.recall("Where do we live these days?", now=NOW)
    rows = {c.id: c.features for c in r.trace.candidates}
    assert rows["moved"]["type_match"] == 1.0 and rows["moved"]["type_miss"] == 0.0
    assert rows["cafe"]["type_match"] == 0.0 and rows["cafe"]["type_miss"] == 1.0
    plain = memory.recall("Tell me about the coffee shops", now=NOW)
    assert all(c.features["type_match"] == c.features["type_miss"] == 0.0 for c in plain.trace.candidates)
