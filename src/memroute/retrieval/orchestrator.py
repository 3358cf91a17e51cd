"""``recall()``: one call per turn that finds the memories that matter and explains how (SPEC section 4).

    analyse + expand -> select strategy -> search (+ constraints for a request) -> fuse -> dedupe + decay
    -> rerank -> judge (:mod:`memroute.retrieval.judge`), whose probability orders the memories returned
    -> newer facts first (:mod:`memroute.retrieval.changes`) -> trace

Every stage is timed into the trace; the Prometheus metrics of seed 003 are updated on the way out.
The pipeline is written once, as :func:`recall_steps`, a generator of store calls (:mod:`memroute.stores.calls`):
:func:`recall` runs it on a sync store, :func:`recall_async` on an asyncio one.
With an :class:`~memroute.llm.LlmAssistant`, expansion and rerank also ask the LLM when its policy says so
(:mod:`memroute.retrieval.llm_steps`); every LLM step, called or skipped, is in ``trace.llm``.
Bad input never raises past validation: an empty message, a lone pronoun with nothing to resolve it, or a
filter that matches nothing gives an empty answer whose trace says why.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from memroute.analysis import QueryAnalysis, ReferenceType, analyze
from memroute.embed import Embedder
from memroute.embed.tokens import ranking_id
from memroute.errors import InputError
from memroute.llm.frame import query_frame
from memroute.llm.steps import LlmAssistant
from memroute.observability import RERANK_LATENCY, RETRIEVAL_EMPTY, RETRIEVAL_LATENCY, RETRIEVAL_STRATEGY
from memroute.retrieval import changes, constraints, decide, interaction, judge, late
from memroute.retrieval.decay import decay_multiplier
from memroute.retrieval.dedupe import near_duplicates
from memroute.retrieval.expand import expand
from memroute.retrieval.fusion import KEYWORD_KINDS, covered, minmax, ranked, rrf, scaled, weighted
from memroute.retrieval.llm_steps import LlmJudgement, expand_with_llm, rerank_with_llm
from memroute.retrieval.options import Fusion, RecallOptions, Strategy
from memroute.retrieval.rerank import (
    FEATURES,
    LATE,
    Candidate,
    RerankModel,
    features,
    match_forms,
    reranker_for,
    speaker_of,
)
from memroute.retrieval.result import Recall, RecalledMemory
from memroute.retrieval.search import search_steps
from memroute.retrieval.strategy import search_params, select_strategy
from memroute.retrieval.trace import CandidateTrace, RecallTrace, SearchTrace
from memroute.stores import AsyncStore, Store
from memroute.stores.calls import Call, Steps, run_steps, run_steps_async
from memroute.text import tokenize
from memroute.times import EARLIEST
from memroute.types import Language, MemoryKind, Message, SearchFilter, Sensitivity, as_utc, utcnow

MAX_ANALYSED_CHARS = 10_000
_LEVEL_ORDER: tuple[decide.Relevance, ...] = ("none", "medium", "high")


def recall(store: Store, embedder: Embedder, text: str, *, owner: str,
           recent_messages: Iterable[Message | Mapping[str, Any]] | None = None, now: datetime | str | None = None,
           options: RecallOptions | None = None, model: RerankModel | None = None,
           llm: LlmAssistant | None = None) -> Recall:
    """Find the memories of ``owner`` that matter for the message ``text`` in its conversation.

    ``recent_messages`` are the turns before it, oldest first (``Message`` values or ``{"role", "text"}``
    dicts); ``now`` is the time the message is sent (default: the clock); ``model`` replaces the shipped
    reranker weights; ``llm`` adds LLM expansion and rerank (``options.llm=False`` turns it off for a call).
    """
    return run_steps(store, recall_steps(embedder, text, owner=owner, recent_messages=recent_messages, now=now,
                                         options=options, model=model, llm=llm))


async def recall_async(store: AsyncStore, embedder: Embedder, text: str, *, owner: str,
                       recent_messages: Iterable[Message | Mapping[str, Any]] | None = None,
                       now: datetime | str | None = None, options: RecallOptions | None = None,
                       model: RerankModel | None = None, llm: LlmAssistant | None = None) -> Recall:
    """:func:`recall` on an async store: its searches and loads are awaited on the event loop (the searches
    concurrently); analysis, embedding, fusion, rerank and the LLM steps run in a worker thread."""
    return await run_steps_async(store, recall_steps(embedder, text, owner=owner, recent_messages=recent_messages,
                                                     now=now, options=options, model=model, llm=llm))


def recall_steps(embedder: Embedder, text: str, *, owner: str,
                 recent_messages: Iterable[Message | Mapping[str, Any]] | None = None,
                 now: datetime | str | None = None, options: RecallOptions | None = None,
                 model: RerankModel | None = None, llm: LlmAssistant | None = None) -> Steps[Recall]:
    """The pipeline of :func:`recall`, yielding its store calls (:mod:`memroute.stores.calls`)."""
    opts = (options or RecallOptions()).validated()
    t_start = time.perf_counter()
    stages: dict[str, float] = {}
    notes: list[str] = []
    ref_now = as_utc(now, "now") or utcnow()
    recent = _recent(recent_messages, opts.recent_turns)
    budget = llm.budget() if llm is not None and opts.llm else None
    llm_records: list[dict[str, Any]] = []
    if len(text) > MAX_ANALYSED_CHARS:
        notes.append(f"the message has {len(text):,} characters; its first {MAX_ANALYSED_CHARS:,} were analysed")

    def empty(reason: str, note: str, analysis: QueryAnalysis | None = None, strategy: str = "none") -> Recall:
        notes.append(note)
        RETRIEVAL_EMPTY.labels(reason).inc()
        stages["total"] = (time.perf_counter() - t_start) * 1000
        trace = RecallTrace(strategy, opts.strategy is not None, {}, analysis.to_dict() if analysis else None, (),
                            (), str(opts.fusion), (), {}, dict(stages), tuple(notes), tuple(llm_records))
        return Recall(text, (), _language(analysis), trace, opts.pack_chars)

    if not text.strip():
        return empty("empty_query", "empty message: nothing to search for")

    t0 = time.perf_counter()
    analysis = analyze(text[:MAX_ANALYSED_CHARS], recent, ref_now)
    forced = opts.strategy is not None
    strategy = Strategy.parse(opts.strategy) if opts.strategy is not None else select_strategy(analysis)
    params = search_params(strategy, analysis, opts)
    queries = expand(analysis, recent, opts.max_expanded_queries, opts.expand)
    stages["analyse"] = (time.perf_counter() - t0) * 1000
    if llm is not None and budget is not None:
        t0 = time.perf_counter()
        if opts.expand:
            queries, record = expand_with_llm(llm, budget, analysis, recent, queries, opts.max_expanded_queries)
            llm_records.append(record)
        if llm.policy.enabled("slots"):
            frame = query_frame(llm, analysis.text, budget)
            llm_records.append(frame.record(**frame.value.to_dict()) if frame.used_llm else frame.record())
        stages["llm_expand"] = (time.perf_counter() - t0) * 1000
    RETRIEVAL_STRATEGY.labels(strategy.value).inc()

    unresolved = [r.surface for r in analysis.references if r.resolved is None and r.type != ReferenceType.TEMPORAL]
    if not any(tokenize(q.text) for q in queries) and analysis.time_range is None:
        if unresolved:
            return empty("unresolved_reference", f"the message only refers to something ({', '.join(unresolved)}) "
                         "and no recent conversation says what; pass recent_messages or a session with a log",
                         analysis, strategy.value)
        if not analysis.keywords:
            return empty("no_content", "the message has no words to search for (only function words or "
                         "symbols)", analysis, strategy.value)

    flt = _filter(owner, opts, ref_now)
    time_flt = None
    tr = analysis.time_range
    if tr is not None:
        time_flt = replace(flt, start=tr.start, end=tr.end - timedelta(microseconds=1))
    t0 = time.perf_counter()
    need = constraints.request_need(analysis)
    out = yield from search_steps(embedder, queries, params, flt, time_flt, opts.context_weight, opts.parallel,
                                  opts.max_candidates, constraints.constraint_tokens(need.domain) if need else ())
    stages["embed"] = out.embed_ms
    stages["search"] = (time.perf_counter() - t0) * 1000 - out.embed_ms

    t0 = time.perf_counter()
    lists = [s for s in out.lists if s.hits and s.kind != "constraint"]
    asked = [h.id for s in out.lists if s.kind == "constraint" for h in s.hits[: constraints.PROMOTED]]
    per_list = {s.name: minmax(s.hits) for s in lists}  # names are unique: a search kind and its query
    weights = [s.weight for s in lists]
    if Fusion(opts.fusion) == Fusion.RRF:
        fused = rrf([s.hits for s in lists], opts.rrf_k, weights)
    else:  # seed 003's weighted min-max (fusion.weighted_minmax), from the lists scaled once
        fused = weighted(per_list.values(), weights)
    pool = ranked(fused)[: opts.max_candidates + 10]  # room for the near-duplicates dedupe drops
    wanted = list(dict.fromkeys([i for i, _ in pool] + asked))
    items = {m.id: m for m in (yield Call("get", (wanted, owner)))} if wanted else {}
    pool = [(i, s) for i, s in pool if i in items]
    asked = [i for i in asked if i in items]
    if Fusion(opts.fusion) == Fusion.MINMAX and len(fused) < opts.max_candidates:
        # the searches ran out of matches (a small store): a keyword list's best hit is the best of a few, and
        # min-max would make a one-word match 1.0; scale each list by how much of its query that hit holds
        scales = {s.name: covered(queries[s.query].text, items[s.hits[0].id].full_text)
                  for s in lists if s.kind in KEYWORD_KINDS and s.hits[0].id in items}
        if any(v < 1.0 for v in scales.values()):
            per_list = {n: scaled(d, scales.get(n, 1.0)) for n, d in per_list.items()}
            fused = weighted(per_list.values(), weights)
            pool = ranked({i: fused[i] for i, _ in pool})
    vectors = (yield Call("get_vectors", ([i for i, _ in pool] + asked, owner))) if pool or asked else {}
    duplicates = near_duplicates([i for i, _ in pool], vectors, opts.dedupe_threshold,
                                 {i: items[i].full_text for i, _ in pool}) \
        if opts.dedupe_threshold is not None else {}
    pool = [(i, s) for i, s in pool if i not in duplicates]
    if opts.decay and params.time_decay_factor > 0:
        pool = ranked({i: s * decay_multiplier(items[i].occurred_at, ref_now, params.time_decay_factor)
                       for i, s in pool})
    pool = pool[: opts.max_candidates]
    pool += [(i, 0.0) for i in asked if i not in {j for j, _ in pool}]  # constraint hits are candidates
    stages["fuse"] = (time.perf_counter() - t0) * 1000
    if not pool:
        searched = ", ".join(f"{s.name} ({len(s.hits)})" for s in out.lists) or "no search ran"
        return empty("no_match", f"no memory of owner {owner!r} matched the filters and the searches ({searched})",
                     analysis, strategy.value)

    qvec = out.query_vectors[0] if out.query_vectors is not None else None
    candidates = [Candidate(items[i], s, rank, {n: d[i] for n, d in per_list.items() if i in d},
                            float(vectors[i] @ qvec) if qvec is not None and i in vectors else 0.0)
                  for rank, (i, s) in enumerate(pool)]
    late_column = None
    if out.query_token_vectors is not None:  # the embedder gives token vectors: late interaction
        t0 = time.perf_counter()
        ids = [c.memory.id for c in candidates]
        read = ids[: late.CANDIDATES]  # the rest are not read: the reranker reads them as the column's mean
        stored = yield Call("get_token_vectors", (read, owner, len(out.query_token_vectors.vectors[0])))
        n_docs, df = yield Call("token_df", ([int(t) for t in out.query_token_vectors.ids], owner))
        late_column = late.maxsim(out.query_token_vectors, stored, ids, n_docs, df)
        stages["late"] = (time.perf_counter() - t0) * 1000
        if len(stored) < len(read):
            notes.append(f"{len(read) - len(stored)} of the first {len(read)} candidates have no token vectors "
                         "(written before they were kept): late interaction read them as average")
    t0 = time.perf_counter()
    feats = features(candidates, analysis, ref_now)
    key = ranking_id(embedder)  # per encoder (its cosine scale) and whether it reads late interaction
    reranker = model or reranker_for(key)
    # the searches ran out of matches: the candidates are a small store's all (a model may weigh them apart)
    small = len(candidates) < opts.max_candidates
    probs = reranker.score(feats, small, late_column) if opts.rerank else None
    prob = probs.tolist() if probs is not None else None  # Python floats once, not a numpy scalar per use
    feature_rows = [dict(zip(FEATURES, row, strict=True)) for row in feats.tolist()]  # floats once, not per use
    if late_column is not None:
        for row, v in zip(feature_rows, late_column.tolist(), strict=True):
            if v == v:  # not NaN: a candidate without token vectors has no late-interaction feature in the trace
                row[LATE] = v
    rerank_ms = (time.perf_counter() - t0) * 1000
    stages["rerank"] = rerank_ms
    if opts.rerank:
        RERANK_LATENCY.labels("local").observe(rerank_ms)

    t0 = time.perf_counter()
    order = list(range(len(candidates)))
    if prob is not None:
        p_of = prob.__getitem__
        order.sort(key=lambda j: (-p_of(j), j))
    language = _language(analysis)
    judgement: LlmJudgement | None = None
    if llm is not None and budget is not None:
        t_llm = time.perf_counter()
        local = [prob[j] if prob is not None else candidates[j].fused for j in range(len(candidates))]
        judgement = rerank_with_llm(llm, budget, analysis, recent, language, candidates, order, local,
                                    probs is not None, decide.HIGH_P)
        order = judgement.order
        llm_records.append(judgement.record)
        stages["llm_rerank"] = (time.perf_counter() - t_llm) * 1000
        t0 = time.perf_counter()
    keyword_forms = {k: match_forms([k]) for k in analysis.keywords}
    reference = next((r.resolved for r in analysis.references if r.resolved and r.type != ReferenceType.TEMPORAL),
                     None)
    asked_ids = set(asked)
    found_for_need = {j for j, c in enumerate(candidates) if c.memory.id in asked_ids}
    order = constraints.promote(order, found_for_need, opts.limit)
    rank_of = {j: r for r, j in enumerate(order)}
    judged = None
    judge_model = judge.judge_for(key) if probs is not None else None
    shown = order[: opts.limit]
    # facts that changed among the first contenders, before the judge: it reads each pair as one answer
    early = changes.superseded([candidates[j].memory for j in shown], vectors, list(vectors.values()),
                               [k < changes.CONTENDERS for k in range(len(shown))])
    inter = None
    if probs is not None and judge_model is not None:  # it reads the reranker's logit; without: fixed rules
        inter_model = interaction.interaction_for(key)
        if inter_model is not None and qvec is not None and all(c.memory.id in vectors for c in candidates):
            inter = inter_model.logits(qvec, np.vstack([vectors[c.memory.id] for c in candidates]))
            for row, v in zip(feature_rows, inter.tolist(), strict=True):
                row["interaction"] = v
        index = {candidates[j].memory.id: j for j in shown}
        judged = judge_model.probability(judge.judge_features(
            [c.cosine for c in candidates], probs, feats[:, FEATURES.index("keyword_overlap")],
            feats[:, FEATURES.index("bm25")], [rank_of[j] for j in range(len(candidates))],
            [j in found_for_need for j in range(len(candidates))], analysis.query_type.value,
            [(index[old], index[new]) for old, new in early.items()], inter))
    judge_p = judged.tolist() if judged is not None else None
    if judge_p is not None and judgement is None:
        # the judge is fitted per encoder on small stores too: the memories returned are ordered by its
        # probability (the same memories, so recall@limit holds)
        order = sorted(order[: opts.limit], key=lambda j: -judge_p[j]) + order[opts.limit:]
    best = max((judge_p[j] for j in order[: opts.limit]), default=0.0) if judge_p is not None else 0.0
    chosen = []
    for rank, j in enumerate(order[: opts.limit]):
        c = candidates[j]
        fdict = feature_rows[j]
        body = c.memory.full_text.casefold()
        matched = [k for k, forms in keyword_forms.items() if forms and all(f in body for f in forms)]
        score = prob[j] if prob is not None else c.fused
        if judge_p is not None and judge_model is not None:
            level = decide.with_reference(judge_model.level(judge_p[j], best), fdict["reference_overlap"],
                                          rank == 0)
        else:
            level = decide.relevance(score, c.cosine, fdict["keyword_overlap"], probs is not None,
                                     fdict["reference_overlap"], top=rank == 0)
        scores = {"fused": c.fused, "cosine": c.cosine, **c.scores}
        if prob is not None:
            scores["rerank"] = prob[j]
        if judge_p is not None:
            scores["judge"] = judge_p[j]
        why = decide.reason(fdict, matched, speaker_of(c.memory), reference, language, level,
                            prob[j] if prob is not None else None)
        if j in found_for_need and need is not None:
            why = decide.joined([need.reason(language), why], language)
        if judgement is not None and j in judgement.judged:
            scores["llm"] = judgement.judged[j]
            score, level, why = judgement.apply(j, score, level, why)
        chosen.append(RecalledMemory(c.memory, score, level, why, scores))
    relevant = [m.relevance != "none" or k < changes.CONTENDERS for k, m in enumerate(chosen)]
    links = early if not any(relevant[changes.CONTENDERS:]) else \
        changes.superseded([m.memory for m in chosen], vectors, list(vectors.values()), relevant)
    if links:
        moved = changes.newer_first(range(len(chosen)), [m.memory.id for m in chosen], links)
        level_of = {m.memory.id: m.relevance for m in chosen}
        for old, new in links.items():  # the newer fact answers whatever the older one answered
            level_of[new] = max(level_of[new], level_of[old], key=_LEVEL_ORDER.index)
        chosen = [replace(chosen[k], superseded_by=links.get(chosen[k].memory.id),
                          relevance=level_of[chosen[k].memory.id]) for k in moved]
    stages["decide"] = (time.perf_counter() - t0) * 1000
    stages["total"] = (time.perf_counter() - t_start) * 1000
    if not any(m.relevance != "none" for m in chosen):
        notes.append("candidates were found but none is likely relevant (all judged 'none')")
        RETRIEVAL_EMPTY.labels("none_relevant").inc()
    RETRIEVAL_LATENCY.labels(strategy.value).observe(stages["total"])
    trace = RecallTrace(
        strategy.value, forced, params.to_dict(), analysis.to_dict(), tuple(q.to_dict() for q in queries),
        tuple(SearchTrace(s.name, s.weight, s.ms, tuple((h.id, h.score) for h in s.hits)) for s in out.lists),
        str(Fusion(opts.fusion)),
        tuple(CandidateTrace(c.memory.id, c.fused, c.rank, None if prob is None else prob[k],
                             dict(c.scores), feature_rows[k],
                             judgement.final.get(k) if judgement is not None else None, rank_of[k],
                             None if judge_p is None else judge_p[k])
              for k, c in enumerate(candidates)),
        duplicates, dict(stages), tuple(notes), tuple(llm_records), links,
        {candidates[j].memory.id: need.reason(language) for j in sorted(found_for_need)} if need else {})
    return Recall(text, tuple(chosen), language, trace, opts.pack_chars,
                  judgement.injection_strategy if judgement is not None else None)


def _recent(recent: Iterable[Message | Mapping[str, Any]] | None, limit: int) -> list[Message]:
    if recent is None or limit == 0:
        return []
    out = []
    for m in list(recent)[-limit:]:
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            out.append(Message("", str(m.get("role", "user")), str(m.get("text", m.get("content", ""))), utcnow()))
    return out


def _filter(owner: str, opts: RecallOptions, now: datetime) -> SearchFilter:
    try:
        kinds = tuple(MemoryKind(k) for k in opts.kinds) if opts.kinds else None
    except ValueError:
        raise InputError(f"unknown kind in {opts.kinds!r}; use {', '.join(k.value for k in MemoryKind)}") from None
    # a window reaching back past the earliest time accepted (memroute.times) starts there
    start = (now - timedelta(days=min(opts.window_days, (now - EARLIEST).days))
             if opts.window_days is not None else None)
    return SearchFilter(owner=owner, session_id=opts.session, kinds=kinds,
                        max_sensitivity=Sensitivity.parse(opts.max_sensitivity), start=start, now=now)


def _language(analysis: QueryAnalysis | None) -> Language:
    if analysis is None or analysis.language not in ("en", "ja", "ko"):
        return "en"
    return analysis.language

