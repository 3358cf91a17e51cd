"""Conversation cues that move the bar for leaving the current agent, in English, Japanese and Korean.

The bar drops when the user adds a request ("also", "I also need", 「あと」, "그리고") or announces a
switch ("by the way", 「ところで」, "그런데"), and when the assistant has just finished a task or offered
more help ("anything else?", 「他にご用件は」): the next message is then often about something new. It
rises on bare thanks and closings, which belong to the task just done. The assistant's words are only
used as such a cue, never scored against the agents: they talk about the old agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from memroute.text.language import detect_language
from memroute.text.tokenizers import analyze_tokens

# "Also" adds a task ("I also need a taxi", "a hotel as well", 「あと、ホテルも」); "another" usually asks for
# more of the same ("another one?", "what's next?"). In SGD dev a turn with the first kind moves to a new
# service far more often than one with only the second, so they are separate cues with separate weights.
_ALSO = re.compile(
    r"\b(also|as well|in addition|additionally|besides)\b|\btoo\b(?=\s*[.!?,]|\s*$)"
    r"|(あと|それと|それから|ついでに|他にも|ほかにも)"
    r"|(그리고|추가로)", re.IGNORECASE)
_ANOTHER = re.compile(
    r"\b(another|one more|and then|next)\b|(また|次に|別の)|(또|다음으로|그 다음)", re.IGNORECASE)
_REQUEST = re.compile(
    r"\b(i need|i want|i'd like|i would like|i'm looking|i am looking|can you|could you|please (find|get|book|"
    r"search|help)|find me|help me|search for|look for|i'm interested|i am interested)\b"
    r"|(探して|調べて|教えて|予約したい|知りたい|お願いします|ありますか)|(찾아|알려|예약하고|싶어요|있나요)",
    re.IGNORECASE)
_SWITCH = re.compile(
    r"\b(by the way|btw|switching|different question|unrelated)\b"
    r"|(ところで|話は変わ|別件|そういえば)"
    r"|(그런데|근데|그나저나|그건 그렇고|그건 그렇다 치고|다른 질문)", re.IGNORECASE)
_CLOSING = re.compile(
    r"\b(thanks?|thank you|thx|that'?s (all|it|everything)|that is (all|it)|that will be all|nothing else|"
    r"no more|i'?m done|i am done|all set|bye|goodbye|not (right )?now|no,? that'?s|nope|you'?ve been|"
    r"you have been|have a (good|nice|great))\b"
    r"|(ありがとう|以上です|大丈夫です|結構です|失礼します)|(감사|고맙|괜찮아요|됐어요|수고)", re.IGNORECASE)
_ASSISTANT_DONE = re.compile(
    r"\b(anything else|something else|else i can|else can i|any other|further assist|more help|"
    r"successfully|is confirmed|has been (booked|reserved|made|confirmed|scheduled|sent|set)|"
    r"have (booked|reserved|made|set)|is booked|all set|is done|completed)\b"
    r"|(他に|ほかに|何かございますか|完了|承りました|予約いたしました|予約しました|お手伝いできること)"
    r"|(더 필요|다른 도움|완료|예약되었습니다|예약했습니다)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Cues:
    """What the last exchange says about leaving the current agent (names, for explanations)."""

    also: bool = False
    another: bool = False
    request: bool = False
    switch: bool = False
    closing: bool = False
    assistant_done: bool = False
    new_request: bool = False
    """Japanese / Korean: a request predicate with a content noun the recent conversation did not mention
    (「歯医者入れといて」 after talk of the weather), read from the morphology (:func:`read_morphology`)."""

    @property
    def names(self) -> tuple[str, ...]:
        names = ("also", "another", "request", "switch", "closing", "assistant_done", "new_request")
        return tuple(n for n in names if getattr(self, n))


# The additive particle: Japanese も, Korean 도 ("a hotel too", 「レストランも」, "날씨도"). Read from the
# morphology rather than the string (も and 도 occur inside many words: いつも, 온도), and only after a noun,
# possibly through a case particle (「ホテルにも」, "호텔에도"): after a pronoun it is mostly "nothing" or
# "nobody" (何も, 아무도) or "me too" (私も, 저도), after a verb a concession (行っても).
_ADDITIVE = {"ja": "も", "ko": "도"}
_NOUNS = frozenset({"noun", "propn", "num", "foreign", "root", "hanja"})
_CONTENT_NOUNS = frozenset({"noun", "propn", "foreign", "root", "hanja"})
# A request predicate, read from the morphology: a verb with a benefactive auxiliary ("...해 줘",
# 「〜してください」「〜してくれる」「〜していただけますか」), a desiderative one ("...하고 싶어",
# 「〜したい」「〜してほしい」) or one of doing in advance ("적어 놔", "쟁여 둘까", 「入れとく」「書いておいて」);
# (Japanese) a verb's te-form closing the sentence, the casual request 「流して」; (Korean) a message
# closing on a verb's plain form, the casual imperative or question ("소리 좀 키워", "내일 비 와?").
# These are the auxiliaries' lemmas, a closed class of the grammar, not words of any one domain.
_REQUEST_AUX = {"ja": frozenset({"下さる", "くれる", "欲しい", "たい", "頂く", "貰う", "とく", "置く"}),
                "ko": frozenset({"주", "드리", "싶", "놓", "두"})}
_JA_SENTENCE_FINAL = frozenset({"よ", "ね", "な", "ー"})
# Lemmas of thanks (the tokenizers' normalised forms): any politeness level or casual spelling maps to them.
_THANKS = {"ja": frozenset({"有り難う", "有り難い", "サンキュー"}), "ko": frozenset({"고맙", "땡큐", "감사"})}
# "Oh right": an interjection, then a word of agreeing or remembering (아 맞다, 아 참, 「あ、そうだ」).
_REMEMBER = {"ja": frozenset({"そう", "然う"}), "ko": frozenset({"맞", "참"})}


@dataclass(frozen=True, slots=True)
class Morphology:
    """What the morphology of a Japanese or Korean message says (:func:`read_morphology`)."""

    additive: bool = False
    """A noun marked with the additive particle (「レストランも」, "날씨도")."""
    request: bool = False
    """A request predicate (benefactive or desiderative auxiliary, or a Japanese clause-final te-form)."""
    nouns: frozenset[str] = frozenset()
    """The content nouns' lemmas (numbers left out: a time or a count is an answer, not a new topic)."""
    thanks: bool = False
    """A word of thanks by its lemma, whatever its form (ありがと / ありがとう → 有り難う, 고마워 / 고마워요 → 고맙,
    감사해요 → 감사 + 하, 땡큐, サンキュー)."""
    remembered: bool = False
    """A message opening on "oh right" (아 맞다, 아 참, 「あ、そうだ」): the user remembers something else."""


def read_morphology(text: str) -> Morphology | None:
    """The morphological cues of a Japanese or Korean message (``None`` for any other language)."""
    language = detect_language(text)
    if language not in _ADDITIVE:
        return None
    tokens = [t for t in analyze_tokens(text) if t.pos not in ("symbol", "space")]
    particle, aux = _ADDITIVE[language], _REQUEST_AUX[language]
    additive = request = False
    for i, tok in enumerate(tokens):
        if tok.pos == "particle" and tok.surface == particle and tok.language == language and not additive:
            j = i - 1
            while j >= 0 and tokens[j].pos == "particle":
                j -= 1
            additive = j >= 0 and tokens[j].pos in _NOUNS
        # the auxiliary follows a verb (or a noun's verbal suffix: "주문해 줘"), directly or through its
        # connective ending / te-form particle
        if tok.norm in aux and tok.pos in ("verb", "aux", "adj") and i > 0 and tokens[i - 1].pos in (
                "verb", "aux", "suffix", "ending", "particle"):
            request = True
    if language == "ko" and tokens and tokens[-1].pos == "verb":
        request = True
    if language == "ja" and not request:
        j = len(tokens) - 1
        while j >= 0 and tokens[j].pos == "particle" and tokens[j].surface in _JA_SENTENCE_FINAL:
            j -= 1
        request = j >= 1 and tokens[j].surface in ("て", "で") and tokens[j - 1].pos in ("verb", "aux")
    thanks_lemmas = _THANKS[language]
    # 감사 is also "audit": only as a verb (감사해요, 감사합니다), i.e. followed by the verbal suffix
    thanks = any(t.norm in thanks_lemmas and (t.norm != "감사" or (
        i + 1 < len(tokens) and tokens[i + 1].pos == "suffix")) for i, t in enumerate(tokens))
    remembered = len(tokens) > 1 and tokens[0].pos == "intj" and tokens[1].norm in _REMEMBER[language]
    nouns = frozenset(t.norm for t in tokens
                      if t.is_content and t.pos in _CONTENT_NOUNS and t.norm not in thanks_lemmas)
    return Morphology(additive, request, nouns, thanks, remembered)


def additive_particle(text: str) -> bool:
    """True when a Japanese or Korean message marks a noun with the additive particle (see above)."""
    if detect_language(text) not in _ADDITIVE:
        return False
    reading = read_morphology(text)
    return reading is not None and reading.additive


def _lemmas(texts: Sequence[str]) -> set[str]:
    return set().union(*(_text_lemmas(text) for text in texts))


@lru_cache(maxsize=4096)
def _text_lemmas(text: str) -> frozenset[str]:
    """A message's content lemmas (cached: each turn reads the same recent messages as the turn before)."""
    return frozenset(t.norm for t in analyze_tokens(text) if t.is_content)


def read_cues(user_text: str, assistant_text: str | None, history: Sequence[str] = ()) -> Cues:
    """The cues of a user message; ``assistant_text`` is the assistant's last reply, ``history`` the recent
    messages of the conversation (user and assistant), read for the lemmas a new request brings."""
    text = user_text.strip()
    reading = read_morphology(text)
    new_request = False
    if reading is not None and reading.request and reading.nouns:
        new_request = bool(reading.nouns - _lemmas(history))
    thanks = reading is not None and reading.thanks and not reading.request
    return Cues(
        also=bool(_ALSO.search(text)) or (reading is not None and reading.additive),
        another=bool(_ANOTHER.search(text)),
        request=bool(_REQUEST.search(text)),
        switch=bool(_SWITCH.search(text)) or (reading is not None and reading.remembered),
        # A closing is short and asks for nothing new: "No thanks, that's all", not "Thanks! Now a taxi".
        closing=(bool(_CLOSING.search(text)) or thanks) and len(text.split()) <= 15 and len(text) <= 90
        and "?" not in text and "？" not in text and not _REQUEST.search(text) and not _ALSO.search(text)
        and not _ANOTHER.search(text) and not (reading is not None and reading.request),
        assistant_done=bool(assistant_text and _ASSISTANT_DONE.search(assistant_text)),
        new_request=new_request,
    )
