"""`memroute eval recall`: recall quality on the LoCoMo format, with BM25-only and vector-only baselines.

One store per conversation (every turn a memory, see :mod:`memroute.eval.locomo`); each question is
recalled at a ``now`` after the last session, with no recent conversation. The ranking scored is the
pipeline's whole candidate list in final order (reranked, or fused when reranking is off), so recall@10
and MRR see past the returned five. Baselines run on the same stores: BM25 over a memory's own words with
the question's tokens, and cosine KNN of the question alone.

``--loo`` refits the reranker seven times, on six conversations each, and scores the seventh with it
(leave-one-conversation-out): the honest figure, since the shipped weights were fitted on all seven.
``--fit`` fits on every conversation and writes the weights the package ships for the run's embedder (its
entry of ``retrieval/rerank_weights.json``, keyed by the embedder's ``model_id``; the other encoders' entries
are left as they are).

``--store postgresql://...`` keeps the conversations in that database instead, each in a schema of its own
(``locomo_<sample id>_<embedder>``), to compare the backends on the same questions.

``--llm URL --llm-model NAME`` runs the same questions with LLM expansion and rerank (policy from the
``MEMROUTE_LLM_*`` settings) and reports the LLM's calls, tokens and latency beside the figures; the
baselines and ``--loo`` / ``--fit`` stay LLM-free (they read the local features only).
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memroute.embed import UseM3Embedder, get_embedder
from memroute.embed.tokens import ranking_id, token_source
from memroute.errors import InputError
from memroute.eval import judge_eval
from memroute.eval.interaction_fit import TrainingQuestion, question_pairs
from memroute.eval.locomo import CATEGORIES, Conversation, load_locomo
from memroute.llm import LlmAssistant, LlmUsage
from memroute.memory import Memory
from memroute.retrieval import FEATURES, CandidateTrace, RecallOptions, RerankModel, interaction, reranker_for
from memroute.retrieval import rerank as rerank_module
from memroute.retrieval.rerank import LATE
from memroute.retrieval.rerank_fit import fit_reranker
from memroute.text import query_terms

WEIGHTS_PATH = Path(__file__).resolve().parent.parent / "retrieval" / rerank_module.WEIGHTS_FILE
FALLBACK = UseM3Embedder.model_id
"""The encoder whose reranker every encoder without its own gets (the default embedder's)."""
L2 = 10.0
"""The reranker's L2 strength, chosen by leave-one-conversation-out on LoCoMo among 1, 10 and 30
(hit@5 0.799 / 0.802 / 0.800 with 15 results per query and 50 candidates)."""


@dataclass(frozen=True, slots=True)
class FitSettings:
    """How ``--fit`` and ``--loo`` fit an encoder's reranker."""

    l2: float = L2
    everyday_share: float = 0.0
    """The share of the fit's weight on the everyday train split's candidates (0: LoCoMo alone). Above 0
    the model also has weights of its own for small stores (:data:`memroute.retrieval.rerank.SMALL_FEATURES`)."""
    late: bool = False
    """Fit the late-interaction column (:data:`memroute.retrieval.rerank.LATE`) too, when the embedder gives token
    vectors (the pair's default, unless ``MEMROUTE_LATE_INTERACTION=0``; the recalls trace it and the fit is written
    under ``<model id>#late``)."""


FIT_SETTINGS = {"use-m3+e5-small": FitSettings(l2=1.0, everyday_share=0.25, late=True)}
"""Per embedder name, else :class:`FitSettings`'s defaults. Chosen by leave-one-group-out over LoCoMo's
conversations and the everyday train stores (docs/benchmarks.md, Everyday recall, tenth pass): for the pair,
small-store weights fitted with a quarter of the weight on everyday train put the answer first for 149 of
train's 225 answerable questions held out by store (137 with LoCoMo alone), LoCoMo recall@5 0.753 held out;
for use-m3 they gained 1 question and cost LoCoMo 0.003, so use-m3 keeps LoCoMo alone. The pair also reads
late interaction (the thirteenth pass), as the eleventh pass's estimate recommended."""


@dataclass(frozen=True, slots=True)
class EverydayRun:
    """An everyday train question's candidates as the reranker's fit reads them."""

    store: str
    answers: frozenset[str]
    answerable: bool
    ids: tuple[str, ...]
    features: npt.NDArray[np.float64]
    labelled: npt.NDArray[np.bool_]
    """Candidates counted in the fit (stale and related memories are neither answers nor misses)."""
    small: bool
    late: npt.NDArray[np.float64]
    """Each candidate's late-interaction score as traced (NaN where it has none)."""


def late_column(cands: Sequence[CandidateTrace]) -> npt.NDArray[np.float64]:
    """The candidates' traced late-interaction scores (:data:`LATE`), NaN where a candidate has none."""
    return np.array([c.features.get(LATE, np.nan) for c in cands], dtype=np.float64)


def everyday_runs(embedder: str, max_candidates: int) -> list[EverydayRun]:
    """The everyday train split recalled with ``embedder`` (:func:`memroute.eval.judge_eval.everyday_train`)."""
    out = []
    for t in judge_eval.everyday_train(embedder):
        cands = t.trace.candidates
        x = np.array([[c.features.get(f, 0.0) for f in FEATURES] for c in cands], dtype=np.float64)
        out.append(EverydayRun(t.group, t.answers, t.answerable, tuple(c.id for c in cands),
                               x.reshape(len(cands), len(FEATURES)), np.array([c.id not in t.ignore for c in cands]),
                               len(cands) < max_candidates, late_column(cands)))
    return [r for r in out if r.ids]


def fit_model(runs: Sequence[QuestionRun], everyday: Sequence[EverydayRun], settings: FitSettings,
              max_candidates: int, fitted_on: str) -> RerankModel:
    """The reranker fitted on LoCoMo's ``runs`` and, when ``settings`` give them a share, ``everyday``'s."""
    x, y = training_rows(runs)
    late = np.concatenate([r.late for r in runs if r.ids]) if settings.late else None
    if settings.everyday_share <= 0 or not everyday:
        return fit_reranker(x, y, l2=settings.l2, fitted_on=fitted_on, late=late)
    small = np.concatenate([np.full(len(r.ids), float(len(r.ids) < max_candidates)) for r in runs if r.ids])
    xe = np.vstack([r.features[r.labelled] for r in everyday])
    ye = np.concatenate([np.array([float(i in r.answers) for i in r.ids])[r.labelled] for r in everyday])
    se = np.concatenate([np.full(int(r.labelled.sum()), float(r.small)) for r in everyday])
    if late is not None:
        late = np.concatenate([late, *(r.late[r.labelled] for r in everyday)])
    n, share = len(y) + len(ye), settings.everyday_share
    weight = np.concatenate([np.full(len(y), (1 - share) * n / len(y)), np.full(len(ye), share * n / len(ye))])
    return fit_reranker(np.vstack([x, xe]), np.concatenate([y, ye]), l2=settings.l2, fitted_on=fitted_on,
                        weight=weight, small=np.concatenate([small, se]), late=late)


def first_answers(model: RerankModel, everyday: Sequence[EverydayRun]) -> tuple[int, float]:
    """How many answerable questions the model's first candidate answers, and the answers' mean reciprocal
    rank."""
    first, rr = 0, 0.0
    for r in everyday:
        if not r.answerable:
            continue
        p = model.score(r.features, r.small, r.late)
        ranked = [r.ids[j] for j in sorted(range(len(r.ids)), key=lambda j: (-p[j], j))]
        first += ranked[0] in r.answers
        k = next((i for i, mid in enumerate(ranked) if mid in r.answers), None)
        rr += 0.0 if k is None else 1.0 / (k + 1)
    return first, rr


@dataclass(frozen=True, slots=True)
class QuestionRun:
    sample_id: str
    category: int
    evidence: frozenset[str]
    ids: tuple[str, ...]
    """Candidates in fused order."""
    features: npt.NDArray[np.float64]
    final: tuple[str, ...]
    """Candidates in the pipeline's final order."""
    bm25: tuple[str, ...]
    vector: tuple[str, ...]
    ms: float
    judged: TrainingQuestion
    """What the judge saw of the first five (for ``--fit-judge`` and the injection figures), with the
    interaction model's rows when ``pairs`` was asked for."""
    late: npt.NDArray[np.float64]
    """Each candidate's late-interaction score as traced (NaN where it has none)."""


def scores(ranking: Sequence[str], evidence: frozenset[str]) -> dict[str, float]:
    top5, top10 = set(ranking[:5]), set(ranking[:10])
    first = next((i for i, mid in enumerate(ranking) if mid in evidence), None)
    dcg = sum(1.0 / math.log2(i + 2) for i, mid in enumerate(ranking[:10]) if mid in evidence)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    return {"recall@5": len(top5 & evidence) / len(evidence), "recall@10": len(top10 & evidence) / len(evidence),
            "hit@5": float(bool(top5 & evidence)), "mrr": 0.0 if first is None else 1.0 / (first + 1),
            "ndcg@10": dcg / ideal if ideal else 0.0}


def summarise(rows: Sequence[tuple[int, dict[str, float]]]) -> dict[str, Any]:
    def mean(group: Sequence[dict[str, float]]) -> dict[str, Any]:
        keys = ("recall@5", "recall@10", "hit@5", "mrr", "ndcg@10")
        return {"questions": len(group), **{k: round(float(np.mean([g[k] for g in group])), 4) if group else 0.0
                                           for k in keys}}

    out = mean([r for _, r in rows])
    out["by_category"] = {f"{c} {CATEGORIES[c]}": mean([r for cat, r in rows if cat == c])
                          for c in sorted({cat for cat, _ in rows})}
    return out


def conversation_url(store_url: str, sample_id: str, embedder: str) -> str:
    """A schema of ``store_url`` (PostgreSQL) for one conversation: one store per conversation, as with the
    SQLite files, so that BM25's collection statistics are the conversation's alone on both backends."""
    if not store_url.startswith(("postgresql://", "postgres://")):
        raise InputError("--store needs a postgresql:// URL (without --store the stores are SQLite files in "
                         "--workdir)")
    if "schema=" in store_url:
        raise InputError("--store: leave schema= out of the URL; each conversation gets a schema of its own "
                         "(locomo_<sample id>_<embedder>)")
    schema = re.sub(r"[^a-z0-9_]", "_", f"locomo_{sample_id}_{embedder}".lower())
    return f"{store_url}{'&' if '?' in store_url else '?'}schema={schema}"


def open_store(conv: Conversation, workdir: Path, embedder: str, llm: LlmAssistant | None = None,
               store_url: str | None = None) -> Memory:
    """The conversation's store, built on first use and reused afterwards (a SQLite file in ``workdir``, or
    a schema of the PostgreSQL ``store_url``); its recalls use ``llm`` and nothing else (not an LLM
    configured in the environment)."""
    url = (conversation_url(store_url, conv.sample_id, embedder) if store_url
           else f"sqlite:///{workdir / f'{conv.sample_id}-{embedder}.db'}")
    mem = Memory.open(url, owner=conv.sample_id, embedder=embedder)
    mem.llm = llm
    if mem.store.count(conv.sample_id) != len(conv.turns):
        mem.forget(everything=True)
        mem.remember_many(conv.memories(), batch_size=256)
    return mem


def run_conversation(mem: Memory, conv: Conversation, options: RecallOptions,
                     usage: LlmUsage | None = None, pairs: bool = False) -> list[QuestionRun]:
    """``pairs``: keep each question's interaction rows (:mod:`memroute.eval.interaction_fit`) for the
    judge's stacked fit."""
    runs = []
    flt = mem.filter(max_sensitivity="private", now=conv.now)
    opts = replace(options, limit=max(options.limit, 10))
    for q in conv.questions:
        t0 = time.perf_counter()
        result = mem.recall(q.text, now=conv.now, options=opts)
        ms = (time.perf_counter() - t0) * 1000
        if usage is not None:
            usage.add(result.trace.llm)
        cands = result.trace.candidates
        x = np.array([[c.features.get(f, 0.0) for f in FEATURES] for c in cands], dtype=np.float64)

        def local(c: CandidateTrace) -> float:
            return float(c.rerank if c.rerank is not None else c.fused)

        # The pipeline's order: the LLM-blended score where the LLM judged, else the local one.
        final = sorted(cands, key=lambda c: (-(c.final if c.final is not None else local(c)), -local(c),
                                             c.fused_rank))
        bm25 = mem.store.search_bm25(query_terms(q.text), flt, 10)
        vec = mem.store.search_vector(mem.embedder.embed([q.text], side="query")[0], flt, 10)
        runs.append(QuestionRun(conv.sample_id, q.category, frozenset(q.evidence), tuple(c.id for c in cands),
                                x.reshape(len(cands), len(FEATURES)), tuple(c.id for c in final),
                                tuple(h.id for h in bm25), tuple(h.id for h in vec), ms,
                                TrainingQuestion(
                                    result.trace, frozenset(q.evidence), "locomo", conv.sample_id,
                                    limit=options.limit,
                                    pairs=question_pairs(mem, conv.sample_id, result.trace, q.evidence, "locomo",
                                                         conv.sample_id) if pairs else None),
                                late_column(cands)))
    return runs


def rescore(runs: Sequence[QuestionRun], model: RerankModel,
            max_candidates: int = RecallOptions().max_candidates) -> list[tuple[int, dict[str, float]]]:
    out = []
    for r in runs:
        if not r.ids:
            out.append((r.category, scores((), r.evidence)))
            continue
        p = model.score(r.features, len(r.ids) < max_candidates, r.late)
        order = sorted(range(len(r.ids)), key=lambda j: (-p[j], j))
        out.append((r.category, scores([r.ids[j] for j in order], r.evidence)))
    return out


def training_rows(runs: Sequence[QuestionRun]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    xs = [r.features for r in runs if r.ids]
    ys = [np.array([float(i in r.evidence) for i in r.ids]) for r in runs if r.ids]
    return np.vstack(xs), np.concatenate(ys)


def evaluate(data_dir: str | Path, options: RecallOptions | None = None, embedder: str = "use-m3",
             loo: bool = False, fit: bool = False, workdir: str | Path | None = None,
             l2: float | None = None, llm: LlmAssistant | None = None, limit: int | None = None,
             store_url: str | None = None, fit_judge: bool = False,
             weights_path: Path = WEIGHTS_PATH, judge_features: Sequence[str] | None = None,
             judge_l2: Sequence[float] | None = None) -> dict[str, Any]:
    """``limit``: only the first ``limit`` questions (in file order), e.g. to bound the cost of an LLM run.
    ``store_url``: a PostgreSQL database holding the conversations (a schema each) instead of SQLite files.
    ``fit_judge``: refit the relevance judge of this embedder (LoCoMo with the everyday set's train split)
    and write it into ``retrieval/judge_weights.json``; the injection figures are reported either way.
    ``weights_path``: the reranker weights file ``fit`` writes this embedder's entry into (the package's).
    ``l2``: the reranker's L2 strength (default: the embedder's :data:`FIT_SETTINGS`).
    ``judge_features`` / ``judge_l2``: the judge's feature sets and L2 strengths the selection of ``fit_judge``
    and ``loo`` chooses among (one of each holds it fixed; default: all of them)."""
    options = options or RecallOptions()
    if (judge_features is not None or judge_l2 is not None) and not (fit_judge or loo):
        raise InputError("--judge-features and --judge-l2 narrow the judge's selection: give --fit-judge or --loo")
    if fit and fit_judge:
        raise InputError("run --fit first and --fit-judge after it: the judge reads the reranker's logits, and "
                         "this run's recalls used the reranker shipped before it")
    settings = FIT_SETTINGS.get(embedder, FitSettings())
    if l2 is not None:
        settings = replace(settings, l2=l2)
    if settings.late and token_source(get_embedder(embedder)) is None:  # late interaction off: no column to fit
        settings = replace(settings, late=False)
    convs = load_locomo(data_dir)
    if limit is not None:
        kept, left = [], limit
        for conv in convs:
            if left > 0:
                kept.append(replace(conv, questions=conv.questions[:left]))
                left -= len(kept[-1].questions)
        convs = kept
    if not any(conv.questions for conv in convs):
        raise InputError(f"no questions to evaluate in {data_dir}" + (f" with --limit {limit}" if limit is not None
                                                                        else ""))
    if loo and len(convs) < 2:
        raise InputError(f"--loo holds each conversation out in turn and needs at least two; "
                         f"{'--limit ' + str(limit) + ' keeps' if limit is not None else 'the data has'} "
                         f"{len(convs)}")
    usage = LlmUsage() if llm is not None else None
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="memroute-eval-")
        workdir = tmp.name
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    model_id = ranking_id(get_embedder(embedder))  # the key its reranker is written under
    # the judge's fit reads cross-fitted interaction logits: the questions' vectors are needed
    stack = options.rerank and (fit_judge or (loo and interaction.interaction_for(model_id) is not None))
    runs: list[QuestionRun] = []
    try:
        for conv in convs:
            mem = open_store(conv, work, embedder, llm, store_url)
            try:
                runs.extend(run_conversation(mem, conv, options, usage, stack))
            finally:
                mem.close()
    finally:
        if tmp is not None:
            tmp.cleanup()
    lat = np.array([r.ms for r in runs])
    result: dict[str, Any] = summarise([(r.category, scores(r.final, r.evidence)) for r in runs])
    result["latency_ms"] = {"p50": round(float(np.percentile(lat, 50)), 2),
                            "p95": round(float(np.percentile(lat, 95)), 2)}
    result["baselines"] = {
        "bm25": summarise([(r.category, scores(r.bm25, r.evidence)) for r in runs]),
        "vector": summarise([(r.category, scores(r.vector, r.evidence)) for r in runs]),
        "fused_no_rerank": summarise([(r.category, scores(r.ids, r.evidence)) for r in runs]),
    }
    result["config"] = {"store": "sqlite" if store_url is None else "postgresql (a schema per conversation)",
                        "embedder": embedder, "rerank": options.rerank, "fusion": str(options.fusion),
                        "k_per_query": options.k_per_query, "max_candidates": options.max_candidates,
                        "reranker_weights": reranker_for(model_id).fitted_on if options.rerank else None,
                        "llm": None if llm is None else {"model": llm.llm.model, "steps": sorted(llm.policy.steps),
                                                         "only_when_needed": llm.policy.only_when_needed}}
    if usage is not None:
        result["llm"] = usage.as_dict()
    everyday = everyday_runs(embedder, options.max_candidates) if (loo or fit) and settings.everyday_share > 0 \
        else []
    if loo:
        rows = []
        for conv in convs:
            train = [r for r in runs if r.sample_id != conv.sample_id]
            model = fit_model(train, everyday, settings, options.max_candidates, f"all but {conv.sample_id}")
            rows.extend(rescore([r for r in runs if r.sample_id == conv.sample_id], model, options.max_candidates))
        result["leave_one_conversation_out"] = summarise(rows)
        if everyday:  # each train store scored by a reranker fitted without it
            first, rr = 0, 0.0
            for store in dict.fromkeys(r.store for r in everyday):
                model = fit_model(runs, [r for r in everyday if r.store != store], settings, options.max_candidates,
                                  f"all but {store}")
                a, b = first_answers(model, [r for r in everyday if r.store == store])
                first, rr = first + a, rr + b
            answerable = sum(r.answerable for r in everyday)
            result["everyday_train_leave_one_store_out"] = {
                "answerable": answerable, "first_answers": first, "mrr": round(rr / answerable, 4)}
    judged = [r.judged for r in runs if options.rerank]
    if judged:
        result["injection"] = judge_eval.injection(judged, embedder, fit_judge, loo=loo or fit_judge, stack=stack,
                                                   features=judge_features, l2s=judge_l2)
    if fit:
        _, y = training_rows(runs)
        with_everyday = (f" and everyday train ({len(everyday)} questions, a share of {settings.everyday_share:g} of "
                         "the weight, small-store weights)" if everyday else "")
        model = fit_model(runs, everyday, settings, options.max_candidates, (
            f"LoCoMo, {len(convs)} conversations ({', '.join(c.sample_id for c in convs)}), {len(runs)} questions, "
            f"{len(y)} candidates{with_everyday}; logistic regression, L2 {settings.l2:g}; embedder {embedder}; "
            f"{datetime.now(UTC):%Y-%m-%d}"))
        write_reranker(weights_path, model_id, model)
        result["fitted"] = {"path": str(weights_path), "encoder": model_id,
                            "in_sample": summarise(rescore(runs, model, options.max_candidates))}
        if everyday:
            first, rr = first_answers(model, everyday)
            result["fitted"]["everyday_train_in_sample"] = {"first_answers": first,
                                                            "mrr": round(rr / sum(r.answerable for r in everyday), 4)}
    return result


def write_reranker(path: Path, model_id: str, model: RerankModel) -> None:
    """``model`` as the encoder ``model_id``'s entry of the weights file at ``path`` (format
    :data:`memroute.retrieval.rerank.FORMAT`), the other entries kept; a format-1 file's one model is kept as
    use-m3's (it was fitted with use-m3)."""
    fallback, encoders = (rerank_module.parse_weights(json.loads(path.read_text("utf-8"))) if path.exists()
                          else (FALLBACK, {}))
    if "" in encoders:  # format 1
        encoders = {FALLBACK: encoders.pop(""), **encoders}
    encoders[model_id] = model.to_dict()
    path.write_text(json.dumps({"version": rerank_module.FORMAT, "fallback": fallback or FALLBACK,
                                "encoders": encoders}, indent=1) + "\n", encoding="utf-8")
    rerank_module.clear_cache()
