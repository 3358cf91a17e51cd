"""Facts that change: when two recalled memories about the same subject disagree, the newer one wins.

"I work at Acme" (last year) and "I joined Globex in August" both answer "where do I work?"; the second
says the first no longer holds. Among the memories a recall returns, an older one is **superseded** by a
newer one when

- the newer names it explicitly (``remember(..., supersedes=[id])``, stored as ``metadata["supersedes"]``),
  or
- the newer says that something changed, and both are about the same subject.

A change is read from the newer memory's tokens, after morphological normalisation, so every inflection
counts: a verb of change ("moved", 引っ越す, 이사; "switched", 変える, 바꾸; "quit", 辞める, 그만두;
"joined", "started", 始める, 시작), a negation of continuing ("no longer", "not ... anymore", もう〜ない,
더 이상 ~않다) or a present-state adverb ("now", 今は, 이제). Sameness of subject is read from the two
memories, not from a list: they share a content token (normalised form), or their embeddings are closer
to each other than the store's other candidates are to each other (mean + one standard deviation of the
candidates' pairwise cosines, so it holds for every encoder's own cosine range).

The winner is ranked first (just above the highest-ranked memory it supersedes); the older memory stays
in the answer, marked superseded in the trace and in the memory pack, and is never deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.text.tokenizers import analyze_tokens
from memroute.types import MemoryItem

CONTENDERS = 3
"""The first memories of a recall that may supersede each other without being judged relevant: a newer
fact ranked first or second replaces an older one even where the judge kept both out of the pack."""
SUPERSEDES_KEY = "supersedes"
"""Metadata key holding the ids a memory replaces (set by ``remember(..., supersedes=...)``)."""

# Normalised forms (English light stems, Japanese UniDic lemmas, Korean stems) of verbs of change.
_CHANGE_VERBS = frozenset({
    # en (light_stem forms)
    "mov", "moved", "relocat", "switch", "chang", "chose", "replac", "join", "start", "began", "begun",
    "quit", "stopp", "stop", "left", "becam", "become", "transferr", "transfer", "swapp", "swap", "upgrad",
    "sold", "gave", "resign", "retir", "convert", "adopt",
    # ja
    "引っ越す", "越す", "移る", "移す", "変える", "変わる", "替える", "換える", "代える", "乗り換える", "切り替える",
    "止める", "辞める", "やめる", "転職", "転勤", "移住", "引っ越し", "入社", "退職", "始める", "卒業", "変更",
    # ko
    "이사", "옮기", "바꾸", "바뀌", "변경", "그만두", "끊", "이직", "전근", "입사", "퇴사", "시작", "갈아타",
})
_NOW_WORDS = frozenset({"now", "current", "nowaday", "anymor", "instead", "今", "現在", "今度", "이제", "지금",
                        "요즘", "대신"})
_NEGATIONS = frozenset({"no", "not", "n't", "never", "ない", "ず", "ぬ", "않", "안", "못"})
_STILL_NOT = frozenset({"longer", "anymore", "もう", "もはや", "이상", "이제"})
"""Words that turn a negation into "no longer": "no longer", もう〜ない, 더 이상 ~않다, 이제 ~않다."""


def change_cue(text: str) -> str | None:
    """The word of ``text`` saying something changed (its surface form), or None."""
    tokens = analyze_tokens(text)
    norms = {t.norm for t in tokens}
    for t in tokens:
        if t.norm in _CHANGE_VERBS or t.norm in _NOW_WORDS:
            return t.surface
    negated = bool(norms & _NEGATIONS) or any(n.endswith(("n't", "n’t")) for n in norms)
    if negated and norms & _STILL_NOT:
        return next(t.surface for t in tokens if t.norm in _STILL_NOT)
    return None


def explicit_ids(metadata: Mapping[str, Any]) -> frozenset[str]:
    """Ids a memory's metadata says it supersedes (``metadata["supersedes"]``: an id or a list of ids)."""
    value: Any = metadata.get(SUPERSEDES_KEY)
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list | tuple):
        return frozenset(str(v) for v in value)
    return frozenset()


def _content(text: str) -> set[str]:
    return {t.norm for t in analyze_tokens(text) if t.is_content and t.pos != "num" and len(t.norm) > 1
            and t.norm not in _CHANGE_VERBS and t.norm not in _NOW_WORDS}


def superseded(memories: Sequence[MemoryItem], vectors: Mapping[str, npt.NDArray[np.float32]],
               pool_vectors: Sequence[npt.NDArray[np.float32]], relevant: Sequence[bool]) -> dict[str, str]:
    """Older memory id -> the newer memory id that supersedes it, among ``memories`` (a recall's answer).

    ``relevant[i]`` says whether memory *i* was judged relevant or ranks among the first
    :data:`CONTENDERS`: an implicit change only links two such memories, an explicit ``supersedes`` links
    any two. ``pool_vectors`` are the recall's candidates' vectors, for the store-relative sameness cut-off."""
    out: dict[str, str] = {}
    ids = {m.id for m in memories}
    by_time = sorted(range(len(memories)), key=lambda i: _ts(memories[i]))
    for i in by_time:
        for old in explicit_ids(memories[i].metadata) & ids:
            if old != memories[i].id:
                out.setdefault(old, memories[i].id)
    same_cut: float | None = None
    cues: dict[int, bool] = {}
    contents: dict[int, set[str]] = {}
    for a in by_time:  # a: older, b: newer
        if memories[a].id in out or not relevant[a]:
            continue
        for b in reversed(by_time):
            if b == a or not relevant[b] or _ts(memories[b]) <= _ts(memories[a]):
                continue
            if b not in cues:
                cues[b] = change_cue(memories[b].full_text) is not None
            if not cues[b]:
                continue
            for k in (a, b):
                if k not in contents:
                    contents[k] = _content(memories[k].full_text)
            shared = bool(contents[a] & contents[b])
            va, vb = vectors.get(memories[a].id), vectors.get(memories[b].id)
            if not shared and va is not None and vb is not None and same_cut is None:
                same_cut = _sameness_cut(pool_vectors)
            close = same_cut is not None and va is not None and vb is not None and float(va @ vb) >= same_cut
            if shared or close:
                out[memories[a].id] = memories[b].id
                break
    return out


def newer_first(order: Sequence[int], ids: Sequence[str], links: Mapping[str, str]) -> list[int]:
    """``order`` (indices into ``ids``) with every superseding memory moved just above the highest-ranked
    memory it supersedes."""
    out = list(order)
    position = {ids[j]: j for j in order}
    for old, new in links.items():
        if old not in position or new not in position:
            continue
        i_old, i_new = out.index(position[old]), out.index(position[new])
        if i_new > i_old:
            out.insert(i_old, out.pop(i_new))
    return out


def _sameness_cut(pool: Sequence[npt.NDArray[np.float32]]) -> float:
    if len(pool) < 3:
        return 1.01  # too few candidates to know this store's spread: shared words decide
    m = np.vstack(pool)
    sims = m @ m.T
    upper = sims[np.triu_indices(len(pool), k=1)]
    return float(upper.mean() + upper.std())


def _ts(memory: MemoryItem) -> float:
    at = memory.occurred_at or memory.created_at
    return at.timestamp() if at is not None else 0.0
