"""A keyword list in a small store counts its best hit by how much of the question it holds (issue 21, fifth
pass): min-max against the list's best made a memory that shares one word with the question 1.0, in English,
Japanese and Korean. Real SQLite, the real encoder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memroute import Memory
from memroute.retrieval import RecallOptions
from memroute.retrieval.fusion import covered, weighted

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)


@pytest.mark.parametrize(("query", "text", "share"), [
    ("How do I get to work?", "My cousin gets married in Lisbon this October.", 1 / 2),
    ("When is the vet visit for the cat?", "The vet visit for our cat is on July 3.", 1.0),
    ("仕事にはどうやって行くんだっけ？", "姉は毎年夏に沖縄へ行く。", 1 / 3),
    ("회사에 어떻게 가지?", "언니는 매년 여름에 제주도에 간다.", 0.0),
    ("", "anything", 1.0),
])
def test_covered_is_the_share_of_the_query_the_text_holds(query: str, text: str, share: float) -> None:
    assert covered(query, text) == pytest.approx(share)


def test_weighted_sums_the_scaled_lists() -> None:
    fused = weighted([{"a": 0.5}, {"a": 1.0, "b": 0.5}], [0.6, 0.4])
    assert fused == pytest.approx({"a": 0.7, "b": 0.2})


SMALL = {
    "en": ([("bike", "I ride my bicycle to the office every day."),
            ("cousin", "My cousin gets married in Lisbon this October."),
            ("tea", "My favourite tea is genmaicha.")], "How do I get to work these days?", "cousin"),
    "ja": ([("bike", "毎朝自転車で出勤している。"),
            ("sister", "姉は毎年夏に沖縄へ行く。"),
            ("tea", "好きなお茶は玄米茶。")], "仕事にはどうやって行くんだっけ？", "sister"),
    "ko": ([("bike", "요즘은 자전거로 출근한다."),
            ("sister", "언니는 매년 여름에 회사 동료들과 제주도에 간다."),
            ("tea", "제일 좋아하는 차는 현미녹차다.")], "회사에 뭐 타고 가지?", "sister"),
}


@pytest.mark.parametrize("language", sorted(SMALL))
def test_a_one_word_match_in_a_small_store_is_not_the_keyword_list_s_full_score(memory: Memory,
                                                                                 language: str) -> None:
    memories, question, one_word = SMALL[language]
    memory.remember_many([{"id": i, "text": t, "occurred_at": NOW - timedelta(days=10 + k)}
                          for k, (i, t) in enumerate(memories)])
    r = memory.recall(question, now=NOW)
    bm25 = {c.id: c.features["bm25"] for c in r.trace.candidates}
    assert 0.0 < bm25[one_word] < 0.6  # it holds one of the question's words: main gave it 1.0
    # when the searches find more memories than the reranker takes, min-max against the best stays
    full = memory.recall(question, now=NOW, options=RecallOptions(max_candidates=1))
    assert max(c.features["bm25"] for c in full.trace.candidates) == 1.0


def test_a_match_of_the_whole_question_keeps_the_full_score(memory: Memory) -> None:
    memory.remember_many([
        {"id": "vet", "text": "The vet visit for our cat is on July 3.", "occurred_at": NOW - timedelta(days=9)},
        {"id": "tea", "text": "My favourite tea is genmaicha.", "occurred_at": NOW - timedelta(days=20)},
    ])
    r = memory.recall("When is the vet visit for the cat?", now=NOW)
    assert {c.id: c.features["bm25"] for c in r.trace.candidates}["vet"] == 1.0
