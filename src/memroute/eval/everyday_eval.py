"""`memroute eval everyday`: what a user of :meth:`Memory.recall` sees on small personal stores.

Each store of the set (:mod:`memroute.eval.everyday`) is remembered into a fresh SQLite file, with the
memories' own dates; each question is then recalled at its ``now`` with its recent turns, through the
public API and nothing else. Scored per question, overall, per language (the question's; cross-language
questions also form a group of their own) and per type:

- ``answer_in_top3``: an answering memory among the first three of ``Recall.memories`` (answerable
  questions);
- ``answer_injected``: ``should_inject`` is true and an answering memory is among the injected ones
  (``Recall.relevant``, what ``memory_pack()`` holds) (answerable questions);
- ``precision``: of the memories injected over all questions, the share that answer; stale and related
  memories count neither way (a superseded fact shown as superseded is not a wrong answer);
- ``abstention``: unanswerable questions with nothing injected;
- ``newest_first``: update questions where an answering (newer) memory is returned and ranks above every
  stale one that is returned;
- ``stale_injected``: update questions where a stale memory was injected (lower is better; informative);
- latency of the recall call, p50 and p95.

:func:`run_everyday` returns each question's :class:`Outcome` (the whole :class:`Recall`, trace included)
and :func:`candidate_rows` flattens them into one row per candidate with the gold labels, for fitting a
relevance judge on the train split.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memroute.embed import get_embedder
from memroute.eval.everyday import LANGUAGES, TYPES, EverydayQuestion, EverydayStore, data_path, load_everyday
from memroute.eval.interaction_fit import Pairs, question_pairs
from memroute.llm import LlmAssistant, LlmUsage
from memroute.memory import Memory
from memroute.retrieval import Recall, RecallOptions


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question's recall and what the user would see of it."""

    question: EverydayQuestion
    store_size: int
    recall: Recall
    ranked: tuple[str, ...]
    """Memory ids of ``recall.memories``, best first."""
    injected: tuple[str, ...]
    """Memory ids injected (``recall.relevant`` when ``should_inject``, else none)."""
    ms: float


def run_everyday(stores: Iterable[EverydayStore], embedder: str = "use-m3",
                 options: RecallOptions | None = None, llm: LlmAssistant | None = None,
                 pairs: list[Pairs | None] | None = None) -> list[Outcome]:
    """Recall every question of ``stores``, each store in a fresh SQLite file, with ``llm`` (default: none,
    whatever the environment configures); ``pairs``: a list to which each question's interaction rows are
    appended (:mod:`memroute.eval.interaction_fit`, for the judge's stacked fit)."""
    options = options or RecallOptions()
    model = get_embedder(embedder)
    out: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="memroute-everyday-") as tmp:
        for store in stores:
            url = f"sqlite:///{Path(tmp) / f'{store.id}.db'}"
            with Memory.open(url, owner=store.id, embedder=model) as mem:
                mem.llm = llm
                mem.remember_many([{"id": m.id, "text": m.text, "occurred_at": m.occurred_at}
                                   for m in store.memories])
                for q in store.questions:
                    t0 = time.perf_counter()
                    r = mem.recall(q.text, recent_messages=list(q.recent), now=q.now, options=options)
                    ms = (time.perf_counter() - t0) * 1000
                    injected = tuple(m.memory.id for m in r.relevant) if r.should_inject else ()
                    if pairs is not None:
                        pairs.append(question_pairs(mem, store.id, r.trace, q.answers, "everyday", store.id,
                                                    q.stale | q.related))
                    out.append(Outcome(q, len(store.memories), r, tuple(m.memory.id for m in r.memories),
                                       injected, ms))
    return out


def candidate_rows(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """One row per candidate of each question's trace (after fusion and dedupe, with the rerank score and
    the reranker's features), with the question's fields and the gold ``label`` of the candidate:
    ``answer``, ``stale``, ``related`` or ``other``. ``rank`` is its place in ``Recall.memories`` (None
    when not returned), ``relevance`` the level the judge gave it there and ``injected`` whether it was."""
    rows = []
    for o in outcomes:
        q = o.question
        returned = {m.memory.id: (i, m) for i, m in enumerate(o.recall.memories)}
        for c in o.recall.trace.candidates:
            label = ("answer" if c.id in q.answers else "stale" if c.id in q.stale
                     else "related" if c.id in q.related else "other")
            rank, judged = returned.get(c.id, (None, None))
            rows.append({"question": q.id, "store": q.store, "store_size": o.store_size, "type": q.type,
                         "subtype": q.subtype, "language": q.language, "cross_language": q.cross_language,
                         "text": q.text, "id": c.id, "label": label, "fused": c.fused,
                         "fused_rank": c.fused_rank, "rerank": c.rerank, "scores": dict(c.scores),
                         "features": dict(c.features), "rank": rank,
                         "relevance": judged.relevance if judged is not None else None,
                         "injected": c.id in o.injected})
    return rows


# --------------------------------------------------------------------------------------------- scoring
def _rate(hits: int, of: int) -> dict[str, Any]:
    return {"hits": hits, "of": of, "rate": round(hits / of, 4) if of else None}


def newest_first(o: Outcome) -> bool:
    first = next((i for i, mid in enumerate(o.ranked) if mid in o.question.answers), None)
    stale = [i for i, mid in enumerate(o.ranked) if mid in o.question.stale]
    return first is not None and all(first < i for i in stale)


def score(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The figures of one group of questions (see the module docstring)."""
    answerable = [o for o in outcomes if o.question.answerable]
    updates = [o for o in outcomes if o.question.type == "update"]
    unanswerable = [o for o in outcomes if not o.question.answerable]
    counted = [mid for o in outcomes for mid in o.injected
               if mid not in o.question.stale and mid not in o.question.related]
    good = sum(1 for o in outcomes for mid in o.injected if mid in o.question.answers)
    return {
        "questions": len(outcomes),
        "answer_in_top3": _rate(sum(1 for o in answerable if set(o.ranked[:3]) & o.question.answers),
                                len(answerable)),
        "answer_injected": _rate(sum(1 for o in answerable if set(o.injected) & o.question.answers),
                                 len(answerable)),
        "precision": _rate(good, len(counted)),
        "abstention": _rate(sum(1 for o in unanswerable if not o.injected), len(unanswerable)),
        "newest_first": _rate(sum(1 for o in updates if newest_first(o)), len(updates)),
        "stale_injected": _rate(sum(1 for o in updates if set(o.injected) & o.question.stale), len(updates)),
    }


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Overall, per language (with a ``cross-language`` group) and per type, with latency."""
    result = score(outcomes)
    result["by_language"] = {lang: score([o for o in outcomes if o.question.language == lang])
                             for lang in LANGUAGES}
    result["by_language"]["cross-language"] = score([o for o in outcomes if o.question.cross_language])
    result["by_type"] = {t: score([o for o in outcomes if o.question.type == t]) for t in TYPES}
    lat = np.array([o.ms for o in outcomes]) if outcomes else np.zeros(1)
    result["latency_ms"] = {"p50": round(float(np.percentile(lat, 50)), 2),
                            "p95": round(float(np.percentile(lat, 95)), 2)}
    return result


def detail(o: Outcome) -> dict[str, Any]:
    """One question's result: whether each applicable figure was met, and what was returned (labelled)."""
    q = o.question
    label = {**{i: "related" for i in q.related}, **{i: "stale" for i in q.stale}, **{i: "answer" for i in q.answers}}
    ok: dict[str, bool] = {}
    if q.answerable:
        ok["answer_in_top3"] = bool(set(o.ranked[:3]) & q.answers)
        ok["answer_injected"] = bool(set(o.injected) & q.answers)
    else:
        ok["abstention"] = not o.injected
    if q.type == "update":
        ok["newest_first"] = newest_first(o)
    return {"id": q.id, "type": q.type, "subtype": q.subtype, "language": q.language, "text": q.text, "ok": ok,
            "returned": [{"id": m.memory.id, "label": label.get(m.memory.id, "other"), "relevance": m.relevance,
                          "score": round(m.score, 4), "cosine": round(m.scores.get("cosine", 0.0), 4),
                          "injected": m.memory.id in o.injected, "text": m.memory.text}
                         for m in o.recall.memories],
            "notes": list(o.recall.trace.notes)}


def evaluate_everyday(data: str | Path | None = None, split: str = "dev", embedder: str = "use-m3",
                      options: RecallOptions | None = None, llm: LlmAssistant | None = None,
                      details: bool = False) -> dict[str, Any]:
    """Run and score one file (``data``) or a shipped split; ``details`` adds each question's
    :func:`detail` under ``"details"``."""
    path = Path(data) if data is not None else data_path(split)
    stores = load_everyday(path)
    options = options or RecallOptions()
    outcomes = run_everyday(stores, embedder, options, llm)
    result = summarise(outcomes)
    result["config"] = {"data": str(path), "split": None if data is not None else split, "stores": len(stores),
                        "memories": sum(len(s.memories) for s in stores), "embedder": embedder,
                        "rerank": options.rerank,
                        "llm": None if llm is None else {"model": llm.llm.model, "steps": sorted(llm.policy.steps)}}
    if llm is not None:
        usage = LlmUsage()
        for o in outcomes:
            usage.add(o.recall.trace.llm)
        result["llm"] = usage.as_dict()
    if details:
        result["details"] = [detail(o) for o in outcomes]
    return result
