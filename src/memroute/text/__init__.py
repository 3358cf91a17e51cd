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
    light_stem,
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
    "language_spans",
    "light_stem",
    "normalize",
    "tokenize",
]
