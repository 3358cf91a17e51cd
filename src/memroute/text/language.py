"""Language detection for English, Japanese and Korean, and splitting mixed text into language spans.

Detection is by script, which is exact for the three languages memroute serves: Hangul is Korean, kana is
Japanese, Han characters are Japanese unless the text around them is Korean, Latin letters are English.
Digits, punctuation and spaces are neutral and join the span they sit in.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memroute.types import Language


@dataclass(frozen=True, slots=True)
class Span:
    """A run of ``text[start:end]`` in one language."""

    start: int
    end: int
    language: Language


def normalize(text: str) -> str:
    """NFKC (full-width ASCII to half-width, half-width kana to full-width), no case change."""
    return unicodedata.normalize("NFKC", text)


def char_script(ch: str) -> str:
    """One of ``hangul``, ``kana``, ``han``, ``latin``, ``other`` (letters of other scripts), ``neutral``."""
    o = ord(ch)
    if 0xAC00 <= o <= 0xD7A3 or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
        return "hangul"
    if 0x3040 <= o <= 0x30FF or 0x31F0 <= o <= 0x31FF or 0xFF66 <= o <= 0xFF9F:
        return "kana"
    if 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FFFF:
        return "han"
    if ch == "々" or ch == "〆":
        return "han"
    if ("a" <= ch <= "z") or ("A" <= ch <= "Z") or ("\uff21" <= ch <= "\uff5a"):
        return "latin"
    if ch.isalpha():
        cat = unicodedata.name(ch, "")
        return "latin" if cat.startswith("LATIN") else "other"
    return "neutral"


_SCRIPT_LANGUAGE: dict[str, Language] = {"hangul": "ko", "kana": "ja", "han": "ja", "latin": "en"}


_COUNTERS = {
    "hangul": re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]"),
    "kana": re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]"),
    "han": re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\U00020000-\U0002ffff々〆]"),
    "latin": re.compile(r"[A-Za-z\uff21-\uff3a\uff41-\uff5a\u00c0-\u024f]"),
}


def detect_language(text: str) -> Language:
    """The dominant language of ``text`` by letters; ``und`` when there are no en/ja/ko letters.

    Any kana makes Japanese win over English (Japanese text is full of Latin names); any Hangul makes
    Korean win over Han characters (Korean text may quote Hanja). Letters are counted with regular
    expressions (C speed), not character by character.
    """
    sample = text[:20_000]
    if sample.isascii():
        return "en" if _COUNTERS["latin"].search(sample) else "und"
    counts = {name: len(pattern.findall(sample)) for name, pattern in _COUNTERS.items()}
    if counts["hangul"] + counts["kana"] + counts["han"]:
        if counts["hangul"] >= counts["kana"] and counts["hangul"] > 0:
            return "ko"
        return "ja"
    if counts["latin"]:
        other = sum(1 for ch in sample if ch.isalpha()) - counts["latin"]
        return "en" if counts["latin"] >= other else "und"
    return "und"


# Runs of letters of one script; everything between runs (digits, punctuation, spaces, symbols) is neutral.
_RUNS = re.compile(
    r"(?P<hangul>[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]+)"
    r"|(?P<kana>[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]+)"
    r"|(?P<han>[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff\U00020000-\U0002ffff々〆]+)"
    r"|(?P<latin>[A-Za-z\uff21-\uff3a\uff41-\uff5a\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff]+)"
    r"|(?P<other>[^\W\d_])"  # one at a time: a letter of another script must not swallow Latin after it
)


def language_spans(text: str) -> list[Span]:
    """Split ``text`` into maximal runs of one language; neutral characters join the current run.

    Han characters next to Hangul belong to the Korean run; a run of Han alone is Japanese. Runs of one
    script are found by a regular expression, not character by character.
    """
    spans: list[Span] = []
    current: Language | None = None
    start = 0
    for m in _RUNS.finditer(text):
        script = m.lastgroup or "other"
        if script == "other":
            ch = m.group()
            if not ch.isalpha():
                continue  # \w also matches non-letters such as "¹": neutral
            script = char_script(ch)  # rarer Latin letters ("ﬀ") and other scripts
        lang: Language = _SCRIPT_LANGUAGE.get(script, "und")
        if script == "han" and current == "ko":
            lang = "ko"
        if current is None:
            current = lang
        elif lang != current:
            spans.append(Span(start, m.start(), current))
            start, current = m.start(), lang
    if current is None:
        return [Span(0, len(text), "und")] if text else []
    spans.append(Span(start, len(text), current))
    return spans
