"""Replay the Japanese and Korean TRAIN sets under other values of the router's ja/ko-only knobs.

The knobs that only Japanese and Korean messages read were chosen on dev (``PolicyParams.ja_ko_bias``,
``new_request``, ``with_previous``, the bank's weight ``EmbeddingStrategy.by_bank``). This records what each
policy step is given on ``src/memroute/eval/data/routing/<lang>/train.jsonl`` (their own catalogue,
``train_services.jsonl``) once per bank weight, with :mod:`memroute.routing.training`'s recorder, and replays the
recordings with :func:`memroute.routing.training.replay` over a grid of the rule's knobs: the replay of the
default equals ``memroute eval route`` on the same file to the turn. ``--jmultiwoz N`` adds N dialogues of
JMultiWOZ-TC's train split (``$MEMROUTE_DATA_DIR/jmultiwoz_tc_routing``), whose travel follow-ups roam across
capabilities as memroute's own assistant sets do not (docs/benchmarks.md, routing, the sixteenth pass).

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.tune_ja_ko_rule [--bank 0.2 0.25 0.3] [--jmultiwoz 250]

Prints the default's figures per set, then the best settings by the mean of the sets' ``all``, and each set's
even / odd dialogues for the best one (a gain on one half only is noise). Nothing here reads a dev or test split.
"""

from __future__ import annotations

import argparse
import itertools
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SETS = ROOT / "src" / "memroute" / "eval" / "data" / "routing"
JM = Path(os.environ.get("MEMROUTE_DATA_DIR", ROOT.parent / "shared" / "data")) / "jmultiwoz_tc_routing"


def ja_ko_sets(split: str, jmultiwoz: int = 0) -> dict[str, tuple[Path, Path, int | None]]:
    """The Korean and Japanese sets of ``split`` (data, candidates, sample), with their own catalogue for train;
    JMultiWOZ-TC's train split (``jmultiwoz`` dialogues spread over the file, none when 0) or its whole dev."""
    catalogue = "train_services.jsonl" if split == "train" else "services.jsonl"
    out: dict[str, tuple[Path, Path, int | None]] = {
        lang: (SETS / lang / f"{split}.jsonl", SETS / lang / catalogue, None) for lang in ("ko", "ja")}
    if split == "train" and jmultiwoz:
        out["jmultiwoz_tc"] = (JM / "train.jsonl", JM / "tools.jsonl", jmultiwoz)
    elif split == "dev":
        out["jmultiwoz_tc"] = (JM / "dev.jsonl", JM / "tools.jsonl", None)
    return out
GRID = {"ja_ko_bias": (-1.0, -0.6, -0.2, 0.2, 0.4, 0.6), "new_request": (0.5, 1.0, 1.5, 2.0),
        "with_previous": (0.0, 1.0)}


def record(data: Path, candidates: Path, by_bank: float, sample: int | None) -> dict[str, Any]:
    from memroute.eval.datasets import load_candidates
    from memroute.eval.route_eval import spread_sample
    from memroute.routing import training
    from memroute.routing.composite import AgentRouter
    from memroute.routing.strategies import EmbeddingStrategy

    agents = load_candidates(candidates, "train")
    router = AgentRouter()
    for strategy in router.strategies:
        if isinstance(strategy, EmbeddingStrategy):
            strategy.by_bank = by_bank
    ids = [a.id for a in agents]
    dialogues, _ = training._read(data, set(ids), "skip", 10**6, lambda items: items)
    if sample is not None:
        dialogues = spread_sample(dialogues, sample)
    obs, floor = training._record(router, agents, dialogues, lambda items: items)
    return {"obs": obs, "floor": floor, "index": {a: i for i, a in enumerate(ids)}}


def score(params: Any, rec: dict[str, Any], half: int | None = None) -> tuple[float, float]:
    from memroute.routing.training import replay

    obs = rec["obs"] if half is None else rec["obs"][half::2]
    return replay(params, obs, rec["index"], rec["floor"])


def main(argv: list[str] | None = None) -> int:
    from memroute.routing.policy import PolicyParams

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bank", type=float, nargs="+", default=[0.25], help="bank weights to record (by_bank)")
    parser.add_argument("--jmultiwoz", type=int, default=0, help="add N JMultiWOZ-TC train dialogues (0: none)")
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args(argv)
    sets = ja_ko_sets("train", args.jmultiwoz)
    base = PolicyParams()
    results = []
    for by_bank in args.bank:
        recs = {name: record(data, cands, by_bank, sample) for name, (data, cands, sample) in sets.items()}
        default = {name: score(base, rec) for name, rec in recs.items()}
        print(f"by_bank {by_bank}, default rule: " + ", ".join(f"{n} {a:.4f} / {s:.3f}" for n, (a, s) in
                                                                 default.items()))
        for values in itertools.product(*GRID.values()):
            change: dict[str, Any] = dict(zip(GRID, values, strict=True))
            params = replace(base, **change)
            figures = {name: score(params, rec)[0] for name, rec in recs.items()}
            results.append((sum(figures.values()) / len(figures), by_bank, values, figures, params, recs))
    results.sort(key=lambda r: -r[0])
    print(f"best by the mean of all ({', '.join(GRID)}):")
    for mean, by_bank, values, figures, _, _ in results[:args.top]:
        print(f"  {mean:.4f}  by_bank {by_bank} {values}  " + " ".join(f"{n} {v:.4f}" for n, v in figures.items()))
    _, by_bank, values, _, params, recs = results[0]
    for name, rec in recs.items():
        even, odd = score(params, rec, 0)[0], score(params, rec, 1)[0]
        d_even, d_odd = score(base, rec, 0)[0], score(base, rec, 1)[0]
        print(f"  halves, {name}: even {d_even:.4f} -> {even:.4f}, odd {d_odd:.4f} -> {odd:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
