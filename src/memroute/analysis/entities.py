"""Named things that lexical search must not lose: quoted strings, identifiers, product and person names.

Found by patterns, not by a statistical tagger, so they are fast and predictable:

* quoted text: "...", “...”, '...', `...`, 「...」, 『...』 (the text inside, kept whole);
* identifiers: ``LoginService``, ``get_user``, ``os.path.join``, ``config.toml``, ``src/app/main.py``,
  ``JIRA-123``, ``@alice``, ``#deploys``, URLs, versions (``v2.1``), acronyms (``API``, ``S3``);
* names: runs of capitalised words ("Project X", "Google Drive"), a capitalised word inside a sentence
  ("ask May"); a sentence's first word counts only inside a longer run ("Translate" is not a name);
* in Japanese and Korean text: Latin-script words (``Slack``), a katakana or Hangul word with a letter
  (「プロジェクトX」, "프로젝트 X"), and proper nouns marked by the morphological analyser (田中, 서울).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memroute.text import Token
from memroute.text.stopwords import ENGLISH_STOPWORDS


@dataclass(frozen=True, slots=True)
class Entity:
    surface: str
    start: int
    end: int
    kind: str
    """``quote``, ``identifier``, ``name``."""


_FILE_EXT = (r"py|js|mjs|ts|tsx|jsx|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|md|rst|txt|json|jsonl|yaml|yml|"
             r"toml|csv|tsv|xlsx|xls|docx|doc|pdf|pptx|png|jpe?g|gif|svg|html?|css|scss|sql|sh|ini|cfg|conf|log|xml|"
             r"ipynb|lock|env|zip|tar|gz|mp4|mp3|wav|proto|tf|vue|dart|lua|pl|r")
_QUOTE = re.compile(
    r'"(?P<q1>[^"\n]{1,200})"|“(?P<q2>[^”\n]{1,200})”|(?<![A-Za-z0-9’\'])\'(?P<q3>[^\'\n]{1,120}?)\'(?![A-Za-z0-9’])|'
    r"`(?P<q4>[^`\n]{1,200})`|「(?P<q5>[^」\n]{1,200})」|『(?P<q6>[^』\n]{1,200})』"
)
_IDENT = re.compile(
    r"https?://[^\s<>\"'」』）)]+"
    r"|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
    r"|(?<![\w/])(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+"
    r"|\b[\w-]+\.(?:" + _FILE_EXT + r")\b"
    r"|\b[A-Z][A-Z0-9]{1,9}-\d+\b"
    r"|(?<![\w@#])[@#][A-Za-z][\w.-]*[\w]"
    r"|\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?"
    r"|\b[A-Za-z_]\w*\(\)"
    r"|\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"
    r"|\b[A-Z]{2,}[a-z]+[A-Za-z0-9]*\b"
    r"|\bv\d+(?:\.\d+)*\b|\b\d+\.\d+\.\d+\b"
    r"|\b[A-Z][A-Z0-9]*[A-Z0-9]s?\b"
)
_NOT_IDENT = frozenset({"e.g", "i.e", "a.m", "p.m", "etc", "ok", "am", "pm", "fyi", "asap", "btw", "tldr", "lol",
                        "ps", "omg", "imo", "tbh", "idk", "thx", "pls", "vs"})
_TITLE_RUN = re.compile(r"\b[A-Z][A-Za-z0-9'’&+.-]*(?:[ \t]+(?:[A-Z][A-Za-z0-9'’&+.-]*|\d+(?:\.\d+)*|of|the|de|and)"
                        r"(?![A-Za-z0-9]))*")
_SENTENCE_OPENERS = frozenset(".!?:;\n\"“'「([-*•>")
_NOT_NAME = frozenset(
    """i i'm i've i'd i'll ok okay hi hey hello thanks thank please yes no yeah yep nope sure great cool nice
    monday tuesday wednesday thursday friday saturday sunday january february september october november
    december today tomorrow yesterday""".split()
)
# Months that are also first names or words: a name unless a time word comes before or a number after.
_NAME_MONTHS = frozenset("march april may june july august".split())
_TIME_BEFORE = re.compile(r"\b(?:in|during|since|from|until|till|through|by|last|this|next|early|late|mid|of|before|"
                          r"after|for)[ \t-]+$", re.IGNORECASE)
_COMMON_STARTERS = frozenset(
    """translate review summarize summarise show tell give find check fix add make write create build update
    change remove delete rename move open close run deploy book send set list explain compare help let can could
    would will should do does did is are was were what when where who whom whose why how which any now also
    and but or so then just maybe actually again same look search get use try merge draft schedule cancel
    remind note save keep ask call email reply read start stop restart install configure refactor implement
    debug investigate rewrite convert export import upload download post share""".split()
)
_CJK_LATIN = re.compile(r"[A-Za-z][A-Za-z0-9_.+#-]*[A-Za-z0-9+#]|[A-Za-z]")
_KATAKANA_NAME = re.compile(r"[\u30A0-\u30FF]{2,}[ \t]?[A-Z0-9][A-Za-z0-9]{0,2}(?![A-Za-z0-9])"
                            r"|(?<![\u4e00-\u9fff])[\u4e00-\u9fff]{2,6}[A-Z](?![A-Za-z0-9])")
_HANGUL_NAME = re.compile(r"(?<![가-힣])[가-힣]{1,6}[ \t]?[A-Z](?![A-Za-z0-9])")


def find_entities(text: str, tokens: Iterable[Token] = (), cjk: bool = False) -> list[Entity]:
    """The named things of ``text`` in order of appearance, without overlaps (the longer one wins)."""
    found: list[Entity] = []
    for m in _QUOTE.finditer(text):
        inner = next(g for g in m.groups() if g is not None)
        if inner.strip():
            found.append(Entity(inner.strip(), m.start(), m.end(), "quote"))
    for m in _IDENT.finditer(text):
        s = m.group(0).rstrip(".-")
        if s.lower() in _NOT_IDENT or s.replace(".", "").isdigit() or len(s) < 2:
            continue
        found.append(Entity(s, m.start(), m.start() + len(s), "identifier"))
    for m in _TITLE_RUN.finditer(text):
        found.extend(_names(text, m))
    if cjk:
        for m in _KATAKANA_NAME.finditer(text):
            found.append(Entity(m.group(0), m.start(), m.end(), "name"))
        for m in _HANGUL_NAME.finditer(text):
            found.append(Entity(m.group(0), m.start(), m.end(), "name"))
        for m in _CJK_LATIN.finditer(text):
            if _touches_cjk(text, m.start(), m.end()) and m.group(0).lower() not in _NOT_IDENT:
                found.append(Entity(m.group(0), m.start(), m.end(), "name"))
        toks = list(tokens)
        for i, t in enumerate(toks):
            if t.pos == "propn" and t.language in ("ja", "ko") and not t.surface.isascii() and len(t.surface) > 1:
                end = t.end
                if t.language == "ja":  # 「フランス」+「語」, 「東京」+「駅」: the name with its head noun
                    j = i + 1
                    while j < len(toks) and toks[j].start == end and toks[j].pos in ("noun", "suffix") \
                            and toks[j].language == "ja":
                        end = toks[j].end
                        j += 1
                found.append(Entity(text[t.start:end], t.start, end, "name"))
    return _without_overlaps(found)


def _names(text: str, m: re.Match[str]) -> list[Entity]:
    words = [(w.start(), w.end()) for w in re.finditer(r"\S+", m.group(0))]
    base = m.start()
    # Drop a leading sentence-initial common word ("Translate Project X" -> "Project X") and
    # leading or trailing words that are never names on their own.
    while words:
        s, e = words[0]
        w = m.group(0)[s:e].lower().rstrip(".,")
        initial = _sentence_initial(text, base + s)
        if w in _NOT_NAME or w in ("of", "the", "de", "and") or (initial and (w in ENGLISH_STOPWORDS
                                                                              or w in _COMMON_STARTERS)):
            words.pop(0)
            continue
        break
    while words and m.group(0)[words[-1][0]:words[-1][1]].lower().rstrip(".,") in (_NOT_NAME | {"of", "the",
                                                                                                "de", "and"}):
        words.pop()
    if not words:
        return []
    s, e = words[0][0], words[-1][1]
    surface = m.group(0)[s:e].rstrip(".,'’")
    if surface.lower() in _NAME_MONTHS and (_TIME_BEFORE.search(text, 0, base + s)
                                            or re.match(r"[ \t]+\d", text[base + e:base + e + 3])):
        return []
    if len(words) == 1:
        initial = _sentence_initial(text, base + s)
        if initial or len(surface) < 2 or surface.lower() in ENGLISH_STOPWORDS:
            return []
    return [Entity(surface, base + s, base + s + len(surface), "name")]


def _sentence_initial(text: str, pos: int) -> bool:
    """Whether ``pos`` opens a sentence: only spaces between it and the start, a full stop or a quote."""
    i = pos - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_OPENERS


def _touches_cjk(text: str, start: int, end: int) -> bool:
    """Latin inside Japanese or Korean text: a CJK character within a few characters on either side."""
    window = text[max(0, start - 3):start] + text[end:end + 3]
    return any("\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7a3" for c in window)


def _without_overlaps(found: list[Entity]) -> list[Entity]:
    found.sort(key=lambda e: (e.start, -(e.end - e.start)))
    out: list[Entity] = []
    seen: set[str] = set()
    last_end = -1
    for e in found:
        if e.start < last_end:
            continue
        last_end = e.end
        key = e.surface.lower()
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out
