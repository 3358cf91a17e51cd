"""Replay ja/ko turns with their leads rescaled by a label-free per-catalogue measure (``benchmarks.lead_scale``).

A Japanese or Korean turn's lead over the current agent is multiplied by ``min(cap, (ref / M) ** alpha)``, where
``M`` is the catalogue's bank-request lead (``lead_scale.bank_measure``, bank weight 0); English turns, and
everything but the switch test, are untouched (the replay scales the rule's ``lead`` weight, which is the same).
``sweep --split S`` multiplies every ja/ko lead of a split by one factor (labels read: a diagnostic of how far
each set is from its best unit, never a choice). ``select`` replays the TRAIN recordings (ko, ja train, 250
JMultiWOZ-TC train dialogues) over a grid of ``alpha`` / ``ref`` / ``cap``; ``final --alpha A --ref R [--cap C]
--split dev|test`` replays those splits once.

Result (docs/benchmarks.md, routing, the nineteenth pass): train chooses ``alpha`` 0 (today's unit); nothing
shipped.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.lead_scale_replay select [--cache DIR]
"""

from __future__ import annotations

import argparse
import itertools
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.fit_ja_ko_rule import replay, two_rules
from benchmarks.lead_scale import CATALOGUES, DEV, bank_measure

RECORDINGS = {"train": {"ko": "ko_train_all.pkl", "ja": "ja_train_all.pkl",
                        "jmultiwoz_tc": "jmultiwoz_tc_train_250.pkl"},
              "dev": {"ko": "ko_dev_all.pkl", "ja": "ja_dev_all.pkl", "jmultiwoz_tc": "jmultiwoz_tc_dev_all.pkl"},
              "test": {"ko": "ko_test_all.pkl", "ja": "ja_test_all.pkl"}}
CATALOGUE = {"train": {"ko": "ko_train", "ja": "ja_train", "jmultiwoz_tc": "jmultiwoz_tc"},
             "dev": {"ko": "ko_dev", "ja": "ja_dev", "jmultiwoz_tc": "jmultiwoz_tc"},
             "test": {"ko": "ko_dev", "ja": "ja_dev"}}  # test and dev share a catalogue
ALPHA = (0.0, 0.25, 0.5, 0.75, 1.0)
CAP = (1.25, 1.5, float("inf"))
SWEEP = (0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)


def measures(names: set[str]) -> dict[str, float]:
    specs = {**CATALOGUES, **DEV}
    return {n: bank_measure(specs[n][0], specs[n][1], 0.5, 0.0)["bank"] for n in sorted(names)}


def run(split: str, cache: Path, m: dict[str, float], alpha: float, ref: float, cap: float,
        half: int | None = None) -> dict[str, tuple[int, int, int]]:
    """Per set: (right with the rescaled leads, right with today's rule, scored turns)."""
    from memroute.routing.policy import PolicyParams

    base = PolicyParams()
    out = {}
    for name, file in RECORDINGS[split].items():
        rec = pickle.loads((cache / file).read_bytes())
        obs = rec["obs"] if half is None else rec["obs"][half::2]
        s = min(cap, (ref / m[CATALOGUE[split][name]]) ** alpha)
        new = replay(two_rules(base, replace(base, lead=base.lead * s)), obs, rec["index"], rec["floor"])
        old = replay(two_rules(base, base), obs, rec["index"], rec["floor"])
        out[name] = (new[2], old[2], old[3])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("select", "final", "sweep"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/fit_ja_ko_rule"))
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--ref", type=float, default=6.0)
    parser.add_argument("--cap", type=float, default=float("inf"))
    parser.add_argument("--split", choices=("train", "dev", "test"), default="dev")
    args = parser.parse_args(argv)
    if args.command == "sweep":  # one factor for every set of the split: how far the rule is from its best unit
        for factor in SWEEP:
            m = {name: 1.0 for name in CATALOGUE[args.split].values()}
            g = run(args.split, args.cache, m, 1.0, factor, float("inf"))
            print(f"factor {factor}: " + " ".join(f"{n} {a / t:.4f} ({a - b:+d})" for n, (a, b, t) in g.items()))
        return 0
    if args.command == "final":
        m = measures(set(CATALOGUE[args.split].values()))
        print("measures", {k: round(v, 3) for k, v in m.items()})
        for name, (new, old, n) in run(args.split, args.cache, m, args.alpha, args.ref, args.cap).items():
            print(f"{name} {args.split}: today's {old / n:.4f} ({n - old} wrong of {n}); rescaled {new / n:.4f} "
                  f"({n - new} wrong)")
        return 0
    m = measures(set(CATALOGUE["train"].values()))
    print("measures", {k: round(v, 3) for k, v in m.items()})
    refs = sorted({round(float(q), 2) for q in np.quantile(list(m.values()), (0.0, 0.5, 1.0))} | {3.0, 4.0, 5.0})
    rows = []
    for alpha, ref, cap in itertools.product(ALPHA, refs, CAP):
        if alpha == 0.0 and (ref, cap) != (refs[0], CAP[-1]):
            continue
        g = run("train", args.cache, m, alpha, ref, cap)
        halves = [run("train", args.cache, m, alpha, ref, cap, h) for h in (0, 1)]
        total = sum(a - b for a, b, _ in g.values())
        rows.append((total, alpha, ref, cap, g, [sum(a - b for a, b, _ in h.values()) for h in halves]))
    rows.sort(key=lambda r: (-r[0], r[1]))
    for total, alpha, ref, cap, g, hv in rows:
        per = " ".join(f"{n} {a / t:.4f} ({a - b:+d})" for n, (a, b, t) in g.items())
        print(f"alpha {alpha} ref {ref} cap {cap}: {total:+d} turns; {per}; halves {hv[0]:+d} / {hv[1]:+d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
