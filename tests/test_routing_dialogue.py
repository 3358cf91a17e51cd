"""Dialogue routing: the switch rule, versionless agent names, two-piece scoring, and the eval's sample."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from memroute import Memory
from memroute.embed import CachedEmbedder
from memroute.errors import InputError
from memroute.eval.route_eval import spread_sample
from memroute.routing import AgentRouter, ConversationRouter
from memroute.routing.cues import read_cues
from memroute.routing.documents import describe, name_words
from memroute.routing.policy import PolicyParams, TurnFeatures, carry, margin_for, user_step
from memroute.routing.query import RouterQuery
from memroute.types import Agent

SHOP = (
    Agent("Restaurants_2", "Restaurants_2", "Find restaurants and reserve a table",
          metadata={"capabilities": ["Number of seats to reserve at the restaurant", "Cuisine of the restaurant"]}),
    Agent("Events_1", "Events_1", "Find concerts and sports games and buy tickets for them",
          metadata={"capabilities": ["Number of tickets to buy", "Name of the artist or team"]}),
    Agent("Weather_1", "Weather_1", "Weather forecasts for a city and a date",
          metadata={"capabilities": ["City to get the weather for", "Chance of rain"]}),
)


@pytest.fixture(scope="module")
def router(embedder: CachedEmbedder) -> AgentRouter:
    return AgentRouter(embedder=embedder)


def test_margin_rises_for_bare_answers_and_drops_for_new_requests() -> None:
    p = PolicyParams()
    answer = margin_for(p, TurnFeatures(read_cues("I want four.", "How many tickets?"), words=2))
    request = margin_for(p, TurnFeatures(read_cues("I also need a table for two at an Italian place tonight",
                                                   "Your tickets are booked. Anything else?"), words=8))
    assert answer > request + 5  # several catalogue-scale units apart
    # Longer messages earn credit only up to the cap, so languages that need more words are not favoured.
    assert margin_for(p, TurnFeatures(read_cues("x", None), words=p.length_cap)) == margin_for(
        p, TurnFeatures(read_cues("x", None), words=p.length_cap * 3))
    # The challenger standing out of the message's scores lowers the bar; a closing never switches.
    plain = TurnFeatures(read_cues("find me a concert", None), words=3)
    assert margin_for(p, plain, standout=5.0) < margin_for(p, plain, standout=1.0)
    assert margin_for(p, TurnFeatures(read_cues("No thanks, that's all", None), words=2)) == float("inf")
    assert not read_cues("No, thank you anyway.", None).switch  # "anyway" is no switch


def test_a_japanese_or_korean_message_needs_a_larger_lead_english_is_untouched() -> None:
    p = PolicyParams()
    assert p.ja_ko_bias < 0
    words = TurnFeatures(read_cues("노동요 좀 틀어 줘", None), words=2)
    ko = replace(words, ja_ko=True)
    assert margin_for(p, ko) == pytest.approx(margin_for(p, words) - p.ja_ko_bias / p.lead)
    assert margin_for(PolicyParams(ja_ko_bias=0.0), ko) == margin_for(p, words)


@pytest.mark.parametrize(("text", "also", "another"), [
    ("I also need a taxi to the station", True, False),
    ("Can you find me a hotel as well?", True, False),
    ("I'll need a reference number too.", True, False),
    ("2 stars is too pedestrian for me", False, False),  # "too" as a degree word adds nothing
    ("What's another one?", False, True),
    ("Show me one more option", False, True),
    ("あと、ホテルも探してください", True, False),
    ("別のレストランはありますか", False, True),
    ("그리고 호텔도 찾아 주세요", True, False),
    ("The 2nd one", False, False),
])
def test_adding_a_task_and_asking_for_another_are_different_cues(text: str, also: bool, another: bool) -> None:
    cues = read_cues(text, None)
    assert (cues.also, cues.another) == (also, another)


def test_also_lowers_the_bar_and_another_raises_it() -> None:
    p = PolicyParams()
    words = 4
    plain = margin_for(p, TurnFeatures(read_cues("find me a taxi please", None), words=words))
    added = margin_for(p, TurnFeatures(read_cues("also find me a taxi", None), words=words))
    more = margin_for(p, TurnFeatures(read_cues("find me another taxi", None), words=words))
    assert added < plain < more


def test_revising_the_task_needs_a_lead_not_a_near_tie() -> None:
    p = PolicyParams()
    allowed = np.ones(3, dtype=np.bool_)
    answer = TurnFeatures(read_cues("free parking, please", None), words=2)
    scores = np.array([0.30, 0.31, 0.10], dtype=np.float32)  # the turn itself barely prefers agent 1
    near_tie = np.array([1.0, 0.9, -2.0], dtype=np.float32)
    step = user_step(p, scores, allowed, 0, near_tie, answer, floor=0.05)
    lead = float(step.evidence[1] - step.evidence[0])
    assert 0 < lead <= p.revise_lead and step.action == "stayed" and step.current == 0
    behind = np.array([1.0, 1.5, -2.0], dtype=np.float32)  # the evidence already favoured agent 1
    step = user_step(p, scores, allowed, 0, behind, answer, floor=0.05)
    assert step.action == "revised" and step.current == 1


def test_carried_evidence_caps_an_old_task_lead() -> None:
    p = PolicyParams()
    old_task = np.array([40.0, 0.0, -3.0, -3.0], dtype=np.float32)  # a long task on agent 0
    carried = carry(old_task, p.drift)
    assert carried.argmax() == 0 and -0.1 < carried.max() <= 0.0  # relative to the best agent: bounded
    # The lead an old task keeps is bounded by the drift (about -drift + log(n - 1) units), not by its length.
    assert 0 < carried[0] - carried[1] < -p.drift + np.log(3) + 0.1
    close_race = carry(np.array([0.0, -1.0, -3.0], dtype=np.float32), p.drift).tolist()
    assert close_race == sorted(close_race, reverse=True)  # order kept
    # A closing ends nothing: no move is assumed, the lead is kept.
    assert carry(old_task, p.drift, closing=True)[0] - carry(old_task, p.drift, closing=True)[1] == 40.0
    assert carry(np.array([3.0], dtype=np.float32), p.drift).tolist() == [0.0]  # one agent: nothing to move to


def test_a_missed_switch_is_caught_by_the_following_turns() -> None:
    """Terse answers of a new task (below the switch margin) revise it within a few turns, however long the old
    task was; as a plain sum the 40 units of the old task would have needed a dozen turns."""
    p = PolicyParams()
    allowed = np.ones(4, dtype=np.bool_)
    answer = TurnFeatures(read_cues("yes, two please", None), words=2)
    scores = np.array([0.30, 0.45, 0.25, 0.25], dtype=np.float32)  # each turn favours agent 1
    evidence = np.array([40.0, 0.0, -3.0, -3.0], dtype=np.float32)
    actions = []
    for _ in range(4):
        step = user_step(p, scores, allowed, 0 if not actions or actions[-1] != "revised" else 1, evidence,
                         answer, floor=0.05)
        assert step.action != "switched"  # the rule itself never fires on these
        evidence = step.evidence
        actions.append(step.action)
    assert "revised" in actions[:3]


def test_version_numbers_are_not_words_of_an_agent() -> None:
    assert name_words("Restaurants_2") == "Restaurants"
    assert name_words("summarizer-v2.1") == "summarizer"
    assert name_words("Top_10") == "Top"
    assert name_words("42") == "42"  # a name that is only a number keeps it
    doc = describe(SHOP[0])
    assert "2" not in doc.doc_tokens and not doc.pieces[0].startswith("Restaurants 2")


def test_two_best_pieces_are_averaged(router: AgentRouter) -> None:
    index = router.index(SHOP)
    query = router.prepare(RouterQuery(text="two tickets for the football game on Sunday"))
    strategy = next(s for s in router.strategies if s.name == "embedding")
    got = strategy.scores(query, index)
    assert query.vector is not None
    for i, entry in enumerate(index.entries):
        assert entry.piece_vectors is not None
        sims = np.sort(entry.piece_vectors @ query.vector)[::-1]
        assert got[i] == pytest.approx(float(np.clip(sims[:2].mean(), 0, 1)), abs=1e-5)


def test_short_answers_stay_and_a_new_request_moves(memory: Memory, router: AgentRouter) -> None:
    conv = ConversationRouter(memory, SHOP, router=router)
    first = conv.route("Find me tickets for a basketball game in Chicago", session="d1")
    assert first.agent is not None and first.agent.id == "Events_1"
    memory.add_message("d1", "assistant", "How many tickets do you want, and for which day?")
    for answer in ("Four.", "The 2nd", "Yes please"):
        kept = conv.route(answer, session="d1")
        assert kept.agent is not None and kept.agent.id == "Events_1", (answer, kept.reason)
        memory.add_message("d1", "assistant", "Okay. Anything else about the game?")
    memory.add_message("d1", "assistant", "Your 4 tickets are booked. Anything else?")
    moved = conv.route("I also need a table for four at an Italian restaurant near the arena", session="d1")
    assert moved.agent is not None and moved.agent.id == "Restaurants_2" and moved.action == "switched"
    assert "margin" in moved.reason


def test_history_does_not_hold_back_a_self_contained_message(memory: Memory, router: AgentRouter) -> None:
    alone = ConversationRouter(memory, SHOP, router=router).route(
        "What is the weather forecast for Boston tomorrow, will it rain?", session="fresh")
    conv = ConversationRouter(memory, SHOP, router=router)
    conv.route("Book a table for two at a sushi restaurant tonight", session="long")
    for reply, user in (("Which time?", "At 7 pm, a restaurant table by the window"),
                        ("Booked. Anything else?", "Thanks!")):
        memory.add_message("long", "assistant", reply)
        conv.route(user, session="long")
    later = conv.route("What is the weather forecast for Boston tomorrow, will it rain?", session="long")
    assert alone.agent is not None and later.agent == alone.agent and later.action == "switched"


def test_spread_sample_is_deterministic_and_covers_the_file() -> None:
    items = list(range(100))
    assert spread_sample(items, 4) == [0, 25, 50, 75]
    assert spread_sample(items, 4) == spread_sample(items, 4)
    assert spread_sample(items, 500) == items
    with pytest.raises(InputError, match="at least one"):
        spread_sample(items, 0)
