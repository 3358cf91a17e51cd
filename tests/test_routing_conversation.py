"""ConversationRouter over a real SQLite file store: follow-ups, switches, restarts, bad input."""

from __future__ import annotations

import pytest

from memroute import Memory
from memroute.embed import CachedEmbedder, E5SmallEmbedder, LanguageAwareEmbedder
from memroute.errors import InputError
from memroute.routing import AgentRouter, ConversationRouter
from memroute.routing.cues import read_cues
from memroute.routing.policy import PolicyParams
from memroute.text import detect_language
from memroute.types import Agent
from tests.recording import Recording, thread_names

AGENTS = (
    Agent("translate", "Translator", "Translates sentences between languages such as English, French and Japanese"),
    Agent("code_review", "Code reviewer", "Reviews source code for bugs, style and performance"),
    Agent("weather", "Weather", "Weather forecasts and current conditions for a city"),
)


@pytest.fixture(scope="module")
def router(embedder: CachedEmbedder) -> AgentRouter:
    return AgentRouter(embedder=embedder)


def test_follow_up_stays_and_explicit_switch_moves(memory: Memory, router: AgentRouter) -> None:
    conv = ConversationRouter(memory, AGENTS, router=router)
    first = conv.route("Translate 'good morning' into Japanese", session="s1")
    assert first.agent is not None and first.agent.id == "translate" and first.action == "routed"
    memory.add_message("s1", "assistant", "おはようございます")
    follow = conv.route("Now to French", session="s1")
    assert follow.agent is not None and follow.agent.id == "translate"
    assert follow.action in ("stayed", "revised") and follow.previous == "translate"
    assert len(follow.candidates) == 3 and set(follow.scores) == {a.id for a in AGENTS}  # runners-up too
    switch = conv.route("By the way, what's the weather forecast for Tokyo tomorrow?", session="s1")
    assert switch.agent is not None and switch.agent.id == "weather" and switch.action == "switched"
    assert "switch" in switch.cues and "weather" in switch.reason
    log = memory.recent_messages("s1")
    assert [m.role for m in log] == ["user", "assistant", "user", "user"]


def test_thanks_never_switches(memory: Memory, router: AgentRouter) -> None:
    conv = ConversationRouter(memory, AGENTS, router=router)
    conv.route("Please review this Python function for bugs", session="s2")
    memory.add_message("s2", "assistant", "Line 3 has an off-by-one error. Anything else?")
    thanks = conv.route("No thanks, that's all!", session="s2")
    assert thanks.agent is not None and thanks.agent.id == "code_review" and "closing" in thanks.cues


def test_state_survives_a_restart(db_url: str, embedder: CachedEmbedder, router: AgentRouter) -> None:
    with Memory.open(db_url, owner="bob", embedder=embedder) as mem:
        ConversationRouter(mem, AGENTS, router=router).route("Review my pull request please", session="r")
    with Memory.open(db_url, owner="bob", embedder=embedder) as mem:
        again = ConversationRouter(mem, AGENTS, router=AgentRouter(embedder=embedder))
        decision = again.route("and what about performance?", session="r")
        assert decision.previous == "code_review" and decision.agent is not None
        assert decision.agent.id == "code_review"
        state = mem.store.get_state("routing", "r", "bob")
        assert state is not None and state["current"] == "code_review"
    with Memory.open(db_url, owner="carol", embedder=embedder) as mem:  # another owner: another session
        other = ConversationRouter(mem, AGENTS, router=router).route("and what about performance?", session="r")
        assert other.previous is None and other.action == "routed"


def test_emoji_unknown_session_and_bad_input(memory: Memory, router: AgentRouter) -> None:
    conv = ConversationRouter(memory, AGENTS, router=router)
    fresh = conv.route("😀", session="never-seen")
    assert fresh.agent is None and fresh.action == "no_route"
    conv.route("What's the weather in Seoul?", session="e")
    kept = conv.route("👍", session="e")
    assert kept.agent is not None and kept.agent.id == "weather" and kept.action == "kept"
    with pytest.raises(InputError, match="session"):
        conv.route("hello", session="")
    with pytest.raises(InputError, match="empty"):
        conv.route("  ", session="e")
    with pytest.raises(InputError, match="no agents"):
        ConversationRouter(memory, [], router=router)
    with pytest.raises(InputError, match="get_state"):
        ConversationRouter(object(), AGENTS, router=router)


def test_japanese_and_korean_conversations(memory: Memory, router: AgentRouter) -> None:
    conv = ConversationRouter(memory, AGENTS, router=router)
    assert conv.route("明日の大阪の天気を教えて", session="ja").agent == AGENTS[2]
    memory.add_message("ja", "assistant", "明日の大阪は晴れです。")
    moved = conv.route("ところで、この文を英語に翻訳してください", session="ja")
    assert moved.agent == AGENTS[0] and "switch" in moved.cues
    assert conv.route("이 코드 리뷰해 주세요", session="ko").agent == AGENTS[1]


def test_cues() -> None:
    assert read_cues("I also need a taxi", None).also
    assert read_cues("No, that's all. Thank you!", None).closing
    assert not read_cues("Thanks! Now find me a hotel", None).closing
    assert read_cues("ありがとうございました", None).closing
    assert read_cues("그런데 날씨는?", None).switch
    assert read_cues("ok", "Your table is booked. Anything else?").assistant_done


def test_a_reply_is_encoded_only_when_the_turn_stays(memory: Memory, embedder: CachedEmbedder) -> None:
    seen: list[str] = []
    counting = Recording(embedder, seen.extend)

    conv = ConversationRouter(memory, AGENTS, router=AgentRouter(embedder=counting))
    conv.route("Please review this Python function for bugs", session="enc")
    memory.add_message("enc", "assistant", "Line 3 has an off-by-one error in the loop.")
    switch = conv.route("By the way, what's the weather forecast for Tokyo tomorrow?", session="enc")
    assert switch.action == "switched" and "Line 3 has an off-by-one error in the loop." not in seen
    memory.add_message("enc", "assistant", "Tomorrow in Tokyo: sunny, 21 degrees.")
    stay = conv.route("and the day after?", session="enc")
    assert stay.action in ("stayed", "revised") and stay.agent is not None and stay.agent.id == "weather"
    assert "Tomorrow in Tokyo: sunny, 21 degrees." in seen  # a turn that stays reads the reply's evidence


def test_a_reply_added_through_the_router_is_encoded_when_logged(memory: Memory, embedder: CachedEmbedder) -> None:
    seen: list[str] = []
    counting = Recording(embedder, seen.extend)

    turns = [("Please review this Python function for bugs", "Line 3 has an off-by-one error in the loop."),
             ("and is the naming style fine?", "The names are fine, but the loop could be a comprehension."),
             ("By the way, what's the weather forecast for Tokyo tomorrow?", "Tomorrow in Tokyo: sunny, 21 degrees."),
             ("and the day after?", "Cloudy, 18 degrees.")]
    ahead = ConversationRouter(memory, AGENTS, router=AgentRouter(embedder=counting))
    logged = ConversationRouter(memory, AGENTS, router=AgentRouter(embedder=embedder))
    for user, reply in turns:
        before = len(seen)
        first = ahead.route(user, session="ahead")
        assert seen[before:] == [user]  # the turn encodes the message only: the reply was encoded when logged
        second = logged.route(user, session="logged")
        assert (first.agent, first.action, first.scores) == (second.agent, second.action, second.scores)
        ahead.add_reply("ahead", reply)
        assert seen[-1] == reply
        memory.add_message("logged", "assistant", reply)
    stored = memory.recent_messages("ahead", limit=2)
    assert [(m.role, m.text) for m in stored] == [("user", turns[-1][0]), ("assistant", turns[-1][1])]
    with pytest.raises(InputError):
        ahead.add_reply("ahead", "  ")
    with pytest.raises(InputError):
        ahead.add_reply("", "a reply")


def test_the_message_is_encoded_on_a_worker_beside_the_rest_of_the_turn(memory: Memory,
                                                                         embedder: CachedEmbedder) -> None:
    threads: list[str] = []
    where = Recording(embedder, thread_names(threads))

    class Inline(ConversationRouter):
        encode_ahead = False

    e5 = E5SmallEmbedder()
    language_aware = LanguageAwareEmbedder(where, lambda: e5, e5.model_id, e5.dimension)
    alone = PolicyParams(with_previous=0.0)  # the message's own encoding (the pair's: the tests below)
    # (no request bank: this English-described catalogue would embed it on the first Japanese turn)
    ahead = ConversationRouter(memory, AGENTS, router=AgentRouter(embedder=language_aware, bank="off"), params=alone)
    inline = Inline(memory, AGENTS, router=AgentRouter(embedder=LanguageAwareEmbedder(
        embedder, lambda: e5, e5.model_id, e5.dimension), bank="off"), params=alone)
    for text in ("Please review this Python function for bugs", "and is the naming fine?",
                 "What's the weather in Tokyo tomorrow?", "これを英語に翻訳して", "이 문장 번역해 줘"):
        threads.clear()
        first, second = ahead.route(text, session="ahead"), inline.route(text, session="inline")
        # e5's ~20-30 ms go to a worker; use-m3's ~2 ms are not worth handing over
        on_worker = [name.startswith("memroute-embed") for name in threads]
        assert on_worker == [detect_language(text) in ("ja", "ko")]
        assert (first.agent, first.action, first.scores) == (second.agent, second.action, second.scores)


def test_a_korean_turn_that_stays_is_read_with_the_previous_user_turn(memory: Memory,
                                                                      embedder: CachedEmbedder) -> None:
    seen: list[str] = []
    threads: list[str] = []
    e5 = E5SmallEmbedder()
    language_aware = LanguageAwareEmbedder(Recording(embedder, thread_names(threads)), lambda: e5, e5.model_id,
                                           e5.dimension)
    recording = AgentRouter(embedder=Recording(language_aware, seen.extend))
    conv = ConversationRouter(memory, AGENTS, router=recording,
                              params=PolicyParams(with_previous=1.0, pair_encoded=True))
    off = ConversationRouter(memory, AGENTS, router=recording)  # by default the pair is not encoded
    first = "이 파이썬 코드 리뷰해 주세요"
    assert conv.route(first, session="pair").agent == AGENTS[1]
    conv.add_reply("pair", "3번째 줄에 버그가 있어요.")  # encoded here, not in the next turn
    follow = "변수 이름도 봐 줘"
    threads.clear()
    stay = conv.route(follow, session="pair")
    assert stay.action in ("stayed", "revised") and f"{first}\n{follow}" in seen
    # the pair is encoded on a worker, started beside the message's own encoding (not after the stay test)
    assert len(threads) == 2 and all(name.startswith("memroute-embed") for name in threads)
    memory.add_message("pair", "assistant", "변수 이름은 괜찮아요.")
    switch_text = "그런데 내일 서울 날씨 어때?"
    switch = conv.route(switch_text, session="pair")
    assert switch.action == "switched"
    # a switch never reads it: the same decision as with the reading off
    off.route(first, session="pair-off")
    memory.add_message("pair-off", "assistant", "3번째 줄에 버그가 있어요.")
    off.route(follow, session="pair-off")
    memory.add_message("pair-off", "assistant", "변수 이름은 괜찮아요.")
    unread = off.route(switch_text, session="pair-off")
    assert (switch.agent, switch.action, switch.scores) == (unread.agent, unread.action, unread.scores)
    conv.route("Please review this Python function for bugs", session="en")
    conv.route("and is the naming style fine?", session="en")
    assert not any("\n" in text for text in seen if "Python" in text)  # English messages: never
    seen.clear()
    off.route(first, session="off")
    memory.add_message("off", "assistant", "3번째 줄에 버그가 있어요.")
    assert off.route(follow, session="off").action in ("stayed", "revised")
    assert seen and not any("\n" in text for text in seen)  # off: nothing encoded in pairs


def test_the_pair_read_ahead_decides_as_the_pair_read_inline(memory: Memory, embedder: CachedEmbedder) -> None:
    class Inline(ConversationRouter):
        encode_ahead = False

    e5 = E5SmallEmbedder()
    paired = PolicyParams(with_previous=1.0, pair_encoded=True)
    ahead = ConversationRouter(memory, AGENTS, router=AgentRouter(embedder=LanguageAwareEmbedder(
        embedder, lambda: e5, e5.model_id, e5.dimension)), params=paired)
    inline = Inline(memory, AGENTS, router=AgentRouter(embedder=LanguageAwareEmbedder(
        embedder, lambda: e5, e5.model_id, e5.dimension)), params=paired)
    turns = [("この文章を英語に翻訳して", "英訳はこちらです。"), ("もう少し丁寧にできる？", "丁寧な訳です。"),
             ("ところで明日の東京の天気は？", "晴れです。"), ("夜は寒い？", "10度くらいです。")]
    for user, reply in turns:
        first, second = ahead.route(user, session="p-ahead"), inline.route(user, session="p-inline")
        assert (first.agent, first.action, first.scores, first.reason) == (
            second.agent, second.action, second.scores, second.reason)
        memory.add_message("p-ahead", "assistant", reply)
        memory.add_message("p-inline", "assistant", reply)


def test_the_message_read_with_the_previous_turn_is_task_evidence() -> None:
    from dataclasses import replace

    import numpy as np

    from memroute.routing.policy import TurnFeatures, user_step

    scores = np.array([0.50, 0.49, 0.10], dtype=np.float32)
    allowed = np.ones(3, dtype=bool)
    evidence = np.array([0.0, 0.0, -3.0], dtype=np.float32)
    plain = TurnFeatures(read_cues("ok", None), 1)
    assert user_step(PolicyParams(), scores, allowed, 0, evidence, plain, 0.05).current == 0
    paired = replace(plain, with_previous=np.array([-1.0, 1.0, 0.0], dtype=np.float32))
    step = user_step(PolicyParams(with_previous=1.0), scores, allowed, 0, evidence, paired, 0.05)
    assert step.action == "revised" and step.current == 1
    assert user_step(PolicyParams(with_previous=0.0), scores, allowed, 0, evidence, paired, 0.05).current == 0


def test_by_default_the_pair_joins_the_two_turns_own_vectors(memory: Memory, embedder: CachedEmbedder) -> None:
    e5 = E5SmallEmbedder()

    def router(seen: list[str]) -> AgentRouter:  # a fresh, uncached encoder: every call is seen
        # (no request bank: this English-described catalogue would embed it on the first Korean turn)
        return AgentRouter(embedder=Recording(LanguageAwareEmbedder(embedder, lambda: e5, e5.model_id,
                                                                    e5.dimension), seen.extend), bank="off")

    first, reply, follow = "이 파이썬 코드 리뷰해 주세요", "3번째 줄에 버그가 있어요.", "변수 이름도 봐 줘"
    seen: list[str] = []
    conv = ConversationRouter(memory, AGENTS, router=router(seen))
    alone = ConversationRouter(memory, AGENTS, router=router([]), params=PolicyParams(with_previous=0.0))
    for c, session in ((conv, "joined"), (alone, "alone"), (conv, "restarted")):
        assert c.route(first, session=session).agent == AGENTS[1]
        memory.add_message(session, "assistant", reply)
    seen.clear()
    stay = conv.route(follow, session="joined")
    assert stay.action in ("stayed", "revised")
    assert sorted(seen) == sorted([reply, follow])  # nothing read in pairs is encoded, nor the previous turn again
    # a restarted process reads the previous turn's vector from the session's state, not from a cache
    seen_after: list[str] = []
    restarted = ConversationRouter(memory, AGENTS, router=router(seen_after))
    seen_after.clear()  # (the catalogue's own encoding)
    again = restarted.route(follow, session="restarted")
    assert sorted(seen_after) == sorted([reply, follow])
    assert (again.agent, again.action, again.scores) == (stay.agent, stay.action, stay.scores)
    alone.route(follow, session="alone")

    def evidence(session: str) -> dict[str, float]:
        state = memory.store.get_state("routing", session, "alice")
        assert state is not None
        return dict(state["evidence"])

    assert evidence("restarted") == evidence("joined") != evidence("alone")  # the pair is task evidence


def test_a_vector_stored_by_another_encoder_is_not_joined(memory: Memory, embedder: CachedEmbedder) -> None:
    """A session routed before the catalogue's encoder changed: the previous turn is encoded again by the new
    one rather than its stored vector (another model's space, maybe of the same size) joined with the message."""
    e5 = E5SmallEmbedder()

    def router(seen: list[str], strong_id: str) -> AgentRouter:  # the same vectors under another model id
        return AgentRouter(embedder=Recording(LanguageAwareEmbedder(embedder, lambda: e5, strong_id, e5.dimension),
                                              seen.extend))

    first, reply, follow = "이 파이썬 코드 리뷰해 주세요", "3번째 줄에 버그가 있어요.", "변수 이름도 봐 줘"
    before = ConversationRouter(memory, AGENTS, router=router([], e5.model_id))
    before.route(first, session="re-encoded")
    memory.add_message("re-encoded", "assistant", reply)
    stored = memory.store.get_state("routing", "re-encoded", "alice") or {}
    assert stored["vector"] and stored["vector_of"]
    seen: list[str] = []
    after = ConversationRouter(memory, AGENTS, router=router(seen, e5.model_id + "-v2"))
    seen.clear()
    decision = after.route(follow, session="re-encoded")
    assert decision.action in ("stayed", "revised")
    assert first in seen  # the stored vector was another encoder's: the previous turn is encoded again
    assert (memory.store.get_state("routing", "re-encoded", "alice") or {})["vector_of"] != stored["vector_of"]


def test_a_stored_vector_is_read_only_for_its_own_text() -> None:
    import base64

    import numpy as np

    from memroute.routing.conversation import _stored_vector, _text_key, joined

    vector = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    encoded = base64.b64encode(vector.astype("<f2").tobytes()).decode("ascii")
    state = {"vector": encoded, "vector_of": _text_key("a", "m1/3")}
    assert np.allclose(_stored_vector(state, "a", "m1/3"), vector, atol=1e-3)  # type: ignore[arg-type]
    assert _stored_vector(state, "b", "m1/3") is None  # another previous turn: not this vector
    assert _stored_vector(state, "a", "m2/3") is None  # the same text from another encoder: another space
    for broken in ("not base64!", "", "QUJD", "한국어", 3):  # corrupt, empty, an odd byte count, not ASCII, not text
        assert _stored_vector({**state, "vector": broken}, "a", "m1/3") is None
    both = joined(np.array([1.0, 0.0], dtype=np.float32), 4, np.array([0.0, 1.0], dtype=np.float32), 1)
    assert np.isclose(np.linalg.norm(both), 1.0) and both[0] == pytest.approx(2 * both[1])  # sqrt(4) : sqrt(1)


def test_japanese_and_korean_turns_are_marked_for_the_switch_rule(memory: Memory, embedder: CachedEmbedder) -> None:
    """The rule's ``ja_ko_bias`` reads exactly the turns the language-aware encoder reads with its strong part."""
    from memroute.routing.training import _Recorder

    e5 = E5SmallEmbedder()
    aware = AgentRouter(embedder=LanguageAwareEmbedder(embedder, lambda: e5, e5.model_id, e5.dimension), bank="off")
    rec = _Recorder(memory, AGENTS, router=aware, use_memories=False)
    for text in ("이 파이썬 코드 리뷰해 주세요", "Check the variable names too", "このコードも見てください"):
        rec.route(text, session="marks")
    assert [features.ja_ko for _, _, features, _, _ in rec.trace] == [True, False, True]
    plain = _Recorder(memory, AGENTS, router=AgentRouter(embedder=embedder, bank="off"), use_memories=False)
    plain.route("이 파이썬 코드 리뷰해 주세요", session="plain")
    assert not plain.trace[-1][2].ja_ko
