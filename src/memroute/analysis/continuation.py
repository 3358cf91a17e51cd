"""Whether a message continues the current task, switches away from it, or starts afresh.

* ``switch``: an explicit change of subject, with a cue: "by the way", "unrelated:", "moving on",
  「ところで」「話は変わるけど」「別件で」, "그건 그렇고", "다른 얘기인데". A weaker cue at the start
  ("anyway", 「そういえば」, "그런데"/"근데") switches only when nothing in the message points back:
  "그런데 그거 언제 끝나?" ("but when does that end?") follows up.
* ``follow_up``: the message leans on the previous turns: an ellipsis ("Now to French", 「じゃあ英語では？」)
  or a back-reference ("make it shorter", 「あれどうなった？」). The cue is the first such reference.
* ``new``: self-contained.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from memroute.analysis.references import Found, ReferenceType

_I = re.IGNORECASE
_SWITCH_WINDOW = 100
"""Switch cues open a message: only its first characters are searched."""


class ContinuationKind(enum.StrEnum):
    NEW = "new"
    FOLLOW_UP = "follow_up"
    SWITCH = "switch"


@dataclass(frozen=True, slots=True)
class Continuation:
    kind: ContinuationKind
    cue: str | None = None
    """The words that decided it ("by the way", 「じゃあ」, "it"); ``None`` for ``new``."""
    cue_span: tuple[int, int] | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return self.kind.value


_STRONG = {
    "en": re.compile(
        r"\b(?:by\s+the\s+way|btw|unrelated|on\s+(?:an)?other\s+note|on\s+a\s+(?:different|separate|side)\s+note|"
        r"(?:different|separate|new|another|other)\s+(?:question|topic|task|request|subject)|"
        r"chang(?:e|ing)\s+(?:the\s+)?(?:subject|topic)|switch(?:ing)?\s+(?:gears|topics)|moving\s+on|"
        r"let'?s\s+move\s+on|forget\s+(?:about\s+)?(?:that|it)|never\s*mind(?:\s+that)?|"
        r"something\s+(?:else|different)|totally\s+different|(?:going|getting|coming)\s+back\s+to|"
        r"let'?s\s+go\s+back\s+to)\b", _I),
    "ja": re.compile(r"ところで|それはそうと|話(?:は|が)?変わ(?:る|り|って|ります)|話変わ|別件|別の(?:話|質問|件|"
                     r"相談|お願い)|"
                     r"関係ない(?:けど|んだけど|んですけど|ですが|話|質問)|違う話|話を戻(?:す|して|すと|しますが)|"
                     r"さて[、,]|閑話休題|それは置いと(?:いて)?"),
    "ko": re.compile(r"그건\s?그렇고|다른\s?(?:얘기|이야기|질문|주제)|딴\s?(?:얘기|이야기|질문)|별개로|별도로|"
                     r"(?:화제|주제|얘기)를\s?(?:좀\s?)?바꿔|그나저나|상관없는\s?(?:얘기|질문)|"
                     r"(?:얘기|이야기)로\s?돌아가|본론으로"),
}
_WEAK = {
    "en": re.compile(r"^\W*(?:anyway|anyways|anyhow|oh\s+(?:and|also)|one\s+more\s+thing)\b", _I),
    "ja": re.compile(r"^\W*(?:そういえば|ちなみに|あ[、,]?そうだ)"),
    "ko": re.compile(r"^\W*(?:그런데|근데|참[,\s]|아\s?참|아\s?맞다|그래서\s?말인데)"),
}


def without_switch_cue(found: list[Found], cont: Continuation) -> list[Found]:
    """After an explicit switch, the cue's own words ("forget about that") and an opening "also" or "and"
    ("Also, unrelated: ...") do not point back."""
    if cont.kind != ContinuationKind.SWITCH or cont.cue_span is None:
        return found
    s, e = cont.cue_span
    return [f for f in found if f.type == ReferenceType.TOPIC
            or not ((s <= f.start < e or (f.start < e and s < f.end))
                    or (f.type == ReferenceType.ELLIPSIS and f.start < s))]


def decide(text: str, languages: frozenset[str], found: list[Found],
           quoted: list[tuple[int, int]]) -> Continuation:
    head = text[:_SWITCH_WINDOW]
    for lang in ("en", "ja", "ko"):
        if lang in languages:
            m = _STRONG[lang].search(head)
            if m and not any(s <= m.start() < e for s, e in quoted):
                return Continuation(ContinuationKind.SWITCH, m.group(0).strip(" ,、"), (m.start(), m.end()))
    back = [f for f in found if f.type != ReferenceType.TEMPORAL]
    if not back:
        for lang in ("en", "ja", "ko"):
            if lang in languages:
                m = _WEAK[lang].search(head)
                if m:
                    return Continuation(ContinuationKind.SWITCH, m.group(0).strip(" ,、\n"))
        return Continuation(ContinuationKind.NEW, None)
    ellipses = [f for f in back if f.type == ReferenceType.ELLIPSIS]
    cue = (ellipses or back)[0].surface
    return Continuation(ContinuationKind.FOLLOW_UP, cue)
