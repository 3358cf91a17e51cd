"""Phase 3 of seed 001 without an LLM: relevance high / medium / none with a short reason, and
``should_inject`` (one high, or two medium).

With the reranker on, a candidate's score is its probability of being *the* evidence turn (the logistic
model was fitted on LoCoMo, where a fact's neighbouring turns count as misses), so the probabilities are
conservative: on LoCoMo, p >= 0.35 was the exact evidence turn half the time and p >= 0.12 a third of
the time, at about one and two memories per question; those are the high and medium cut-offs. Direct
evidence also counts, since a store unlike LoCoMo may have one clear match: a cosine of 0.6 with most
keywords present, or 0.4 with all of them, is high; a cosine of 0.45 or all keywords present is
medium (USE: 0.5 is a close paraphrase, 0.3 the same topic). Without the reranker only the direct
evidence decides. The reason names what matched, in the conversation's language.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

Relevance = Literal["high", "medium", "none"]
HIGH_P, MEDIUM_P = 0.35, 0.12
HIGH_COS, MEDIUM_COS = 0.6, 0.45
SIMILAR_COS = 0.3

_REASONS: dict[str, dict[str, str]] = {
    "en": {"keywords": "mentions {words}", "speaker": "said by {who}", "in_range": "from the time asked about",
           "reference": "about {what}", "similar": "similar in meaning (cosine {cos:.2f})",
           "session": "from a conversation with other matches", "ranked": "ranked likely by the reranker (p {p:.2f})",
           "weak": "a weak match"},
    "ja": {"keywords": "「{words}」に言及", "speaker": "{who}の発言", "in_range": "尋ねられた期間のもの",
           "reference": "「{what}」について", "similar": "意味が近い（cos {cos:.2f}）",
           "session": "他の候補と同じ会話", "ranked": "リランカーの評価が高い（p {p:.2f}）", "weak": "関連は弱い"},
    "ko": {"keywords": "'{words}' 언급", "speaker": "{who}의 발언", "in_range": "물어본 기간의 기억",
           "reference": "'{what}'에 관한 내용", "similar": "의미가 비슷함 (cos {cos:.2f})",
           "session": "다른 후보와 같은 대화", "ranked": "재순위 모델의 평가가 높음 (p {p:.2f})",
           "weak": "관련성이 약함"},
}
_SEP = {"en": "; ", "ja": "、", "ko": ", "}


def relevance(score: float, cosine: float, keyword_overlap: float, reranked: bool,
              reference_overlap: float = 0.0, top: bool = False) -> Relevance:
    """``score`` is the reranker's probability (ignored when ``reranked`` is false).

    A reference the conversation resolved ("how did *that* go?" -> Project X) names what the user
    means: the best-ranked memory that is written about all of it, and is at least a medium match by
    the other rules, is high (LoCoMo's questions carry no such references, so its calibration cannot
    tell)."""
    if (reranked and score >= HIGH_P) or (cosine >= HIGH_COS and keyword_overlap >= 0.5) \
            or (cosine >= MEDIUM_COS - 0.05 and keyword_overlap >= 0.999):
        return "high"
    if (reranked and score >= MEDIUM_P) or cosine >= MEDIUM_COS or keyword_overlap >= 0.999:
        return "high" if top and reference_overlap >= 0.999 else "medium"
    return "none"


def with_reference(level: Relevance, reference_overlap: float, top: bool) -> Relevance:
    """The calibrated judge's level, lifted to high for the best-ranked memory written about all of a
    reference the conversation resolved (see :func:`relevance`)."""
    return "high" if level == "medium" and top and reference_overlap >= 0.999 else level


def joined(parts: Sequence[str], language: str) -> str:
    return _SEP.get(language, "; ").join(p for p in parts if p)


def should_inject(levels: Sequence[Relevance]) -> bool:
    """Seed 001's rule: inject when one memory is high, or two are medium."""
    return levels.count("high") >= 1 or levels.count("medium") >= 2


def reason(features: Mapping[str, float], matched: Sequence[str], speaker: str | None, reference: str | None,
           language: str, level: Relevance = "none", probability: float | None = None) -> str:
    """One short sentence saying why a memory was chosen, from its strongest signals. A memory judged
    relevant is never called weak: when no single signal explains it, the reranker's probability does."""
    t = _REASONS.get(language, _REASONS["en"])
    parts = []
    if matched:
        parts.append(t["keywords"].format(words=", ".join(matched[:3])))
    if features.get("speaker_named", 0.0) > 0 and speaker:
        parts.append(t["speaker"].format(who=speaker))
    if features.get("reference_overlap", 0.0) > 0 and reference:
        parts.append(t["reference"].format(what=reference))
    if features.get("in_range", 0.0) > 0:
        parts.append(t["in_range"])
    if features.get("cosine", 0.0) >= SIMILAR_COS:
        parts.append(t["similar"].format(cos=features["cosine"]))
    if not parts and features.get("session_best", 0.0) > 0.5:
        parts.append(t["session"])
    if not parts and level != "none" and probability is not None:
        parts.append(t["ranked"].format(p=probability))
    return _SEP.get(language, "; ").join(parts[:3]) or t["weak"]
