"""Small number words in English, Japanese and Korean, for "three days ago", 「三日前」, "사흘 전"."""

from __future__ import annotations

EN_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "a couple of": 2,
}
EN_NUMBER_RE = r"(?:\d{1,4}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a\s+couple\s+of)"

_KANJI_DIGITS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
JA_NUMBER_RE = r"(?:\d{1,4}|[一二三四五六七八九十]{1,3})"

KO_NATIVE_DAYS = {"하루": 1, "이틀": 2, "사흘": 3, "나흘": 4, "닷새": 5, "엿새": 6, "이레": 7}
_KO_NATIVE = {"한": 1, "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9, "열": 10}
KO_NUMBER_RE = r"(?:\d{1,4}|한|두|세|네|다섯|여섯|일곱|여덟|아홉|열)"


def parse_number(word: str) -> int | None:
    """An integer from digits or a number word; ``None`` when it is not one."""
    w = " ".join(word.lower().split())
    if w.isdigit():
        return int(w)
    if w in EN_NUMBERS:
        return EN_NUMBERS[w]
    if w in _KO_NATIVE:
        return _KO_NATIVE[w]
    if w and all(c in _KANJI_DIGITS or c == "十" for c in w):
        return _kanji(w)
    return None


def _kanji(w: str) -> int | None:
    if "十" not in w:
        return _KANJI_DIGITS.get(w) if len(w) == 1 else None
    tens, _, ones = w.partition("十")
    t = 1 if not tens else _KANJI_DIGITS.get(tens)
    o = 0 if not ones else _KANJI_DIGITS.get(ones)
    if t is None or o is None:
        return None
    return t * 10 + o
