"""The memories a recall returns are ordered by the calibrated judge's probability (issue 21, fifth pass):
the reranker was fitted on LoCoMo with use-m3's cosine, the judge per encoder on the encoder's own scale and
on small stores too. In a small store, a memory that shares one word with the question ("gets" for "get")
no longer comes before the one that answers, in English, Japanese and across languages. Real SQLite, the
real encoder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memroute import Memory

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)

STORES = {
    "en": ([("bike", "I commute to the office by bike now; the train got too crowded."),
            ("cousin", "My cousin gets married in Lisbon this October."),
            ("tea", "My favourite tea is genmaicha."),
            ("fish", "We keep two goldfish in the kitchen.")], "How do I get to work?"),
    "ja": ([("bike", "毎朝自転車で出勤している。"),
            ("sister", "姉は毎年夏に沖縄へ行く。"),
            ("tea", "好きなお茶は玄米茶。"),
            ("fish", "台所で金魚を二匹飼っている。")], "仕事にはどうやって行くんだっけ？"),
    "en about ja": ([("bike", "毎朝自転車で出勤している。"),
                     ("sister", "My sister gets a new car next month."),
                     ("tea", "好きなお茶は玄米茶。"),
                     ("fish", "台所で金魚を二匹飼っている。")], "How do I get to work?"),
}


@pytest.mark.parametrize("case", sorted(STORES))
def test_the_memory_that_answers_comes_first_in_a_small_store(memory: Memory, case: str) -> None:
    memories, question = STORES[case]
    memory.remember_many([{"id": i, "text": t, "occurred_at": NOW - timedelta(days=10 + k)}
                          for k, (i, t) in enumerate(memories)])
    r = memory.recall(question, now=NOW)
    assert r.memories[0].memory.id == "bike"
    judged = [m.scores["judge"] for m in r.memories]
    assert judged == sorted(judged, reverse=True)  # nothing superseded here: the judge's order
    rerank = {m.memory.id: m.scores["rerank"] for m in r.memories}
    assert max(rerank, key=lambda i: rerank[i]) != "bike"  # the reranker alone put the one-word match first
