"""Fitting routing's learned message-agent model (:mod:`memroute.routing.interaction`) on an intent set.

``python -m memroute.eval.route_interaction_fit --data ../shared/data/clinc150 --out FILE``: each training
utterance of an intent set (``train.jsonl`` ``{id, text, label, domain}`` and ``labels.jsonl``; ``oos`` left out)
is a message, each intent an agent described by its name's words (``play_music`` -> "play music"); the
message's own intent is the positive, and :data:`HARD` of the nearest other intents by cosine plus
:data:`EASY` drawn at random (seed 13) are the negatives. The utterances are the first :data:`MESSAGES` in md5
order of their id. The logistic model is fitted by :func:`memroute.retrieval.rerank_fit.fit_logistic`, the
cosine unshrunk and every other weight shrunk by ``l2`` (:data:`L2`), and written in the raw scale for the fast
encoder's id. ``--holdout-domains`` fits on every other domain (sorted, odd positions held out) and prints the
intents' top-1 on the held-out domains with and without the model, the check that it carries to domains it
never saw. The settings were chosen on the dev sets of the routing evaluation (docs/benchmarks.md, branch
route7).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memroute.embed import get_embedder
from memroute.errors import InputError
from memroute.eval.datasets import read_jsonl
from memroute.retrieval.interaction import InteractionModel, pair_features
from memroute.retrieval.rerank_fit import fit_logistic
from memroute.routing.documents import humanise
from memroute.routing.interaction import unit_rows

MESSAGES = 4500
HARD = 15
EASY = 15
L2 = 3000.0
ENCODER = "use-m3"
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class IntentSet:
    messages: F64
    """One unit row per utterance (the fast encoder's vector)."""
    gold: list[int]
    intents: F64
    """One unit row per intent: its name's words."""
    domains: list[str]


def load_intent_set(folder: str | Path, messages: int = MESSAGES, encoder: str = ENCODER) -> IntentSet:
    folder = Path(folder)
    labels = [r for r in read_jsonl(folder / "labels.jsonl") if r["label"] != "oos"]
    if len(labels) < 2:
        raise InputError(f"{folder}/labels.jsonl: the model needs at least two intents")
    position = {str(r["label"]): i for i, r in enumerate(labels)}
    rows = [r for r in read_jsonl(folder / "train.jsonl") if str(r["label"]) in position]
    rows.sort(key=lambda r: hashlib.md5(str(r["id"]).encode()).hexdigest())
    rows = rows[:messages]
    if not rows:
        raise InputError(f"{folder}/train.jsonl: no utterance has one of the intents of labels.jsonl")
    embedder = get_embedder(encoder)
    texts = [str(r["text"]) for r in rows]
    names = [humanise(str(r["label"])) for r in labels]
    return IntentSet(unit_rows(np.asarray(embedder.embed(texts, side="query"))).astype(np.float64),
                     [position[str(r["label"])] for r in rows],
                     unit_rows(np.asarray(embedder.embed(names, side="passage"))).astype(np.float64),
                     [str(r.get("domain", "")) for r in labels])


def training_rows(data: IntentSet, keep: Callable[[str], bool] = lambda _: True,
                  seed: int = 13) -> tuple[F64, F64]:
    """Pair features and labels: per message of a kept intent, its intent and the negatives of the module
    docstring among the kept intents."""
    rng = np.random.default_rng(seed)
    allowed = np.array([i for i, d in enumerate(data.domains) if keep(d)])
    xs: list[F64] = []
    ys: list[F64] = []
    for q, gold in zip(data.messages, data.gold, strict=True):
        if not keep(data.domains[gold]):
            continue
        others = allowed[allowed != gold]
        hard = others[np.argsort(-(data.intents[others] @ q))[:HARD]]
        easy = rng.choice(others, size=min(EASY, len(others)), replace=False)
        chosen = [gold, *dict.fromkeys(int(i) for i in (*hard, *easy))]
        xs.append(pair_features(q, data.intents[chosen]))
        ys.append(np.array([i == gold for i in chosen], dtype=np.float64))
    if not xs:
        raise InputError("no training message is left after the domain filter")
    return np.vstack(xs), np.concatenate(ys)


def fit(x: F64, y: F64, l2: float = L2, fitted_on: str = "") -> InteractionModel:
    w, b, mean, scale = fit_logistic(x, y, l2, 30, unshrunk=(0,))  # the cosine is not shrunk
    raw = w / scale
    dim = (len(raw) - 1) // 2
    return InteractionModel(dim, float(raw[0]), raw[1: dim + 1], raw[dim + 1:], float(b - mean @ raw), fitted_on)


def top1(data: IntentSet, keep: Callable[[str], bool], model: InteractionModel | None, weight: float) -> float:
    """Intent top-1 over the kept intents' messages, by cosine plus ``weight`` times the centred logit."""
    allowed = np.array([i for i, d in enumerate(data.domains) if keep(d)])
    hits = []
    for q, gold in zip(data.messages, data.gold, strict=True):
        if not keep(data.domains[gold]):
            continue
        score = data.intents[allowed] @ q
        if model is not None:
            logits = model.logits(q, data.intents[allowed])
            score = score + weight * (logits - logits.mean())
        hits.append(allowed[int(np.argmax(score))] == gold)
    return float(np.mean(hits))


def write_weights(model: InteractionModel, encoder_id: str, out: str | Path) -> None:
    """Write ``{"encoders": {encoder_id: model}}`` whole or not at all (a temporary file renamed)."""
    out = Path(out)
    payload = json.dumps({"encoders": {encoder_id: model.to_dict()}}, ensure_ascii=False)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(payload + "\n")
    os.chmod(tmp, 0o644)  # a packaged data file, readable by all (mkstemp makes it private)
    os.replace(tmp, out)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m memroute.eval.route_interaction_fit", description=__doc__)
    p.add_argument("--data", required=True, help="an intent set's folder (train.jsonl, labels.jsonl)")
    p.add_argument("--out", help="weights file to write (routing/interaction_weights.json ships)")
    p.add_argument("--messages", type=int, default=MESSAGES)
    p.add_argument("--l2", type=float, default=L2)
    p.add_argument("--holdout-domains", action="store_true", help="report the top-1 on held-out domains")
    args = p.parse_args(argv)
    started = time.process_time()
    data = load_intent_set(args.data, args.messages)
    if args.holdout_domains:
        held = set(sorted(set(data.domains))[1::2])
        model = fit(*training_rows(data, lambda d: d not in held), l2=args.l2)
        for weight in (0.0, 0.01, 0.02, 0.05):
            print(json.dumps({"weight": weight, "held_out": sorted(held),
                              "held_out_top1": round(top1(data, lambda d: d in held, model, weight), 4),
                              "seen_top1": round(top1(data, lambda d: d not in held, model, weight), 4)}))
    if args.out:
        name = Path(args.data).name
        model = fit(*training_rows(data), l2=args.l2,
                    fitted_on=f"{name} train, {len(data.gold)} messages, l2 {args.l2:g}")
        write_weights(model, get_embedder(ENCODER).model_id, args.out)
        print(json.dumps({"out": args.out, "messages": len(data.gold),
                          "cpu_s": round(time.process_time() - started, 1)}))


if __name__ == "__main__":
    main()
