"""``fit_dialogues``: teach the conversation router from labelled conversations (``memroute fit --dialogues``).

Input: dialogues in the routing-set format (one JSON record per user turn, the agent(s) it went to in
``gold_services`` / ``gold_domains`` / ``agents``; an empty list is an unlabelled turn, ``oos`` one that should
get no route). Output: a :class:`~memroute.routing.fitted.FittedRouting` with

(a) **example utterances per agent**, for the example classifier (:mod:`memroute.routing.examples`):
    single-label turns that sit closer to their own agent's centroid than to any other (a bare "yes,
    please" belongs to no agent), de-duplicated, and chosen to cover the agent's requests (greedy facility
    location over cosine similarity), at most ``examples_per_agent`` each;
(b) **the stay / switch rule's weights** (:class:`PolicyParams`): the training dialogues are replayed through
    :class:`ConversationRouter` with examples chosen on the *other* folds only (cross-fitting: a turn never
    sees itself as an example), every user turn's scores and features are recorded, and the rule is fitted
    as it was on SGD dev for the zero-shot defaults: a logistic regression of "the best other agent is the
    right one" over the turns where it differs from the current (the previous turn's) agent, with a prior
    centred on the zero-shot weights, so that a few dialogues move them little. The intercept, the drift,
    the revision lead and the assistant's weight are then chosen by replaying the recorded turns with
    :func:`memroute.routing.policy.user_step` itself (a small grid, coordinate by coordinate; the default
    wins ties);
(c) **thresholds**: the confidence calibration fitted on the same turns' own-text rankings
    (:func:`memroute.routing.calibration.fit_calibration`).

Last, up to :data:`ZERO_SHOT_CHECK` training dialogues are replayed zero-shot as well: a fit that does not beat
zero-shot routing there is written without examples and with the zero-shot rule (and says so), so a fit never
makes routing worse on the conversations it was made from.

The file is read as a stream; at most ``max_dialogues`` dialogues (a deterministic reservoir sample), plus up
to :data:`PER_AGENT_DIALOGUES` of each agent the sample left out, are kept: memory is bounded whatever the
file's size.
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from memroute.errors import InputError
from memroute.routing.calibration import Calibration, FitExample, features, fit_calibration
from memroute.routing.composite import AgentRouter
from memroute.routing.conversation import ConversationRouter
from memroute.routing.example_choice import select_examples
from memroute.routing.fitted import FittedRouting, catalogue_hash, encoder_name, router_bank
from memroute.routing.index import F32
from memroute.routing.policy import PolicyParams, Step, TurnFeatures, normalised, user_step
from memroute.types import Agent

MIN_RULE_TURNS = 20
"""Fewer switch (or stay) decisions than this keep the zero-shot rule weights: nothing to fit them on."""
PRIOR = 5.0
"""Precision of the prior that holds the rule's weights near the zero-shot ones (per weight)."""
FOLDS = 3
ZERO_SHOT_CHECK = 300
"""Training dialogues replayed zero-shot too, to check that the fit beats zero-shot routing."""
PER_AGENT_DIALOGUES = 3
"""An agent that the ``max_dialogues`` sample left out gets up to this many of its dialogues added, so that it
is not left without examples (a fit that covers every agent is the only kind that applies)."""
OOS = frozenset({"oos", "ood", "out_of_scope", "outofscope"})


@dataclass(frozen=True, slots=True)
class _Turn:
    text: str
    system: str | None
    gold: frozenset[str]
    oos: bool


@dataclass(frozen=True, slots=True)
class _Dialogue:
    id: str
    turns: tuple[_Turn, ...]


@dataclass(slots=True)
class _Obs:
    """One user turn as the router saw it: what :func:`user_step` got, and the assistant's evidence since the
    previous routed turn (``delta``)."""

    scores: F32 | None
    allowed: np.ndarray[Any, np.dtype[np.bool_]] | None
    features: TurnFeatures | None
    delta: F32 | None
    gold: frozenset[str]
    oos: bool


class _Recorder(ConversationRouter):
    """A :class:`ConversationRouter` that keeps what each policy step was given."""

    lazy_replies = False  # every turn's replies in its evidence: a replay under other weights may stay there

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trace: list[tuple[F32, Any, TurnFeatures, F32 | None, F32]] = []

    def _step(self, scores: F32, allowed: Any, current: int | None, evidence: F32 | None,
              features: TurnFeatures) -> Step:
        step = super()._step(scores, allowed, current, evidence, features)
        self.trace.append((scores.copy(), allowed.copy(), features, None if evidence is None else evidence.copy(),
                           step.evidence))
        return step


# ------------------------------------------------------------------------------------ reading
def _read(path: str | Path, known: set[str], unknown: str, max_dialogues: int,
          progress: Callable[[Iterable[Any]], Iterable[Any]]) -> tuple[list[_Dialogue], dict[str, Any]]:
    from memroute.eval.datasets import iter_dialogues
    from memroute.text import detect_language

    rng, rare_rng = random.Random(13), random.Random(14)
    kept: list[_Dialogue] = []
    rare: dict[str, list[_Dialogue]] = {}
    by_label: Counter[str] = Counter()
    seen = 0
    labels: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    languages: Counter[str] = Counter()
    turns = labelled = 0
    for dialogue in progress(iter_dialogues(path)):
        out = []
        for turn in dialogue.turns:
            gold = {g for g in turn.gold if g.strip().lower() not in OOS}
            oos = bool(turn.gold) and not gold
            for g in gold - known:
                missing[g] += 1
            gold &= known
            turns += 1
            labelled += bool(gold) or oos
            labels.update(gold)
            if turn.utterance.strip():
                languages[str(detect_language(turn.utterance))] += 1
            out.append(_Turn(turn.utterance, turn.system_before, frozenset(gold), oos))
        seen += 1
        item = _Dialogue(dialogue.dialogue_id, tuple(out))
        _reservoir(kept, item, seen, max_dialogues, rng)
        for label in {g for t in out for g in t.gold}:  # and a few of every agent's, so none is left out
            by_label[label] += 1
            _reservoir(rare.setdefault(label, []), item, by_label[label], PER_AGENT_DIALOGUES, rare_rng)
    if not seen:
        raise InputError(f"{path}: no dialogues; a routing set has one JSON record per user turn "
                         "(dialogue_id, turn_idx, utterance, gold_services)")
    if missing and unknown == "error":
        names = ", ".join(f"{k} ({v} turns)" for k, v in missing.most_common(5))
        raise InputError(f"{path}: labels name agents that are not in the catalogue: {names}; fix the labels or "
                         "the catalogue, or pass --skip-unknown to leave those labels out")
    if not labels:
        what = " (every label names an agent outside the catalogue)" if missing else ""
        raise InputError(f"{path}: no turn is labelled with an agent of the catalogue{what}; label each turn "
                         "with the agent it went to (gold_services / gold_domains / agents)")
    covered = {g for d in kept for t in d.turns for g in t.gold}
    extra = {d.id: d for label in sorted(set(rare) - covered) for d in rare[label]}
    kept += [extra[k] for k in sorted(extra)]
    info = {"dialogues_in_file": seen, "dialogues_used": len(kept), "added_for_rare_agents": len(extra),
            "turns_in_file": turns,
            "labelled_turns_in_file": labelled, "labels": dict(labels.most_common()),
            "unknown_labels_skipped": dict(missing.most_common(20)), "languages": dict(languages.most_common())}
    return kept, info


def _reservoir(items: list[_Dialogue], item: _Dialogue, seen: int, size: int, rng: random.Random) -> None:
    """Reservoir sampling (Vitter's algorithm R), seeded: the same file gives the same sample."""
    if len(items) < size:
        items.append(item)
    else:
        j = rng.randrange(seen)
        if j < size:
            items[j] = item


def _fold(dialogue_id: str, folds: int) -> int:
    return int(hashlib.md5(dialogue_id.encode("utf-8")).hexdigest()[:8], 16) % folds


# ------------------------------------------------------------------------------------ recording
def _record(router: AgentRouter, agents: Sequence[Agent], dialogues: Sequence[_Dialogue],
            progress: Callable[[Iterable[Any]], Iterable[Any]],
            recorder: type[_Recorder] | None = None) -> tuple[list[list[_Obs]], float]:
    """What the policy was given on each user turn of ``dialogues``; ``recorder``: a :class:`_Recorder` subclass
    that keeps more of each turn (``benchmarks/route_ceiling.py`` keeps the strategies' parts)."""
    from memroute.memory import Memory

    memory = Memory.open("sqlite://:memory:", owner="fit", embedder=router.embedder)
    try:
        rec = (recorder or _Recorder)(memory, agents, router=router, use_memories=False, candidates=1)
        out = []
        for dialogue in progress(dialogues):
            session = f"fit-{dialogue.id}"
            obs: list[_Obs] = []
            last: F32 | None = None
            for turn in dialogue.turns:
                if turn.system is not None:
                    memory.add_message(session, "assistant", turn.system)
                before = len(rec.trace)
                if turn.text.strip():
                    rec.route(turn.text, session)
                if len(rec.trace) > before:
                    scores, allowed, feats, evidence, after = rec.trace[-1]
                    delta = None if evidence is None or last is None else (evidence - last).astype(np.float32)
                    obs.append(_Obs(scores, allowed, feats, delta, turn.gold, turn.oos))
                    last = after
                else:
                    obs.append(_Obs(None, None, None, None, turn.gold, turn.oos))
            rec.trace.clear()
            out.append(obs)
        return out, rec.floor
    finally:
        memory.close()


def replay(params: PolicyParams | Callable[[TurnFeatures], PolicyParams], dialogues: Sequence[Sequence[_Obs]],
           index: dict[str, int], floor: float, assistant_weight: float = 1.0) -> tuple[float, float]:
    """(all, switch_new) of the recorded turns replayed under ``params`` exactly as the router steps."""
    right, total, sw_right, sw_total = replay_counts(params, dialogues, index, floor, assistant_weight)
    return right / max(total, 1), sw_right / max(sw_total, 1)


def replay_counts(params: PolicyParams | Callable[[TurnFeatures], PolicyParams],
                  dialogues: Sequence[Sequence[_Obs]], index: dict[str, int], floor: float,
                  assistant_weight: float = 1.0, marks: list[bool] | None = None,
                  reset_at_switches: bool = False) -> tuple[int, int, int, int]:
    """:func:`replay`'s counts: (right, scored turns, right switch_new turns, switch_new turns). ``params`` may
    also be a function of a turn's features (a rule per kind of message, e.g. one for Japanese and Korean).
    ``marks``, when given, gets each scored turn's rightness in order. ``reset_at_switches`` replays as
    ``memroute eval route --oracle-switches`` does (with :func:`~memroute.routing.policy.told_switches`'
    parameters): the task is dropped exactly where the gold changes, so that turn is routed on its own scores."""
    rule = params if callable(params) else (lambda _: params)
    right = total = sw_right = sw_total = 0
    for obs in dialogues:
        current: int | None = None
        evidence: F32 | None = None
        prev: frozenset[str] | None = None
        for o in obs:
            if reset_at_switches and o.gold and prev is not None and o.gold - prev:
                current, evidence = None, None
            if o.scores is not None:
                if evidence is not None and o.delta is not None:
                    evidence = (evidence + o.delta * np.float32(assistant_weight)).astype(np.float32)
                step = user_step(rule(o.features), o.scores, o.allowed, current,  # type: ignore[arg-type]
                                 evidence, o.features, floor)  # type: ignore[arg-type]
                current, evidence = step.current, step.evidence
            if not o.gold:
                continue
            pred = current if current is not None else -1
            ok = any(index.get(g) == pred for g in o.gold)
            if marks is not None:
                marks.append(ok)
            right += ok
            total += 1
            if prev is not None and o.gold - prev:
                sw_total += 1
                sw_right += any(index.get(g) == pred for g in o.gold - prev)
            prev = o.gold
    return right, total, sw_right, sw_total


# ------------------------------------------------------------------------------------ (b) the rule
_RULE = ("lead", "standout", "length", "request", "also", "another", "assistant_done", "switch", "question",
         "follow_up", "bias")


def _rule_rows(params: PolicyParams, dialogues: Sequence[Sequence[_Obs]], index: dict[str, int],
               floor: float) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The rule's features (:data:`_RULE`) and labels of every teacher-forced decision."""
    decided = list(teacher_forced(dialogues, index))
    xs = [rule_features(params, o, b, c, floor) for o, b, c, _ in decided]
    return (np.array(xs, dtype=np.float64).reshape(-1, len(_RULE)),
            np.array([y for *_, y in decided], dtype=np.float64))


def teacher_forced(dialogues: Sequence[Sequence[_Obs]],
                   index: dict[str, int]) -> Iterator[tuple[_Obs, int, int, float]]:
    """Teacher-forced switch decisions ``(turn, challenger, current, label)``: the current agent is the previous
    labelled turn's, the challenger the best other agent on the turn's own text; 1 when switching to it is
    right, 0 when staying is."""
    for obs in dialogues:
        prev: frozenset[str] | None = None
        for o in obs:
            if o.scores is not None and o.gold and prev and not o.features.cues.closing:  # type: ignore[union-attr]
                cur = sorted(prev & o.gold) or sorted(prev)
                c = index[cur[0]]
                b = int(np.argmax(np.where(o.allowed, o.scores, -np.inf)))  # type: ignore[arg-type]
                gold = {index[g] for g in o.gold}
                new = {index[g] for g in o.gold - prev}
                if b != c and o.allowed[c]:  # type: ignore[index]
                    y = 1.0 if b in new or (b in gold and c not in gold) else 0.0 if c in gold else None
                    if y is not None:
                        yield o, b, c, y
            if o.gold:
                prev = o.gold


def rule_features(params: PolicyParams, o: _Obs, b: int, c: int, floor: float) -> list[float]:
    """One decision's row of :data:`_RULE` (challenger ``b`` against current agent ``c``; the last is the bias's 1)."""
    assert o.scores is not None and o.features is not None
    f, cues = o.features, o.features.cues
    z = normalised(o.scores, floor)
    return [float(o.scores[b] - o.scores[c]) / floor, float(z[b]), math.log1p(min(f.words, params.length_cap)),
            float(cues.request), float(cues.also), float(cues.another), float(cues.assistant_done),
            float(cues.switch), float(f.question), float(f.follow_up), 1.0]


def _fit_rule(base: PolicyParams, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> tuple[PolicyParams, str]:
    """MAP logistic regression of the switch rule with a Gaussian prior centred on ``base``'s weights."""
    if int(y.sum()) < MIN_RULE_TURNS or int((1 - y).sum()) < MIN_RULE_TURNS:
        return base, (f"kept the zero-shot weights: {int(y.sum())} switch and {int((1 - y).sum())} stay "
                      f"decisions to learn from (at least {MIN_RULE_TURNS} of each are needed)")
    w0 = np.array([getattr(base, name) for name in _RULE], dtype=np.float64)
    w = map_logistic(x, y, w0, PRIOR)
    if not np.all(np.isfinite(w)) or w[0] <= 0.05:
        return base, "kept the zero-shot weights: the fitted lead weight was not positive"
    weights: dict[str, Any] = {name: round(float(v), 4) for name, v in zip(_RULE, w, strict=True)}
    return replace(base, **weights), (
        f"fitted on {len(y)} decisions ({int(y.sum())} switches)")


def map_logistic(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], w0: np.ndarray[Any, Any],
                 prior: float | np.ndarray[Any, Any],
                 weight: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
    """MAP logistic regression of ``y`` on ``x`` with a Gaussian prior centred on ``w0`` (precision ``prior``, one
    for all weights or one per weight) and optional per-row weights, by Newton's method with backtracking."""
    sw = np.ones(len(y)) if weight is None else weight
    precision = np.broadcast_to(np.asarray(prior, dtype=np.float64), w0.shape)

    def loss(w: np.ndarray[Any, Any]) -> float:
        z = x @ w
        return float(np.sum(sw * (np.logaddexp(0.0, z) - y * z)) + 0.5 * np.sum(precision * (w - w0) ** 2))

    def derivatives(w: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -40, 40)))
        grad = x.T @ (sw * (p - y)) + precision * (w - w0)
        return grad, (x * (sw * p * (1 - p))[:, None]).T @ x + np.diag(precision)

    return newton(loss, derivatives, w0, 100, 1e-8)  # the log-posterior is convex


def newton(loss: Callable[[np.ndarray[Any, Any]], float],
           derivatives: Callable[[np.ndarray[Any, Any]], tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]],
           w0: np.ndarray[Any, Any], iterations: int, tolerance: float) -> np.ndarray[Any, Any]:
    """Minimise a convex ``loss`` from ``w0`` by Newton's method with backtracking (``derivatives``: gradient and
    Hessian), until a step moves no weight by more than ``tolerance``."""
    w = w0.copy()
    for _ in range(iterations):
        grad, hess = derivatives(w)
        step = np.linalg.solve(hess, grad)
        before, t = loss(w), 1.0
        while loss(w - t * step) > before and t > 1e-6:
            t /= 2
        w -= t * step
        if float(np.abs(t * step).max()) < tolerance:
            break
    return w


_GRID: dict[str, tuple[float, ...]] = {
    "bias": (-3.0, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0),  # offsets from the fitted intercept
    "drift": (-6.0, -5.0, -4.0, -3.0, -2.5, -2.0),
    "revise_lead": (0.0, 0.1, 0.25, 0.5, 1.0),
    "assistant_weight": (0.0, 0.5, 1.0, 1.5),
}


def _tune(params: PolicyParams, obs: Sequence[Sequence[_Obs]], index: dict[str, int],
          floor: float) -> tuple[PolicyParams, dict[str, Any]]:
    """Coordinate ascent of the replayed accuracy over :data:`_GRID` (two rounds; the current value wins ties)."""
    def score(p: PolicyParams) -> float:
        return replay(p, obs, index, floor, p.assistant_weight)[0]

    best = score(params)
    start = best
    for _ in range(2):
        for name, grid in _GRID.items():
            base = getattr(params, name)
            for value in grid:
                change: dict[str, Any] = {name: round(base + value if name == "bias" else value, 4)}
                candidate = replace(params, **change)
                if getattr(candidate, name) == getattr(params, name):
                    continue
                s = score(candidate)
                if s > best + 1e-9:
                    params, best = candidate, s
    return params, {"replayed_all_before_tuning": round(start, 4), "replayed_all": round(best, 4)}


# ------------------------------------------------------------------------------------ (c) thresholds
def _calibrate(obs: Sequence[Sequence[_Obs]], ids: Sequence[str], floor: float) -> tuple[Calibration, str]:
    outcomes = []
    for dialogue in obs:
        for o in dialogue:
            if o.scores is None or o.allowed is None or not (o.gold or o.oos):
                continue
            allowed = np.flatnonzero(o.allowed)
            if allowed.size == 0:
                continue
            order = allowed[np.argsort(-o.scores[allowed], kind="stable")]
            f = features(o.scores[order], 0, 1 if order.size > 1 else None)
            outcomes.append(FitExample(f, ids[int(order[0])], ids[int(order[0])] in o.gold, not o.oos))
    if len(outcomes) < 10:
        return Calibration(), f"kept the default calibration: {len(outcomes)} labelled turns (10 needed)"
    report = fit_calibration(outcomes)
    if all(o.in_scope for o in outcomes):  # nothing says what should get no route: route everything
        return replace(report.calibration, threshold=0.0, agent_thresholds={}), (
            f"confidence fitted on {report.examples} turns; threshold 0 (no turn is labelled oos)")
    return report.calibration, f"fitted on {report.examples} turns (threshold {report.calibration.threshold})"


# ------------------------------------------------------------------------------------ the fit
def fit_dialogues(path: str | Path, agents: Sequence[Agent], router: AgentRouter | None = None, *,
                  examples_per_agent: int = 100, max_dialogues: int = 5000, folds: int = FOLDS,
                  unknown: Literal["error", "skip"] = "error", show_progress: bool = False) -> FittedRouting:
    """Fit examples, the switch rule and thresholds on the labelled dialogues at ``path`` (module docstring)."""
    from tqdm import tqdm

    started = time.perf_counter()
    router = router or AgentRouter()
    agents = tuple(agents)
    if not agents:
        raise InputError("fit needs a catalogue with at least one agent")
    if examples_per_agent < 1 or max_dialogues < 1:
        raise InputError("examples_per_agent and max_dialogues must be at least 1")
    ids = [a.id for a in agents]
    index = {a: i for i, a in enumerate(ids)}

    def progress(desc: str, total: int | None = None) -> Callable[[Iterable[Any]], Iterable[Any]]:
        return lambda items: tqdm(items, desc=desc, total=total, disable=not show_progress, unit="dialogue")

    dialogues, info = _read(path, set(ids), unknown, max_dialogues, progress("reading"))
    # Candidates for examples: single-label turns with text (their vectors are the router's own).
    cand = [(d.id, t.text, next(iter(t.gold))) for d in dialogues for t in d.turns
            if len(t.gold) == 1 and t.text.strip()]
    vectors = _embed(router, [c[1] for c in cand], show_progress)
    fold_of = [_fold(c[0], folds) for c in cand]
    recorded: list[list[_Obs]] = []
    order: list[_Dialogue] = []
    floor = 0.01
    for fold in range(folds):
        held = [d for d in dialogues if _fold(d.id, folds) == fold]
        if not held:
            continue
        order += held
        rows = [i for i, f in enumerate(fold_of) if f != fold]
        fold_examples = (select_examples(vectors[rows], [cand[i][2] for i in rows], [cand[i][1] for i in rows],
                                         examples_per_agent) if rows else {})
        fold_agents = _with_examples(agents, fold_examples)
        obs, floor = _record(router, fold_agents, held, progress(f"replaying fold {fold + 1}/{folds}", len(held)))
        recorded.extend(obs)
    examples = select_examples(vectors, [c[2] for c in cand], [c[1] for c in cand], examples_per_agent)
    labels_seen = {c[2] for c in cand}
    base = PolicyParams()
    zero_shot = replay(base, recorded, index, floor)
    x, y = _rule_rows(base, recorded, index, floor)
    policy, rule_note = _fit_rule(base, x, y)
    refit = replay(policy, recorded, index, floor)[0]
    if refit < zero_shot[0]:  # the replay judges the rule, turns inherited from earlier decisions included
        policy, rule_note = base, (f"kept the zero-shot weights: the fitted rule replayed worse ({refit:.4f} < "
                                   f"{zero_shot[0]:.4f}); {rule_note}")
    policy, tuned = _tune(policy, recorded, index, floor)
    fitted_scores = replay(policy, recorded, index, floor, policy.assistant_weight)
    # The fit must beat zero-shot routing on the same training dialogues (examples can also hurt: on 50 SGD
    # dialogues they did), else it says so and keeps zero-shot routing.
    check = order[:ZERO_SHOT_CHECK]
    zero_obs, zero_floor = _record(router, agents, check, progress("replaying zero-shot", len(check)))
    zero_system = replay(base, zero_obs, index, zero_floor)
    fitted_check = replay(policy, recorded[:len(check)], index, floor, policy.assistant_weight)
    verdict = (f"on {len(check)} training dialogues the fit replays all {fitted_check[0]:.4f}, zero-shot "
               f"routing {zero_system[0]:.4f}")
    if fitted_check[0] <= zero_system[0]:
        examples, policy = {}, base
        verdict += ": not better, so this fit keeps zero-shot routing (no examples, the zero-shot rule)"
    calibration, cal_note = _calibrate(recorded, ids, floor)
    how = {**info, "folds": folds, "examples_per_agent": examples_per_agent,
           "examples": {"agents": len(examples), "total": sum(len(v) for v in examples.values()),
                        "note": "" if examples else "no examples: fewer than two agents are labelled"
                        if len(labels_seen) < 2 else "no examples: see against_zero_shot"},
           "rule": rule_note, "calibration": cal_note, **tuned, "against_zero_shot": verdict,
           "replayed_training_turns": {"zero_shot_policy": {"all": round(zero_shot[0], 4),
                                                            "switch_new": round(zero_shot[1], 4)},
                                       "fitted": {"all": round(fitted_scores[0], 4),
                                                  "switch_new": round(fitted_scores[1], 4)},
                                       "note": "cross-fitted examples (a turn never sees itself)"},
           "bank": router_bank(router),
           "seconds": round(time.perf_counter() - started, 1), "created": datetime.now(UTC).isoformat()}
    return FittedRouting(tuple(ids), catalogue_hash(agents), encoder_name(router.embedder), examples, policy,
                         calibration, how)


def _with_examples(agents: Sequence[Agent], examples: dict[str, tuple[str, ...]]) -> tuple[Agent, ...]:
    return FittedRouting((), "", "", examples, PolicyParams(), Calibration()).apply(agents)


def _embed(router: AgentRouter, texts: Sequence[str], show_progress: bool) -> F32:
    from tqdm import tqdm

    from memroute.routing.composite import EMBED_CHARS

    if router.embedder is None:
        raise InputError("fitting from dialogues needs an encoder (the router has none)")
    dim = router.embedder.dimension
    out = np.zeros((len(texts), dim), dtype=np.float32)
    batch = 256
    for start in tqdm(range(0, len(texts), batch), desc="embedding turns", disable=not show_progress):
        chunk = [t[:EMBED_CHARS] for t in texts[start:start + batch]]
        out[start:start + len(chunk)] = router.embedder.embed(chunk, side="query")
    return out
