"""``memroute eval route``: replay routing dialogues turn by turn through :class:`ConversationRouter`.

Every dialogue is a session in a throw-away SQLite store: the system turns go into the conversation log as
assistant messages, each user turn is routed, and the router never sees a gold label. Metrics follow
``../shared/data/README.md``: ``all`` (prediction among the gold labels), ``first`` (first labelled turn),
``stay`` (no new label vs the previous labelled turn), ``switch_new`` (a new label: right only if the
prediction is one of the new ones), ``family_all`` (SGD families as one label), and latency per routed turn.
With an LLM (``--llm URL --llm-model NAME``) the router asks it under its policy, and the report adds the
LLM's calls, tokens, fallbacks and call latency.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np

from memroute.embed import ROUTING_EMBEDDER
from memroute.errors import InputError
from memroute.eval.datasets import Turn, family, load_candidates, load_dialogues
from memroute.llm import LlmAssistant, LlmUsage
from memroute.routing.bank import BUILTIN
from memroute.routing.composite import FRAME_WEIGHT, AgentRouter
from memroute.routing.conversation import ConversationDecision, ConversationRouter
from memroute.routing.fitted import FittedRouting, atomic_writer
from memroute.routing.policy import PolicyParams, told_switches
from memroute.routing.training import fit_dialogues
from memroute.text import detect_language

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RouteEvalReport:
    turns: int
    accuracy: dict[str, float]
    counts: dict[str, int]
    latency_ms: dict[str, float]
    actions: dict[str, int]
    llm: dict[str, Any] | None = None
    """Calls, tokens, fallbacks and call latency of the LLM steps, when routing used an LLM."""
    languages: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per language of the utterance (:func:`memroute.text.detect_language`): accuracy and counts."""
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    """Scored turns by gold agent, then by predicted agent (the gold label matched, else the new one)."""
    errors: int = 0
    """Wrong scored turns (every one written to ``--errors FILE`` when asked)."""
    fit: dict[str, Any] | None = None
    """How the router was fitted first (``--train``), when it was."""

    def as_dict(self) -> dict[str, Any]:
        out = {"turns": self.turns, "accuracy": self.accuracy, "counts": self.counts,
               "latency_ms": self.latency_ms, "actions": self.actions, "languages": self.languages,
               "errors": self.errors, "confusion": self.confusion}
        if self.llm is not None:
            out["llm"] = self.llm
        if self.fit is not None:
            out["fit"] = self.fit
        return out


KINDS = ("all", "first", "stay", "switch_new", "family_all")


class _Tally:
    """Hits per metric, overall and per language, the confusion table and the wrong turns."""

    def __init__(self, errors: IO[str] | None) -> None:
        self.hits: dict[str, list[bool]] = {k: [] for k in KINDS}
        self.by_language: dict[str, dict[str, list[bool]]] = {}
        self.confusion: dict[str, dict[str, int]] = {}
        self.errors = errors
        self.wrong = 0

    def add(self, dialogue: str, position: int, turn: Turn, pred: str, prev_gold: set[str] | None,
            decision: ConversationDecision | None) -> None:
        gold = set(turn.gold)
        ok = pred in gold
        new = gold - prev_gold if prev_gold is not None else set()
        kind = "first" if prev_gold is None else "switch_new" if new else "stay"
        right = (pred in new) if kind == "switch_new" else ok
        language = str(detect_language(turn.utterance)) if turn.utterance.strip() else "und"
        per = self.by_language.setdefault(language, {k: [] for k in KINDS})
        for hits in (self.hits, per):
            hits["all"].append(ok)
            hits["family_all"].append(family(pred) in {family(g) for g in gold})
            hits[kind].append(right)
        label = pred if ok else sorted(new or gold)[0]
        row = self.confusion.setdefault(label, {})
        row[pred or "(none)"] = row.get(pred or "(none)", 0) + 1
        if ok and right:
            return
        self.wrong += 1
        if self.errors is None:
            return
        scores = decision.scores if decision is not None else {}
        record = {"dialogue": dialogue, "turn": position, "text": turn.utterance, "gold": sorted(gold),
                  "predicted": pred or None, "kind": kind, "language": language,
                  "action": decision.action if decision is not None else "empty",
                  "reason": decision.reason if decision is not None else "empty user turn: the agent stays",
                  "system_before": turn.system_before,
                  "gold_scores": {g: scores.get(g) for g in sorted(gold)},
                  "top_scores": [{"agent": a, "score": s} for a, s in list(scores.items())[:5]]}
        self.errors.write(json.dumps(record, ensure_ascii=False) + "\n")

    def languages(self) -> dict[str, dict[str, Any]]:
        return {lang: {"accuracy": _means(h), "counts": {k: len(v) for k, v in h.items()}}
                for lang, h in sorted(self.by_language.items())}


def _means(hits: dict[str, list[bool]]) -> dict[str, float]:
    return {k: round(float(np.mean(v)), 4) if v else 0.0 for k, v in hits.items()}


def spread_sample(items: Sequence[T], size: int) -> list[T]:
    """``size`` items spread evenly over ``items`` (every k-th, from the first): deterministic, and unlike the
    first ``size`` it covers every part of a file that is grouped by topic (SGD's files are, by service)."""
    if size < 1:
        raise InputError(f"a sample needs at least one dialogue, got {size}")
    if size >= len(items):
        return list(items)
    return [items[i * len(items) // size] for i in range(size)]


def run_route_eval(data: str | Path, candidates: str | Path, split: str | None = None,
                   limit: int | None = None, params: PolicyParams | None = None,
                   show_progress: bool = False, llm: LlmAssistant | None = None,
                   sample: int | None = None, embedder: str = ROUTING_EMBEDDER,
                   oracle_switches: bool = False, errors: str | Path | None = None,
                   train: str | Path | None = None, fitted: FittedRouting | None = None,
                   train_split: str | None = None, train_dialogues: int = 5000,
                   bank: str = BUILTIN, frame_weight: float = FRAME_WEIGHT,
                   clause_weight: float | None = None) -> RouteEvalReport:
    """Replay the dialogues of ``data``: all of them, the first ``limit``, or a ``sample`` spread over the file.

    ``oracle_switches`` is a diagnostic ceiling, not a router: the session is reset exactly where the gold task
    changes (that turn is routed on its own text alone, without the previous turn as context) and never switches
    anywhere else (it still revises within a task), so the figures say what the per-turn evidence achieves with
    perfect switch detection. ``errors``: write every wrong scored turn there (JSON Lines, written to a
    temporary file and renamed when complete). ``train``: first fit the router on that routing set
    (:func:`memroute.routing.training.fit_dialogues`, its candidates from ``candidates`` for ``train_split``,
    default the file's name; at most ``train_dialogues`` of its dialogues; labels outside that catalogue are left
    out), then replay ``data`` with the fit; ``fitted`` replays with a fit made before. ``bank``: the request bank
    (:func:`memroute.routing.bank.bank_from_setting`'s form; ``off`` for none). ``frame_weight``,
    ``clause_weight``: the router's (:class:`AgentRouter`; both 0 score Japanese and Korean messages on their own
    text only; ``clause_weight`` ``None`` is ``frame_weight``)."""
    from tqdm import tqdm

    from memroute.memory import Memory

    dialogues = load_dialogues(data)
    if limit is not None:
        dialogues = dialogues[:limit]
    if sample is not None:
        dialogues = spread_sample(dialogues, sample)
    split = split if split is not None else Path(data).stem
    agents = load_candidates(candidates, split)
    router = AgentRouter(embedder=embedder, llm=llm, bank=bank, frame_weight=frame_weight,
                         clause_weight=clause_weight)
    fit_info: dict[str, Any] | None = None
    if train is not None:
        train_agents = load_candidates(candidates, train_split if train_split is not None else Path(train).stem)
        fitted = fit_dialogues(train, train_agents, AgentRouter(embedder=router.embedder, bank=bank),
                               show_progress=show_progress, unknown="skip", max_dialogues=train_dialogues)
    if fitted is not None:
        fit_info = fitted.summary(agents)
    usage = LlmUsage()
    memory = Memory.open("sqlite://:memory:", owner="eval", embedder=router.embedder)
    if oracle_switches:
        base = params or (fitted.policy if fitted is not None else PolicyParams())
        params = told_switches(base)
    conv = ConversationRouter(memory, agents, router=router, params=params, use_memories=False, candidates=2,
                              fitted=fitted)
    latencies: list[float] = []
    actions: dict[str, int] = {}
    with ExitStack() as stack:
        stack.callback(memory.close)
        sink = stack.enter_context(atomic_writer(errors)) if errors is not None else None
        tally = _Tally(sink)
        for dialogue in tqdm(dialogues, desc="dialogues", disable=not show_progress):
            prev_gold: set[str] | None = None
            pred = ""
            for position, turn in enumerate(dialogue.turns):
                if turn.system_before is not None:
                    memory.add_message(dialogue.dialogue_id, "assistant", turn.system_before)
                if oracle_switches and turn.gold and prev_gold is not None and set(turn.gold) - prev_gold:
                    conv.reset(dialogue.dialogue_id)
                decision = None
                if turn.utterance.strip():
                    decision = conv.route(turn.utterance, dialogue.dialogue_id)
                    latencies.append(decision.latency_ms)
                    usage.add(decision.llm)
                    actions[decision.action] = actions.get(decision.action, 0) + 1
                    pred = decision.agent.id if decision.agent else ""
                else:  # an empty user turn (it happens in the data): nothing to route, the agent stays
                    actions["empty"] = actions.get("empty", 0) + 1
                if not turn.gold:
                    continue
                tally.add(dialogue.dialogue_id, position, turn, pred, prev_gold, decision)
                prev_gold = set(turn.gold)
    lat = np.array(latencies) if latencies else np.zeros(1)
    return RouteEvalReport(
        turns=len(latencies),
        accuracy=_means(tally.hits),
        counts={k: len(v) for k, v in tally.hits.items()},
        latency_ms={"p50": round(float(np.percentile(lat, 50)), 3), "p95": round(float(np.percentile(lat, 95)), 3)},
        actions=dict(sorted(actions.items())),
        llm=usage.as_dict() if llm is not None else None,
        languages=tally.languages(),
        confusion={g: dict(sorted(row.items(), key=lambda kv: -kv[1])) for g, row in sorted(tally.confusion.items())},
        errors=tally.wrong,
        fit=fit_info,
    )


# ------------------------------------------------------------------------------------ benchmark
# A synthetic catalogue (written for this benchmark, no evaluation data): every agent is a distinct
# combination of a task, a subject and an audience, so that 10,000 agents are all different but related.
_TASKS = ("translate", "summarize", "review", "schedule", "book", "track", "compare", "explain", "repair",
          "design", "plan", "audit", "forecast", "recommend", "monitor", "draft", "negotiate", "diagnose",
          "teach", "organize")
_SUBJECTS = ("legal contracts", "python code", "restaurant tables", "flight tickets", "hotel rooms",
             "weather forecasts", "tax returns", "medical appointments", "car rentals", "music playlists",
             "movie tickets", "bank transfers", "insurance claims", "job applications", "garden plants",
             "home repairs", "wedding guests", "train journeys", "server incidents", "marketing emails",
             "kitchen recipes", "fitness workouts", "university courses", "apartment viewings", "pet care",
             "photo albums", "shipping parcels", "energy bills", "stock portfolios", "board games",
             "bicycle parts", "concert seats", "podcast episodes", "chess openings", "wine pairings",
             "mobile apps", "database backups", "yoga classes", "sales reports", "family budgets",
             "museum visits", "language lessons", "laptop drivers", "coffee orders", "hiking routes",
             "dental checkups", "charity donations", "car insurance", "library books", "phone plans")
_AUDIENCES = ("students", "small businesses", "families", "doctors", "developers", "travellers", "lawyers",
              "teachers", "retirees", "startups")


def synthetic_catalogue(n: int) -> tuple[list[Any], list[tuple[str, str]]]:
    """``n`` distinct agents (description + two example utterances) and a pool of test messages per agent,
    each message a paraphrase the agent did not see."""
    from memroute.types import Agent

    agents, messages = [], []
    combos = len(_TASKS) * len(_SUBJECTS) * len(_AUDIENCES)
    for i in range(n):
        k = (i * 7919) % combos  # spread consecutive agents over the combinations
        task = _TASKS[k % len(_TASKS)]
        subject = _SUBJECTS[(k // len(_TASKS)) % len(_SUBJECTS)]
        audience = _AUDIENCES[(k // (len(_TASKS) * len(_SUBJECTS))) % len(_AUDIENCES)]
        suffix = "" if i < combos else f" (pool {i // combos})"
        agent_id = f"agent-{i:05d}"
        agents.append(Agent(
            id=agent_id, name=f"{task} {subject} for {audience}{suffix}",
            description=f"Helps {audience} {task} {subject}.",
            examples=(f"I need to {task} some {subject}", f"can you {task} {subject} for our {audience}?"),
        ))
        messages.append((f"We are {audience} and want help to {task} {subject} this week", agent_id))
    return agents, messages


def _latency(values: list[float]) -> dict[str, float]:
    arr = np.array(values) if values else np.zeros(1)
    return {"p50": round(float(np.percentile(arr, 50)), 3), "p95": round(float(np.percentile(arr, 95)), 3)}


def _pick(messages: list[tuple[str, str]], queries: int) -> list[tuple[str, str]]:
    step = max(1, len(messages) // queries)
    return messages[::step][:queries]


def bench_memroute(n: int, queries: int) -> dict[str, Any]:
    import time

    agents, messages = synthetic_catalogue(n)
    chosen = _pick(messages, queries)
    router = AgentRouter()
    start = time.perf_counter()
    router.index(agents)
    build = time.perf_counter() - start
    router.route("warm up the encoder", agents)
    lat, hits = [], 0
    for text, target in chosen:
        t0 = time.perf_counter()
        out = router.route(text, agents)
        lat.append((time.perf_counter() - t0) * 1000.0)
        hits += int(out.agent is not None and out.agent.id == target)
    # The same messages again: their embeddings are now cached, so this is routing alone.
    alone = []
    for text, _ in chosen:
        t0 = time.perf_counter()
        router.route(text, agents)
        alone.append((time.perf_counter() - t0) * 1000.0)
    return {"agents": n, "queries": len(chosen), "latency_ms": _latency(lat),
            "routing_only_ms": _latency(alone), "accuracy": round(hits / max(1, len(chosen)), 4),
            "build_s": round(build, 2)}


def bench_semantic_router(n: int, queries: int) -> dict[str, Any]:
    """The same agents and messages through semantic-router (run in its own environment), with memroute's
    default encoder behind semantic-router's encoder interface, so that only the routers differ."""
    import time

    from semantic_router import IndexedRouter, Route  # type: ignore[import-not-found,unused-ignore]
    from semantic_router.encoders import DenseEncoder  # type: ignore[import-not-found,unused-ignore]

    from memroute.embed import get_embedder

    embedder = get_embedder("use-m3")

    class MemrouteEncoder(DenseEncoder):  # type: ignore[misc,unused-ignore]
        name: str = "memroute-use-m3"

        def __call__(self, docs: list[Any]) -> list[list[float]]:
            return [list(map(float, v)) for v in embedder.embed([str(d) for d in docs], side="query")]

    agents, messages = synthetic_catalogue(n)
    chosen = _pick(messages, queries)
    routes = [Route(name=a.id, utterances=[a.description, *a.examples]) for a in agents]
    start = time.perf_counter()
    router = IndexedRouter(encoder=MemrouteEncoder(), routes=routes)
    build = time.perf_counter() - start
    router("warm up the encoder")
    lat, hits = [], 0
    for text, target in chosen:
        t0 = time.perf_counter()
        choice = router(text)
        lat.append((time.perf_counter() - t0) * 1000.0)
        hits += int(getattr(choice, "name", None) == target)
    import semantic_router

    return {"agents": n, "queries": len(chosen), "latency_ms": _latency(lat),
            "accuracy": round(hits / max(1, len(chosen)), 4), "build_s": round(build, 2),
            "version": getattr(semantic_router, "__version__", "?")}


def run_route_bench(sizes: list[int], queries: int, semantic_router_python: str | None = None) -> list[dict[str, Any]]:
    import subprocess

    results = []
    for n in sizes:
        row: dict[str, Any] = {"memroute": bench_memroute(n, queries)}
        if semantic_router_python:
            proc = subprocess.run([semantic_router_python, "-m", "memroute.eval.route_eval", "semantic-router",
                                   str(n), str(queries)], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                row["semantic_router"] = {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
            else:
                sr = json.loads(proc.stdout.strip().splitlines()[-1])
                row["semantic_router"] = sr
                m = row["memroute"]
                row["ratio_semantic_router_over_memroute"] = {
                    "p50": round(sr["latency_ms"]["p50"] / max(m["latency_ms"]["p50"], 1e-9), 2),
                    "p95": round(sr["latency_ms"]["p95"] / max(m["latency_ms"]["p95"], 1e-9), 2),
                    "accuracy": round(sr["accuracy"] / max(m["accuracy"], 1e-9), 3),
                }
        results.append(row)
    return results


if __name__ == "__main__":  # the semantic-router side, run inside the benchmark environment
    import sys

    if len(sys.argv) == 4 and sys.argv[1] == "semantic-router":
        print(json.dumps(bench_semantic_router(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        sys.exit("usage: python -m memroute.eval.route_eval semantic-router N QUERIES")
