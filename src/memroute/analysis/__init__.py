"""Understanding a message in its conversation: language, references, continuation, query type, time
range, keywords, query frame, parts. Rule-based, fast and deterministic (SPEC section 2).

    >>> from memroute.analysis import analyze
    >>> a = analyze("じゃあ英語では？", [{"role": "user", "text": "この文を翻訳して"}])
    >>> a.continuation.kind.value, a.needs_context
    ('follow_up', True)
"""

from memroute.analysis.analyzer import MAX_CHARS, QueryAnalysis, analyze
from memroute.analysis.continuation import Continuation, ContinuationKind
from memroute.analysis.frame import FrameValidation, QueryFrame, RejectedSlot, Slot, fold, validate_frame
from memroute.analysis.intent import Intent, QuestionCategory, classify_intent, question_category
from memroute.analysis.query_type import QueryType
from memroute.analysis.references import Reference, ReferenceType
from memroute.analysis.timerange import FUZZY_RECENT_DAYS, TimeRange

__all__ = [
    "FUZZY_RECENT_DAYS",
    "MAX_CHARS",
    "Continuation",
    "ContinuationKind",
    "FrameValidation",
    "Intent",
    "QueryAnalysis",
    "QueryFrame",
    "QueryType",
    "QuestionCategory",
    "Reference",
    "ReferenceType",
    "RejectedSlot",
    "Slot",
    "TimeRange",
    "analyze",
    "classify_intent",
    "fold",
    "question_category",
    "validate_frame",
]
