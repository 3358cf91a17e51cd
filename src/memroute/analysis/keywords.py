"""Keywords: the named things first (kept whole), then the content words of the tokenizers.

Content words are the tokens the tokenizers mark as content, minus request verbs and fillers that
every message has ("tell", "please", 「教える」, "알리다"), minus words inside a time expression (the time
range carries them) and inside a named thing (which is already there whole). English words are given
lower-cased as written ("meetings", not the stem "meet"); Japanese verbs by their dictionary form
(UniDic lemma); Korean verbs and adjectives as stem + 다.
"""

from __future__ import annotations

from memroute.analysis.entities import Entity
from memroute.text import Token

MAX_KEYWORDS = 32
_GENERIC = frozenset(
    """please tell show give let know want need can could would like get make thing things something anything
    may might must shall should ok okay hi hello hey thanks thank
    yes no yeah sure also just really maybe actually help pls lol
    あと 教える 見せる 下さる くださる 欲しい ほしい 知る 何 お願い
    願う 貰う もらう くれる 呉れる 頂く いただく 分かる 今 どう
    알리다 주다 보이다 좀 뭐 어떻다 해주다 하다 되다 있다 없다 알다 싶다 보다 이 거 것 수""".split()
)
# Adjacent nouns (no space between) are one word: 「韓国」+「語」, 「再」+「起動」, "보고"+"서", "연말"+"정산".
_COMPOUND = {"ja": frozenset({"noun", "propn", "prefix", "suffix", "num"}),
             "ko": frozenset({"noun", "propn", "root", "foreign"})}
_KEEP_POS = frozenset({"noun", "propn", "num", "verb", "adj", "foreign", "hanja", "root", "other"})


def extract_keywords(tokens: list[Token], entities: list[Entity], skip: list[tuple[int, int]]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()

    def add(word: str) -> None:
        key = word.casefold()
        if key and key not in seen and len(out) < MAX_KEYWORDS:
            seen.add(key)
            out.append(word)

    for e in entities:
        add(e.surface)
    covered = [(e.start, e.end) for e in entities] + skip
    i = 0
    while i < len(tokens):
        t = tokens[i]
        i += 1
        if t.language in ("ja", "ko") and t.pos in _COMPOUND[t.language] and t.norm not in _GENERIC \
                and t.surface not in _GENERIC and not any(s <= t.start < e for s, e in covered):
            # Japanese compounds are one keyword: 「韓国」+「語」, 「再」+「起動」, 「エラー」+「ログ」
            end, j = t.end, i
            while (j < len(tokens) and tokens[j].start == end and tokens[j].pos in _COMPOUND[t.language]
                   and not any(s <= tokens[j].start < e for s, e in covered)):
                end, j = tokens[j].end, j + 1
            if j > i:
                parts = tokens[i - 1:j]
                if any(p.is_content for p in parts) and parts[-1].pos != "prefix":
                    add("".join(p.surface for p in parts))
                    i = j
                    continue
        if not t.is_content or t.pos not in _KEEP_POS or any(s <= t.start < e for s, e in covered):
            continue
        word = _form(t)
        if word and word.casefold() not in _GENERIC and not (t.pos == "num" and len(word) < 2):
            add(word)
    return out


def _form(t: Token) -> str:
    if t.language == "en":
        return t.surface.lower()
    if t.language == "ja":
        return t.norm if t.pos in ("verb", "adj") else t.surface
    if t.language == "ko":
        return t.norm + "다" if t.pos in ("verb", "adj") else t.surface
    return t.surface
