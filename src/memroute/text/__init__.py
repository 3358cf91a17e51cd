"""Text handling for English, Japanese and Korean: language detection and tokenisation."""

from memroute.text.language import Span, char_script, detect_language, language_spans, normalize
from memroute.text.tokenizers import (
    EnglishTokenizer,
    JapaneseTokenizer,
    KoreanTokenizer,
    Token,
    Tokenizer,
    analyze_tokens,
    get_tokenizer,
    hyphen_parts,
    index_terms,
    light_stem,
    query_terms,
    tokenize,
)

__all__ = [
    "EnglishTokenizer",
    "JapaneseTokenizer",
    "KoreanTokenizer",
    "Span",
    "Token",
    "Tokenizer",
    "analyze_tokens",
    "char_script",
    "detect_language",
    "get_tokenizer",
    "hyphen_parts",
    "index_terms",
    "language_spans",
    "light_stem",
    "normalize",
    "query_terms",
    "tokenize",
]
