"""Gate the task revisions of Japanese and Korean messages (policy step 3), chosen on the TRAIN sets.

A turn that stays may revise the task to the evidence's best agent (``PolicyParams.revise_lead``). On the ko / ja
train sets such revisions of ja/ko turns were more often wrong than right, most of all on bare answers. Three
gates, read only for messages with ``TurnFeatures.ja_ko`` (English is stepped exactly as before):

- ``ja_ko_revise_words``: a message with fewer content words never revises;
- ``ja_ko_revise_rank``: the revised-to agent must be among the message's own k best;
- ``ja_ko_revise_lead``: a larger lead for the revision.

Recordings (``benchmarks.tune_ja_ko_rule.record``, bank 0.25) are cached in ``--cache``; the replay steps
``policy.user_step`` itself, so a gate in the package is what is replayed.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.revise_gate select [--jmultiwoz 250]
    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.revise_gate final --words 1 --rank 0 --lead 0 [--dev] [--test]

``select`` reads only the train splits (ko, ja, and N JMultiWOZ-TC train dialogues): the mean ``all`` of the
sets for every gate setting, with even / odd dialogue halves and the revisions each setting leaves (right / wrong
afterwards). ``final`` replays the chosen setting against the default on dev / test, once.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.fit_ja_ko_rule import recorded
from benchmarks.tune_ja_ko_rule import ja_ko_sets

GRID = {"ja_ko_revise_words": (0, 1, 2), "ja_ko_revise_rank": (0, 1, 2, 3),
        "ja_ko_revise_lead": (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 1e9)}


def revisions(params: Any, rec: dict[str, Any]) -> tuple[int, int]:
    """(right, wrong): ja/ko turns whose step revised the task, by whether the revised-to agent is gold."""
    from memroute.routing.policy import user_step

    right = wrong = 0
    for obs in rec["obs"]:
        current = evidence = None
        for o in obs:
            if o.scores is None:
                continue
            if evidence is not None and o.delta is not None:
                evidence = (evidence + o.delta).astype(np.float32)
            step = user_step(params, o.scores, o.allowed, current, evidence, o.features, rec["floor"])
            current, evidence = step.current, step.evidence
            if step.action == "revised" and o.features.ja_ko and o.gold:
                ok = any(rec["index"].get(g) == current for g in o.gold)
                right += ok
                wrong += not ok
    return right, wrong


def figures(params: Any, rec: dict[str, Any], half: int | None = None) -> tuple[float, float, int, int]:
    """(all, switch_new, right, scored turns) of the replay (``half``: even / odd dialogues only)."""
    from memroute.routing.training import replay_counts

    obs = rec["obs"] if half is None else rec["obs"][half::2]
    right, total, sw_right, sw_total = replay_counts(params, obs, rec["index"], rec["floor"])
    return right / max(total, 1), sw_right / max(sw_total, 1), right, total


def load(split: str, jmultiwoz: int, cache: Path) -> dict[str, dict[str, Any]]:
    return {name: recorded(name, split, spec, cache) for name, spec in ja_ko_sets(split, jmultiwoz).items()}


def row(label: str, params: Any, recs: dict[str, dict[str, Any]], base: Any | None = None) -> float:
    figs = {n: figures(params, r) for n, r in recs.items()}
    mean = sum(f[0] for f in figs.values()) / len(figs)
    text = " ".join(f"{n} {f[0]:.4f}/{f[1]:.3f} ({f[3] - f[2]})" for n, f in figs.items())
    halves = ""
    if base is not None:
        halves = "  halves " + "; ".join(
            f"{n} " + " ".join(f"{figures(base, r, h)[0]:.3f}->{figures(params, r, h)[0]:.3f}" for h in (0, 1))
            for n, r in recs.items())
    revs = " ".join(f"{n} {'/'.join(map(str, revisions(params, r)))}" for n, r in recs.items())
    print(f"{label:<28} mean {mean:.4f}  {text}  revisions r/w {revs}{halves}", flush=True)
    return mean


def select(args: argparse.Namespace) -> None:
    from memroute.routing.policy import PolicyParams

    recs = load("train", args.jmultiwoz, args.cache)
    base = PolicyParams()
    row("default", base, recs)
    results = []
    for values in itertools.product(*GRID.values()):
        params = replace(base, **dict(zip(GRID, values, strict=True)))
        figs = [figures(params, r)[0] for r in recs.values()]
        results.append((sum(figs) / len(figs), values, params))
    print("each gate alone:")
    for key, values in GRID.items():
        for v in values[1:]:
            row(f"  {key} {v}", replace(base, **{key: v}), recs, base)
    print(f"best {args.top} by the mean of all ({', '.join(GRID)}):")
    results.sort(key=lambda r: -r[0])
    for _, values, params in results[:args.top]:
        row(f"  {values}", params, recs, base)


def final(args: argparse.Namespace) -> None:
    from memroute.routing.policy import PolicyParams

    base = PolicyParams()
    chosen = replace(base, ja_ko_revise_words=args.words, ja_ko_revise_rank=args.rank, ja_ko_revise_lead=args.lead)
    for split in [s for s in ("train", "dev", "test") if getattr(args, s)]:
        recs = load(split, args.jmultiwoz if split == "train" else 0, args.cache)
        if split == "test":
            recs.pop("jmultiwoz_tc", None)
        print(f"{split}:")
        row("  default", base, recs)
        row("  chosen", chosen, recs, base)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("select", "final"):
        p = sub.add_parser(name)
        p.add_argument("--jmultiwoz", type=int, default=250, help="JMultiWOZ-TC train dialogues in the train pool")
        p.add_argument("--cache", type=Path, default=Path("/tmp/revise_gate"))
    sub.choices["select"].add_argument("--top", type=int, default=10)
    fin = sub.choices["final"]
    fin.add_argument("--words", type=int, default=0)
    fin.add_argument("--rank", type=int, default=0)
    fin.add_argument("--lead", type=float, default=0.0)
    for split in ("train", "dev", "test"):
        fin.add_argument(f"--{split}", action="store_true")
    args = parser.parse_args(argv)
    select(args) if args.command == "select" else final(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
