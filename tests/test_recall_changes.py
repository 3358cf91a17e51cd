"""Recall in a small personal store, real SQLite and the real encoder: no cosine floor empties it, and a
fact that changed is answered by its newer memory (explicit ``supersedes=`` or a change said in words)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memroute import Memory
from memroute.errors import InputError, NotFoundError
from memroute.memory import AsyncMemory
from memroute.retrieval.changes import change_cue
from memroute.retrieval.strategy import SearchParams

NOW = datetime(2025, 6, 18, 9, tzinfo=UTC)


def _at(days: int) -> datetime:
    return NOW - timedelta(days=days)


def test_a_cosine_floor_never_drops_the_only_candidates(memory: Memory) -> None:
    memory.remember_many([
        {"id": "park", "text": "Level B3, pillar 12, next to the lifts", "occurred_at": _at(1)},
        {"id": "plant", "text": "The fern needs water twice a week", "occurred_at": _at(9)},
        {"id": "bday", "text": "Mum turns sixty on 3 October", "occurred_at": _at(30)},
    ])
    question = "where did I park?"
    qv = memory.embedder.embed([question], side="query")[0]
    cosine = float(qv @ memory.store.get_vectors(["park"], "alice")["park"])
    assert cosine < SearchParams().similarity_threshold  # the floor alone would have dropped it
    r = memory.recall(question, now=NOW)
    assert "park" in [c.id for c in r.trace.candidates]
    assert "no memory" not in " ".join(r.trace.notes)


def test_supersedes_ranks_the_newer_fact_first_and_marks_the_older(memory: Memory) -> None:
    memory.remember("My dentist is Dr Ortiz on Hill Street", id="old", occurred_at=_at(200))
    memory.remember("My dentist is now Dr Baker at the Riverside clinic", id="new", occurred_at=_at(10),
                    supersedes="old")
    assert memory.get("new").metadata["supersedes"] == ["old"]
    r = memory.recall("Who is my dentist?", now=NOW)
    ids = [m.memory.id for m in r.memories]
    assert ids.index("new") < ids.index("old")
    assert r.trace.superseded == {"old": "new"}
    old = next(m for m in r.memories if m.memory.id == "old")
    assert old.superseded_by == "new" and old.to_dict()["superseded_by"] == "new"
    assert memory.get("old").text.startswith("My dentist")  # kept, not deleted
    if r.should_inject and old.relevance != "none":
        pack = r.memory_pack()
        assert "superseded by a newer memory" in pack
        assert pack.index("Dr Baker") < pack.index("Dr Ortiz")


def test_supersedes_must_name_stored_memories(memory: Memory) -> None:
    with pytest.raises(NotFoundError, match="supersedes names no memory"):
        memory.remember("I moved to Lyon", supersedes="nope")
    with pytest.raises(InputError, match="supersedes must be"):
        memory.remember("I moved to Lyon", supersedes=[""])
    assert memory.list() == []


async def test_async_remember_takes_supersedes(memory: Memory) -> None:
    amem = AsyncMemory(memory)
    await amem.remember("Our wifi password is on the fridge", id="w1", occurred_at=_at(90))
    item = await amem.remember("We changed the wifi password; it is in the drawer now", id="w2",
                               occurred_at=_at(2), supersedes=["w1"])
    assert item.metadata["supersedes"] == ["w1"]


@pytest.mark.parametrize(("text", "cue"), [
    ("We relocated to Porto in spring", "relocated"),
    ("I don't take the bus anymore", "anymore"),
    ("I no longer eat meat", "longer"),
    ("名古屋に引っ越しました", "引っ越し"),
    ("朝はお茶に変えた", "変え"),
    ("もう甘いものは食べない", "もう"),
    ("대전으로 이사했어요", "이사"),
    ("아침 운동을 수영으로 바꿨다", "바꿨"),
    ("더 이상 야근을 하지 않는다", "이상"),
])
def test_change_cues_are_read_from_morphology(text: str, cue: str) -> None:
    assert change_cue(text) == cue


@pytest.mark.parametrize("text", ["I take the bus to work", "甘いものは食べない", "야근을 하지 않는다",
                                  "名古屋に住んでいる"])
def test_statements_without_a_change_have_no_cue(text: str) -> None:
    assert change_cue(text) is None


@pytest.mark.parametrize(("old", "new", "question"), [
    ("I take the number 7 bus to work", "I switched to cycling to work in May", "How do I get to work?"),
    ("週末はテニスをしている", "週末のテニスはやめて、今はヨガをしている", "週末は何をしている？"),
    ("저녁에는 헬스장에서 운동한다", "저녁 운동을 수영으로 바꿨다", "저녁에 무슨 운동을 해?"),
])
def test_a_change_said_in_words_puts_the_newer_fact_first(memory: Memory, old: str, new: str,
                                                           question: str) -> None:
    memory.remember_many([
        {"id": "old", "text": old, "occurred_at": _at(300)},
        {"id": "new", "text": new, "occurred_at": _at(20)},
        {"id": "other", "text": "The car insurance renews in January", "occurred_at": _at(40)},
    ])
    r = memory.recall(question, now=NOW)
    ids = [m.memory.id for m in r.memories]
    assert r.trace.superseded == {"old": "new"}
    assert ids.index("new") < ids.index("old")
    relevant = [m.memory.id for m in r.memories if m.relevance != "none"]
    if "old" in relevant:  # whenever the stale fact is offered, the newer one is offered above it
        assert "new" in relevant and relevant.index("new") < relevant.index("old")
        assert r.trace.superseded == {"old": "new"}


def test_unrelated_newer_memories_supersede_nothing(memory: Memory) -> None:
    memory.remember_many([
        {"id": "a", "text": "I take the number 7 bus to work", "occurred_at": _at(300)},
        {"id": "b", "text": "We switched the kids to a new piano teacher", "occurred_at": _at(20)},
    ])
    r = memory.recall("How do I get to work?", now=NOW)
    assert "a" not in r.trace.superseded


def test_a_shared_word_alone_does_not_make_a_change_about_the_same_subject(memory: Memory) -> None:
    # The move says something changed and shares "dog" with the dog's memory, but it is news about the
    # flat, not about the dog: the fitted sameness model (store-relative cosine, token overlap, nearest
    # neighbour) links the move to the flat only.
    memory.remember_many([
        {"id": "dog", "text": "Our dog Rufus is a six-year-old beagle", "occurred_at": _at(400)},
        {"id": "flat", "text": "We rent a small flat in the city centre of York", "occurred_at": _at(500)},
        {"id": "move", "text": "We moved out of the city centre; we're in a house in Harrogate now, with a garden "
                               "for the dog", "occurred_at": _at(30)},
        {"id": "job", "text": "I work night shifts at the hospital pharmacy", "occurred_at": _at(200)},
        {"id": "car", "text": "My car is a grey Toyota Yaris", "occurred_at": _at(150)},
        {"id": "mum", "text": "Mum's birthday is on 12 March", "occurred_at": _at(90)},
    ])
    r = memory.recall("What breed is Rufus?", now=NOW)
    assert "dog" not in r.trace.superseded
    assert r.memories[0].memory.id == "dog"
    assert memory.recall("Where do we live?", now=NOW).trace.superseded.get("flat") == "move"


def test_sameness_is_store_relative() -> None:
    from memroute.retrieval.changes import sameness

    # the same cosine is the same subject in a store whose memories are far apart, not in a close one
    assert sameness(0.55, (0.15, 0.1), 0.0, True) >= 0.5
    assert sameness(0.55, (0.50, 0.1), 0.0, True) < 0.5


def test_the_sameness_fit_learns_that_close_pairs_are_one_subject() -> None:
    from memroute.eval.changes_fit import Pair, fit, leave_one_store_out

    pairs = [Pair(f"s{i % 4}", f"a{i}", f"b{i}", (2.0 + 0.1 * (i % 5), 0.1 * (i % 3), 1.0), True) for i in range(12)]
    pairs += [Pair(f"s{i % 4}", f"c{i}", f"d{i}", (-0.5 + 0.2 * (i % 7), 0.05 * (i % 2), float(i % 5 == 0)), False)
              for i in range(40)]
    model = fit(pairs)
    assert model.probability(2.5, 0.2, True) > 0.5 > model.probability(0.0, 0.0, False)
    assert leave_one_store_out(pairs) == {"true_links": 12, "false_links": 0, "missed": 0}


def test_the_kept_cue_is_the_cue_read_again() -> None:
    from memroute.retrieval.changes import _has_cue

    texts = ["I moved to Osaka last spring", "I like tea", "もう東京には住んでいない", "이제 서울에 살아요",
             "Lunch was fine"]
    for text in texts * 2:  # the second time from the kept cues
        assert _has_cue(text) == (change_cue(text) is not None)
    assert _has_cue.cache_info().hits >= len(texts)
