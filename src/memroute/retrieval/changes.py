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
memories, store-relative, by a small fitted model (:data:`SAMENESS`, a logistic regression): how far
their cosine stands above the recall's other candidates' pairwise cosines (a z-score, so it holds for
every encoder's own cosine range), the Jaccard overlap of their content tokens (normalised forms), and
whether the older is the newer's nearest neighbour among the candidates; they are about the same
subject when its probability is at least one half. It was fitted by :func:`memroute.eval.changes_fit.fit`
on every (older, newer-with-a-cue) pair of the everyday set's **train** stores with both packaged
encoders (a pair is positive when an update question names the older as stale and the newer as its
answer), and chosen over "a shared word, or a cosine one standard deviation above the mean" by
leave-one-store-out on the same pairs: 27 of 32 true links and 5 false ones, against 29 and 38 (a shared
word such as "dog" in "a yard for the dog" had let a move supersede the dog's breed). With fewer than
:data:`MIN_POOL` candidates there is no spread to measure and a shared content word decides.

The winner is ranked first (just above the highest-ranked memory it supersedes); the older memory stays
in the answer, marked superseded in the trace and in the memory pack, and is never deleted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.stores import row_cache
from memroute.text.tokenizers import analyze_tokens
from memroute.types import MemoryItem

CONTENDERS = 3
"""The first memories of a recall that may supersede each other without being judged relevant: a newer
fact ranked first or second replaces an older one even where the judge kept both out of the pack."""
MIN_POOL = 4
"""Fewer candidates than this: no pairwise spread to measure, a shared content word decides sameness."""


@dataclass(frozen=True, slots=True)
class SamenessModel:
    """A logistic model over (cosine z-score, content-token Jaccard, nearest neighbour)."""

    weights: tuple[float, float, float]
    bias: float
    mean: tuple[float, float, float]
    scale: tuple[float, float, float]
    fitted_on: str = ""

    def probability(self, cosine_z: float, jaccard: float, nearest: bool) -> float:
        x = (cosine_z, jaccard, float(nearest))
        logit = self.bias + sum(w * (v - m) / s for w, v, m, s in
                                zip(self.weights, x, self.mean, self.scale, strict=True))
        return 1.0 / (1.0 + math.exp(-max(min(logit, 30.0), -30.0)))


SAMENESS = SamenessModel((1.2896, 1.1261, 0.7966), -4.3292, (0.1864, 0.01478, 0.09777), (1.2435, 0.05036, 0.29700),
                         "everyday train, 358 (older, newer with a change cue) pairs, 32 true, use-m3 and "
                         "use-m3+e5-small; logistic regression, L2 0.1; 2026-11-26")
"""The sameness-of-subject model (see the module docstring); refit with :func:`memroute.eval.changes_fit.fit`."""
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


@lru_cache(maxsize=row_cache.ROWS)  # as many texts as the store's row cache keeps rows; a few MB
def _has_cue(text: str) -> bool:
    """Whether a memory's text says something changed (:func:`change_cue`), kept by text: a recall asks it of each of
    its ~15 first memories, and at 10k memories the same ones come back request after request, while the shared token
    cache (:mod:`memroute.text.tokenizers`, 2,048 texts) has let them go: their tokenising was ~2 % of a recall's CPU.
    A pure function of the text."""
    return change_cue(text) is not None


def explicit_ids(metadata: Mapping[str, Any]) -> frozenset[str]:
    """Ids a memory's metadata says it supersedes (``metadata["supersedes"]``: an id or a list of ids)."""
    value: Any = metadata.get(SUPERSEDES_KEY)
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list | tuple):
        return frozenset(str(v) for v in value)
    return frozenset()


def content_tokens(text: str) -> set[str]:
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
    spread: tuple[float, float] | None = None
    matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
    neighbour: dict[int, float] = {}
    cues: dict[int, bool] = {}
    contents: dict[int, set[str]] = {}
    for a in by_time:  # a: older, b: newer
        if memories[a].id in out or not relevant[a]:
            continue
        for b in reversed(by_time):
            if b == a or not relevant[b] or _ts(memories[b]) <= _ts(memories[a]):
                continue
            if b not in cues:
                cues[b] = _has_cue(memories[b].full_text)
            if not cues[b]:
                continue
            for k in (a, b):
                if k not in contents:
                    contents[k] = content_tokens(memories[k].full_text)
            union = contents[a] | contents[b]
            jaccard = len(contents[a] & contents[b]) / len(union) if union else 0.0
            va, vb = vectors.get(memories[a].id), vectors.get(memories[b].id)
            if len(pool_vectors) < MIN_POOL or va is None or vb is None:
                same = jaccard > 0
            else:
                if spread is None:
                    matrix = np.vstack(pool_vectors)
                    spread = _spread(matrix)
                if b not in neighbour:  # the newer one's closest other candidate
                    sims = matrix @ vb
                    neighbour[b] = float(sims[sims < 0.9999].max(initial=-1.0))
                cos = float(va @ vb)
                same = sameness(cos, spread, jaccard, cos >= neighbour[b] - 1e-6) >= 0.5
            if same:
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


def sameness(cosine: float, spread: tuple[float, float], jaccard: float, nearest: bool) -> float:
    """Probability that two memories are about the same subject (:data:`SAMENESS`): ``spread`` is the mean
    and standard deviation of the recall's candidates' pairwise cosines."""
    mean, sd = spread
    return SAMENESS.probability((cosine - mean) / max(sd, 1e-3), jaccard, nearest)


def _spread(m: npt.NDArray[np.float32]) -> tuple[float, float]:
    upper = (m @ m.T)[np.triu_indices(len(m), k=1)]
    return float(upper.mean()), float(upper.std())


def _ts(memory: MemoryItem) -> float:
    at = memory.occurred_at or memory.created_at
    return at.timestamp() if at is not None else 0.0
