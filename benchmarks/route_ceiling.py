"""How far can the per-turn evidence the router already computes take a Japanese or Korean start turn?

A "start" is a scored turn that is a dialogue's first or a gold switch (its gold is not the previous labelled
turn's): the policy routes it on the turn's own scores. This records, for every user turn of a set, what the policy
step was given (:func:`memroute.routing.training._record`, as ``benchmarks.tune_ja_ko_rule.record``) and beside it
the per-agent components of the message's score: each strategy's part (``ScoredQuery.parts``, the frame blend
included), ``total``, and the embedding strategy's internals on the message and on its frame
(``similarities``' piece score, the ``_by_name`` and ``_by_bank`` terms, the best piece read by use-m3's part and by
e5's part alone, the description's cosine, the frame's embedding score). A conditional-logit combiner (one weight
per feature, shared by every agent, so it carries to any catalogue; features: each component raw, centred and
z-scored within the message, and an indicator of its arg-max) is fitted by Newton's method.

(a) ``--insample``: fitted on a set's own start turns (ko / ja dev and train; JMultiWOZ-TC dev beside them) and
read on the same turns: its top-1 against ``total``'s, the bound all <= (stay turns + start turns x top-1) / scored
turns (every stay counted right), the same with the stays today's policy gets right, and where gold ranks.

(b) ``--train``: fitted on the ko + ja TRAIN sets (their own catalogue) and 250 JMultiWOZ-TC train dialogues; held-out
checks within train (even / odd dialogues; each set left out in turn); then own-text top-1 on dev starts (ko, ja,
JMultiWOZ-TC dev) and, with ``--replay``, whole dev replayed through the policy with the combiner's scores in place
of the recorded ones on Japanese and Korean turns, each message's scores brought back to the recorded scores' own
mean and spread (route7: the rule is fitted to that scale).

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.route_ceiling --insample
    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.route_ceiling --train [--replay]
    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.route_ceiling --two-oracles [--test]

``--two-oracles``: both ceilings at once. Every switch known (the session reset exactly at gold switches and never
switched elsewhere, as ``memroute eval route --oracle-switches``; this replay of the recordings equals that command
to the turn) and every start routed to the in-sample combiner's choice (its best l2): what the router's evidence
allows if both the switch decision and the per-turn combination were perfect for the set being scored.

Recordings are cached under /tmp/route_ceiling (one pickle a set; delete them after a routing change).
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.tune_ja_ko_rule import ja_ko_sets

CACHE = Path("/tmp/route_ceiling")
L2 = (0.001, 0.01, 0.1, 1.0)


# ------------------------------------------------------------------------------------ recording
def _components(router: Any, scored: Any) -> dict[str, np.ndarray]:
    """The per-agent components of one message's score (float32 arrays, one per name)."""
    from memroute.routing.strategies import EmbeddingStrategy, _best_pieces

    out = {f"part_{name}": np.asarray(v, np.float32) for name, v in scored.parts.items()}
    out["total"] = np.asarray(scored.total, np.float32)
    index, query = scored.index, scored.query
    emb = next(s for s in router.strategies if isinstance(s, EmbeddingStrategy))
    piece, example = emb.similarities(query, index)
    zero = np.zeros(index.n, np.float32)
    name = bank = use = strong = desc = zero
    if query.vector is not None and index.has_vectors and index.piece_matrix.shape[0]:
        v = query.vector
        name = zero + emb._by_name(v, index)
        bank = zero + emb._by_bank(v, index)
        split = index.strong_from
        if split is not None and index.reads_strong(v):
            use = _best_pieces(index.piece_matrix[:, :split] @ v[:split], index, emb.top_pieces)
            strong = _best_pieces(index.piece_matrix[:, split:] @ v[split:], index, emb.top_pieces)
        desc = (index.piece_matrix[index.piece_starts] @ v).astype(np.float32)
    out.update(piece=piece, piece_plain=piece - name - bank, by_name=name, by_bank=bank, use_m3=use, e5=strong,
               description=desc, example=np.maximum(example, -1.0))
    frame = query.frame
    out["frame_embedding"] = (emb.scores(frame, index) if frame is not None and query.frame_weight > 0
                              else emb.scores(query, index)).astype(np.float32)
    return out


def record(name: str, data: Path, candidates: Path, sample: int | None) -> dict[str, Any]:
    """The set's recorded turns (``tune_ja_ko_rule.record``'s) and each scored turn's components."""
    path = CACHE / f"{name}_{sample or 'all'}.pkl"
    if path.exists():
        out: dict[str, Any] = pickle.loads(path.read_bytes())  # our own cache
        return out
    from memroute.eval.datasets import load_candidates
    from memroute.eval.route_eval import spread_sample
    from memroute.routing import training
    from memroute.routing.composite import AgentRouter

    agents = load_candidates(candidates, "train")
    router = AgentRouter()
    parts: list[dict[str, np.ndarray]] = []
    first: list[Any] = []
    score = router.score

    def first_score(query: Any, index: Any) -> Any:  # the message's own scoring comes first in a route
        scored = score(query, index)
        if not first:
            first.append(scored)
        return scored

    router.score = first_score  # type: ignore[method-assign,assignment]

    class Recorder(training._Recorder):
        def route(self, text: str, session: str, **kwargs: Any) -> Any:
            first.clear()
            return super().route(text, session, **kwargs)

        def _step(self, *args: Any) -> Any:
            parts.append(_components(router, first[0]))
            return super()._step(*args)

    ids = [a.id for a in agents]
    dialogues, _ = training._read(data, set(ids), "skip", 10**6, lambda items: items)
    if sample is not None:
        dialogues = spread_sample(dialogues, sample)
    obs, floor = training._record(router, agents, dialogues, lambda items: items, recorder=Recorder)
    it = iter(parts)
    comps = [[next(it) if o.scores is not None else None for o in d] for d in obs]
    rec = {"obs": obs, "floor": floor, "index": {a: i for i, a in enumerate(ids)}, "parts": comps}
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(rec))
    return rec


# ------------------------------------------------------------------------------------ turns and features
def turns(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every scored (labelled) turn: dialogue number, start or stay, gold positions, policy scores, components."""
    out = []
    for d, (obs, comps) in enumerate(zip(rec["obs"], rec["parts"], strict=True)):
        prev: frozenset[str] | None = None
        for o, c in zip(obs, comps, strict=True):
            if not o.gold:
                continue
            start = prev is None or bool(o.gold - prev)
            gold = [rec["index"][g] for g in (o.gold - prev if prev else o.gold) if g in rec["index"]]
            out.append({"dialogue": d, "start": start, "switch": prev is not None and start, "gold": gold,
                        "scores": o.scores, "allowed": o.allowed, "parts": c})
            prev = o.gold
    return out


def features(parts: dict[str, np.ndarray], scores: np.ndarray) -> np.ndarray:
    """(agents, features): each component raw, centred, z-scored within the message, and its arg-max."""
    cols = []
    for v in [*(parts[k] for k in sorted(parts)), np.asarray(scores, np.float32)]:
        v = v.astype(np.float64)
        c = v - v.mean()
        sd = v.std()
        cols += [v, c, c / sd if sd > 1e-9 else np.zeros_like(c), (v >= v.max() - 1e-9) & (sd > 1e-9)]
    return np.stack(cols, axis=1).astype(np.float64)


def design(ts: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Padded (turns, agents, features), the agent mask, the gold target (uniform over gold agents)."""
    a = max(len(t["scores"]) for t in ts)
    x0 = features(ts[0]["parts"], ts[0]["scores"])
    x = np.zeros((len(ts), a, x0.shape[1]))
    mask = np.zeros((len(ts), a), bool)
    y = np.zeros((len(ts), a))
    for i, t in enumerate(ts):
        n = len(t["scores"])
        x[i, :n] = features(t["parts"], t["scores"])
        mask[i, :n] = t["allowed"]
        for g in t["gold"]:
            y[i, g] = 1.0 / len(t["gold"])
    return x, mask, y


class Combiner:
    """Conditional logit over the agents of a message, weights shared by every agent; features standardised on
    the fitting turns."""

    def __init__(self, l2: float) -> None:
        self.l2 = l2

    def fit(self, x: np.ndarray, mask: np.ndarray, y: np.ndarray) -> Combiner:
        from memroute.routing.training import newton

        flat = x[mask]
        self.mu, self.sd = flat.mean(0), flat.std(0) + 1e-9
        z = (x - self.mu) / self.sd * mask[..., None]
        n = len(x)

        def probs(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            u = np.where(mask, z @ w, -np.inf)
            u -= u.max(1, keepdims=True)
            p = np.exp(u)
            return p / p.sum(1, keepdims=True), u

        def loss(w: np.ndarray) -> float:
            p, _ = probs(w)
            return float(-(y * np.log(np.where(mask, p, 1.0) + 1e-300)).sum() / n + 0.5 * self.l2 * w @ w)

        def derivatives(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            p, _ = probs(w)
            zp = np.einsum("taf,ta->tf", z, p)
            return (np.einsum("taf,ta->f", z, p - y) / n + self.l2 * w,
                    (np.einsum("taf,ta,tag->fg", z, p, z) - zp.T @ zp) / n + self.l2 * np.eye(len(w)))

        self.w = newton(loss, derivatives, np.zeros(x.shape[2]), 50, 1e-7)
        return self

    def utility(self, x: np.ndarray) -> np.ndarray:
        out: np.ndarray = ((x - self.mu) / self.sd) @ self.w
        return out


def top1(u: np.ndarray, mask: np.ndarray, y: np.ndarray) -> float:
    """Share of turns whose best allowed agent is a gold one (ties: the first, as argmax)."""
    best = np.where(mask, u, -np.inf).argmax(1)
    return float((y[np.arange(len(y)), best] > 0).mean())


def total_top1(ts: list[dict[str, Any]]) -> float:
    return float(np.mean([np.where(t["allowed"], t["scores"], -np.inf).argmax() in t["gold"] for t in ts]))


def starts(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in turns(rec) if t["start"] and t["scores"] is not None]


# ------------------------------------------------------------------------------------ (a) and (b)
def policy_marks(rec: dict[str, Any], obs: list[list[Any]] | None = None) -> list[bool]:
    """Each scored turn right or wrong under today's rule (``obs``: replaced recordings)."""
    from memroute.routing.policy import PolicyParams
    from memroute.routing.training import replay_counts

    marks: list[bool] = []
    replay_counts(PolicyParams(), rec["obs"] if obs is None else obs, rec["index"], rec["floor"], marks=marks)
    return marks


def insample(recs: dict[str, dict[str, Any]]) -> None:
    print("set | scored | starts | stays | policy right: all / stays / starts | total top-1 on starts | in-sample "
          "top-1 (l2 " + " / ".join(map(str, L2)) + ") | bound on all (today's total) | stays as today, starts at "
          "the best in-sample top-1")
    for name, rec in recs.items():
        ts = turns(rec)
        marks = policy_marks(rec)
        st = [t for t in ts if t["start"] and t["scores"] is not None]
        n_start = sum(t["start"] for t in ts)
        stays = len(ts) - n_start
        stay_right = sum(m for m, t in zip(marks, ts, strict=True) if not t["start"])
        start_right = sum(m for m, t in zip(marks, ts, strict=True) if t["start"])
        x, mask, y = design(st)
        fits = [top1(Combiner(l2).fit(x, mask, y).utility(x), mask, y) for l2 in L2]
        right = max(fits) * len(st)  # a start without scores is counted wrong
        print(f"{name} | {len(ts)} | {n_start} | {stays} | {sum(marks) / len(ts):.4f} / {stay_right / stays:.4f} / "
              f"{start_right / n_start:.4f} | {total_top1(st):.4f} | " + " / ".join(f"{f:.4f}" for f in fits)
              + f" | {(stays + right) / len(ts):.4f} ({(stays + total_top1(st) * len(st)) / len(ts):.4f}) | "
              f"{(stay_right + right) / len(ts):.4f} | features {x.shape[2]}")
        ranks = [_gold_rank(t) for t in st]
        oracle = np.mean([any(np.ptp(v) > 0 and v.argmax() in t["gold"] for v in t["parts"].values()) for t in st])
        print(f"  {name} starts: gold's rank in the policy's scores 1 / 2 / 3 / 4+: "
              + " / ".join(str(sum(min(r, 4) == k for r in ranks)) for k in (1, 2, 3, 4))
              + f"; some component's arg-max is gold (an oracle choosing the component per turn): {oracle:.4f}")
        for kind, keep in (("first turns", lambda t: not t["switch"]), ("switches", lambda t: t["switch"])):
            pairs = [(m, t) for m, t in zip(marks, ts, strict=True) if t["start"] and keep(t)]
            own = [t["scores"] is not None and _gold_rank(t) == 1 for _, t in pairs]
            print(f"  {name} {kind}: {len(pairs)}, own text right {sum(own)}, policy right {sum(m for m, _ in pairs)}"
                  f", own text right but policy wrong {sum(o and not m for o, (m, _) in zip(own, pairs, strict=True))}")


def _gold_rank(t: dict[str, Any]) -> int:
    order = list(np.argsort(-np.where(t["allowed"], t["scores"], -np.inf), kind="stable"))
    return min((order.index(g) + 1 for g in t["gold"]), default=99)


def _fit_on(groups: list[list[dict[str, Any]]], l2: float) -> Combiner:
    a = max(len(t["scores"]) for g in groups for t in g)
    parts = [design(g) for g in groups]
    pad = [(np.pad(x, ((0, 0), (0, a - x.shape[1]), (0, 0))), np.pad(m, ((0, 0), (0, a - m.shape[1]))),
            np.pad(y, ((0, 0), (0, a - y.shape[1])))) for x, m, y in parts]
    return Combiner(l2).fit(*(np.concatenate(v) for v in zip(*pad, strict=True)))


def _read(c: Combiner, ts: list[dict[str, Any]]) -> tuple[float, float]:
    x, mask, y = design(ts)
    return total_top1(ts), top1(c.utility(x), mask, y)


def train(train_recs: dict[str, dict[str, Any]], dev_recs: dict[str, dict[str, Any]], l2s: tuple[float, ...],
          replay_dev: bool) -> None:
    st = {n: starts(r) for n, r in train_recs.items()}
    for l2 in l2s:
        print(f"l2 {l2}: held-out starts, total top-1 -> combiner top-1")
        for half in (0, 1):
            c = _fit_on([[t for t in g if t["dialogue"] % 2 == half] for g in st.values()], l2)
            print(f"  fitted on {'even' if half == 0 else 'odd'} halves, read on the other: " + ", ".join(
                "{} {:.4f} -> {:.4f}".format(n, *_read(c, [t for t in g if t["dialogue"] % 2 != half]))
                for n, g in st.items()))
        print("  each set left out: " + ", ".join("{} {:.4f} -> {:.4f}".format(
            n, *_read(_fit_on([g for m, g in st.items() if m != n], l2), st[n])) for n in st))
    l2 = l2s[0]
    c = _fit_on(list(st.values()), l2)
    print(f"dev starts, combiner fitted on all of train (l2 {l2}): " + ", ".join(
        "{} {:.4f} -> {:.4f}".format(n, *_read(c, starts(r))) for n, r in dev_recs.items()))
    if replay_dev:
        for w in (0.5, 1.0):
            print(f"dev replayed, combiner weight {w} (all / stay / switch_new): " + ", ".join(
                f"{n} {_replay(c, r, 0.0)} -> {_replay(c, r, w)}" for n, r in dev_recs.items()))
    print("train replayed with the same combiner, weight 1 (in sample): " + ", ".join(
        f"{n} {_replay(c, r, 0.0)} -> {_replay(c, r, 1.0)}" for n, r in train_recs.items()))


def _replay(c: Combiner, rec: dict[str, Any], weight: float) -> str:
    """Whole set replayed through the policy, Japanese and Korean turns' scores moved ``weight`` of the way to the
    combiner's utility brought to the recorded scores' own mean and spread: all / stay / switch_new."""
    from memroute.routing.training import _Obs

    obs = []
    for d, comps in zip(rec["obs"], rec["parts"], strict=True):
        out = []
        for o, p in zip(d, comps, strict=True):
            if weight > 0 and o.scores is not None and o.features is not None and o.features.ja_ko:
                s = o.scores.astype(np.float64)
                u = c.utility(features(p, o.scores))
                su = u.std()
                new = s.mean() + s.std() * (u - u.mean()) / su if su > 1e-9 else s
                o = _Obs(((1 - weight) * s + weight * new).astype(np.float32), o.allowed, o.features, o.delta,
                         o.gold, o.oos)
            out.append(o)
        obs.append(out)
    marks = policy_marks(rec, obs)
    ts = turns(rec)
    stay = [m for m, t in zip(marks, ts, strict=True) if not t["start"]]
    switch = [m for m, t in zip(marks, ts, strict=True) if t["start"] and t["switch"]]
    return f"{np.mean(marks):.4f} / {np.mean(stay):.4f} / {np.mean(switch):.4f}"


def oracle_marks(rec: dict[str, Any], obs: list[list[Any]]) -> list[bool]:
    """Each scored turn right or wrong with perfect switch detection, as ``memroute eval route
    --oracle-switches``: the session reset exactly where the gold task changes (that turn routed on its own
    scores), no switch anywhere else, no drift."""
    from memroute.routing.policy import PolicyParams, told_switches
    from memroute.routing.training import replay_counts

    marks: list[bool] = []
    replay_counts(told_switches(PolicyParams()), obs, rec["index"], rec["floor"], marks=marks,
                  reset_at_switches=True)
    return marks


def two_oracles(recs: dict[str, dict[str, Any]]) -> None:
    """Perfect switch detection and, on every start turn, the combiner fitted in sample on that set's starts
    (its best l2): the most both ceilings of (a) and ``--oracle-switches`` allow together."""
    from memroute.routing.training import _Obs

    print("set | oracle switches: all / stays / starts | + in-sample combiner on the starts: all / stays / starts")
    for name, rec in recs.items():
        st = starts(rec)
        x, mask, y = design(st)
        best = max((Combiner(l2).fit(x, mask, y) for l2 in L2), key=lambda c: top1(c.utility(x), mask, y))
        chosen = {id(t["scores"]): int(np.where(t["allowed"], u, -np.inf).argmax())
                  for t, u in zip(st, best.utility(x), strict=True)}
        obs = []
        for d in rec["obs"]:
            out, prev = [], None
            for o in d:
                start = o.gold and (prev is None or bool(o.gold - prev))
                if start and o.scores is not None and id(o.scores) in chosen:
                    s = o.scores.copy()
                    s[chosen[id(o.scores)]] = s.max() + s.std() + 1e-3  # the combiner's choice leads
                    o = _Obs(s, o.allowed, o.features, o.delta, o.gold, o.oos)
                out.append(o)
                prev = o.gold or prev
            obs.append(out)
        ts = turns(rec)
        cells = []
        for marks in (oracle_marks(rec, rec["obs"]), oracle_marks(rec, obs)):
            stay = [m for m, t in zip(marks, ts, strict=True) if not t["start"]]
            start = [m for m, t in zip(marks, ts, strict=True) if t["start"]]
            cells.append(f"{np.mean(marks):.4f} / {np.mean(stay):.4f} / {np.mean(start):.4f}")
        print(f"{name} | " + " | ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--insample", action="store_true", help="(a): in-sample fits on ko / ja dev and train")
    parser.add_argument("--train", action="store_true", help="(b): fitted on train, read on dev starts")
    parser.add_argument("--replay", action="store_true", help="with --train: replay whole dev with the combiner")
    parser.add_argument("--two-oracles", action="store_true",
                        help="perfect switches and the in-sample combiner on every start, together")
    parser.add_argument("--test", action="store_true", help="with --insample / --two-oracles: ko / ja test too")
    parser.add_argument("--l2", type=float, nargs="+", default=[0.1, 1.0])
    args = parser.parse_args(argv)
    train_sets = ja_ko_sets("train", 250)
    dev_sets = ja_ko_sets("dev")
    if args.insample or args.two_oracles:
        recs = {f"{n} {s}": record(f"{n}_{s}", *sets[n]) for s, sets in (("dev", dev_sets), ("train", train_sets))
                for n in ("ko", "ja")}
        recs["jmultiwoz_tc dev"] = record("jmultiwoz_tc_dev", *dev_sets["jmultiwoz_tc"])
        if args.test:  # read once for the record, never to choose
            test_sets = ja_ko_sets("test")
            recs |= {f"{n} test": record(f"{n}_test", *test_sets[n]) for n in ("ko", "ja")}
        if args.insample:
            insample(recs)
        if args.two_oracles:
            two_oracles(recs)
    if args.train:
        train({n: record(f"{n}_train", *v) for n, v in train_sets.items()},
              {n: record(f"{n}_dev", *v) for n, v in dev_sets.items()}, tuple(args.l2), args.replay)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
