"""Probe token-level late interaction (ColBERT's MaxSim) against pooled cosines, as per-text evidence.

Every text is encoded once by multilingual-e5-small's int8 engine (:meth:`memroute.embed.e5_int8.E5Int8.embed_tokens`):
its pooled vector (what memroute uses today) and its token vectors from the same pass (the last hidden states of
the text's own tokens, without ``<s>``, ``</s>`` and the ``query:`` / ``passage:`` prefix, each L2-normalised).
Messages and questions are encoded as queries, agent texts and memories as passages. Scores of a message ``q``
against a candidate ``d`` (Khattab & Zaharia 2020, ColBERT):

- ``pooled-e5``: cosine of e5's pooled vectors; ``pooled-default``: cosine under the encoder memroute uses there
  today (routing: ``use-m3+e5-ja-ko``; recall: ``use-m3``); ``pooled-pair``: ``use-m3+e5-small``;
- ``maxsim``: mean over ``q``'s tokens of the best cosine with any token of ``d``;
- ``maxsim-idf``: the same mean weighted by each query token's BM25 idf, its document frequency counted over the
  candidate texts of that ranking (the agents of a set, the memories of a store), never over evaluation messages;
- ``symmetric``: the mean of ``maxsim`` both ways (``q`` → ``d`` and ``d`` → ``q``);
- ``maxsim-centred``: ``maxsim`` after taking from every token vector (both sides) the mean token vector of the
  ranking's candidate texts and normalising again: e5's token vectors share one direction, as its pooled vectors
  do (which is why memroute's routing encoder centres e5's pooled vectors);
- ``centred-idf``: both at once, ``maxsim-centred``'s best matches weighted as ``maxsim-idf``'s (added after the
  probe, by :mod:`benchmarks.estimate_late_interaction`, where it was the column that paid);
- ``blend(A, B)``: z-scores of A and B over the candidates of one ranking, summed with equal weights (no weight
  is fitted); ``blend(pooled-default, pooled-e5)`` is the control: two pooled encoders, no token in it.

Figures (top-1 of the gold candidate; for recall the first memory answers, and an answer in the first three):

- routing: memroute's Korean and Japanese sets' **dev** splits (a candidate's text is its description and its
  intents' descriptions) and JMultiWOZ-TC **dev** (its domain's tools' descriptions), on all labelled turns, first
  turns, switch turns (gold disjoint from the previous labelled turn's) and stay turns (turn kinds as in
  :mod:`benchmarks.probe_encoders`);
- recall: the everyday set's **train** split, answerable questions (dev is never read);
- locomo (only when asked for): recall@5 of the evidence turns on LoCoMo, the project's fitting set for recall
  (:func:`probe_locomo`).

    OMP_NUM_THREADS=1 PYTHONPATH=src python -m benchmarks.probe_late_interaction [--probe route|recall|locomo] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.probe_encoders import EVERYDAY_TRAIN, JMULTIWOZ, ROUTING, _read, _turns  # noqa: E402

LOCOMO = JMULTIWOZ.parent / "locomo_retrieval"


@dataclass(frozen=True)
class Encoded:
    """One text as the probe compares it: e5's token ids and token vectors, and pooled vectors by encoder."""

    ids: list[int]
    tokens: np.ndarray
    pooled: dict[str, np.ndarray]


LATE = ("maxsim", "maxsim-idf", "symmetric", "maxsim-centred", "centred-idf")
"""The late-interaction variants :func:`score_table` scores (and blends with each pooled score)."""

Encode = Callable[[Sequence[str], str], dict[str, Encoded]]
"""(distinct texts, side) → each text's :class:`Encoded`."""


def maxsim(query: np.ndarray, doc: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Mean (or ``weights``-weighted mean) over ``query``'s rows of their best cosine with a row of ``doc``."""
    if len(query) == 0 or len(doc) == 0:
        return 0.0
    best = (query @ doc.T).max(axis=1)
    if weights is None:
        return float(best.mean())
    return float((best * weights).sum() / max(float(weights.sum()), 1e-9))


def idf(candidates: Sequence[Encoded]) -> Callable[[Sequence[int]], np.ndarray]:
    """BM25's idf of a token id, ``log(1 + (N - df + 0.5) / (df + 0.5))``, df counted over ``candidates``."""
    df: dict[int, int] = {}
    for cand in candidates:
        for token in set(cand.ids):
            df[token] = df.get(token, 0) + 1
    n = len(candidates)

    def weights(ids: Sequence[int]) -> np.ndarray:
        return np.array([math.log(1 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in ids], np.float32)

    return weights


def _z(scores: np.ndarray) -> np.ndarray:
    spread = float(scores.std())
    return (scores - scores.mean()) / spread if spread > 1e-9 else scores * 0.0


def _centred(tokens: np.ndarray, mean: np.ndarray) -> np.ndarray:
    shifted = tokens - mean
    return np.asarray(shifted / np.maximum(np.linalg.norm(shifted, axis=1, keepdims=True), 1e-6), np.float32)


class Ranking:
    """One ranking's candidates, stacked once: every candidate's token vectors in one matrix (``starts`` marks
    where each begins), the same centred on their mean token vector, the idf of their token ids, their pooled
    vectors by encoder. Every candidate has at least one token (an empty text still has ``▁``)."""

    def __init__(self, candidates: Sequence[Encoded], pooled: Sequence[str]) -> None:
        counts = np.array([len(c.tokens) for c in candidates])
        if not len(candidates) or counts.min() < 1:
            raise ValueError("a ranking needs candidates with at least one token each")
        self.n, self.counts = len(candidates), counts
        self.starts = np.r_[0, np.cumsum(counts)[:-1]]
        self.tokens = np.concatenate([c.tokens for c in candidates]).astype(np.float32)
        self.mean = np.asarray(self.tokens.mean(axis=0), np.float32)
        self.centred = _centred(self.tokens, self.mean)
        self.weights = idf(candidates)
        self.pooled = {name: np.stack([c.pooled[name] for c in candidates]) for name in pooled}


def score_table(query: Encoded, ranking: Ranking) -> dict[str, np.ndarray]:
    """Every variant's scores of ``query`` against the ranking's candidates (one array per variant, one score per
    candidate); :func:`maxsim` is the reference each late-interaction score equals, candidate by candidate."""
    out: dict[str, np.ndarray] = {}
    for name, matrix in ranking.pooled.items():
        out[f"pooled-{name}"] = matrix @ query.pooled[name]
    if len(query.tokens):
        sims = query.tokens @ ranking.tokens.T
        best = np.maximum.reduceat(sims, ranking.starts, axis=1)  # [query token, candidate]
        w = ranking.weights(query.ids)
        back = np.add.reduceat(sims.max(axis=0), ranking.starts) / ranking.counts
        centred = np.maximum.reduceat(_centred(query.tokens, ranking.mean) @ ranking.centred.T, ranking.starts, axis=1)
        out["maxsim"] = best.mean(axis=0)
        out["maxsim-idf"] = (best * w[:, None]).sum(axis=0) / max(float(w.sum()), 1e-9)
        out["symmetric"] = (out["maxsim"] + back) / 2
        out["maxsim-centred"] = centred.mean(axis=0)
        out["centred-idf"] = (centred * w[:, None]).sum(axis=0) / max(float(w.sum()), 1e-9)
    else:
        for late in LATE:
            out[late] = np.zeros(ranking.n)
    if "e5" in ranking.pooled and "default" in ranking.pooled:
        out["blend(pooled-default, pooled-e5)"] = _z(out["pooled-default"]) + _z(out["pooled-e5"])
    for base in ranking.pooled:
        for late in LATE:
            out[f"blend(pooled-{base}, {late})"] = _z(out[f"pooled-{base}"]) + _z(out[late])
    return out


def _top1(table: dict[str, np.ndarray], gold: Sequence[bool]) -> dict[str, tuple[bool, bool]]:
    """Per variant: whether its first candidate is gold, and whether one of its first three is."""
    out = {}
    for variant, scores in table.items():
        order = np.argsort(-scores, kind="stable")
        out[variant] = (gold[int(order[0])], any(gold[int(i)] for i in order[:3]))
    return out


def _summary(hits: dict[str, dict[str, list[tuple[bool, bool]]]], top3: bool) -> dict[str, Any]:
    """{group: {variant: top1 (and top3)}} from {group: {variant: [(top1 hit, top3 hit)]}}, and under
    ``paired`` each variant's top-1 against ``pooled-default``'s on the same items: [gained, lost]."""
    out: dict[str, Any] = {}
    for group, variants in hits.items():
        row: dict[str, Any] = {"n": len(next(iter(variants.values())))}
        base = [a for a, _ in variants["pooled-default"]]
        paired: dict[str, list[int]] = {}
        for variant, pairs in variants.items():
            top1 = round(sum(a for a, _ in pairs) / len(pairs), 3)
            row[variant] = [top1, round(sum(b for _, b in pairs) / len(pairs), 3)] if top3 else top1
            paired[variant] = [sum(a and not b for (a, _), b in zip(pairs, base, strict=True)),
                               sum(b and not a for (a, _), b in zip(pairs, base, strict=True))]
        row["paired"] = paired
        out[group] = row
    return out


def route_set(encode: Encode, candidates: dict[str, str], turns: list[tuple[str, set[str], str]],
              pooled: Sequence[str]) -> dict[str, Any]:
    names = list(candidates)
    cand_enc = encode(list(candidates.values()), "passage")
    cands = [cand_enc[candidates[n]] for n in names]
    ranking = Ranking(cands, pooled)
    msgs = encode([t for t, _, _ in turns], "query")
    hits: dict[str, dict[str, list[tuple[bool, bool]]]] = {}
    cpu = 0.0
    for text, gold, kind in turns:
        c0 = time.process_time()
        table = score_table(msgs[text], ranking)
        cpu += time.process_time() - c0
        for variant, hit in _top1(table, [n in gold for n in names]).items():
            for group in ("all", kind):
                hits.setdefault(group, {}).setdefault(variant, []).append(hit)
    out = _summary(hits, top3=False)
    out["score_cpu_ms_per_turn_all_variants"] = round(1000 * cpu / max(len(turns), 1), 3)
    return out


def probe_route(encode: Encode) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for lang in ("ko", "ja"):
        folder = ROUTING / lang
        candidates = {s["name"]: " ".join([s["description"], *(i["description"] for i in s.get("intents", []))])
                      for s in _read(folder / "services.jsonl")}
        results[f"{lang} dev"] = route_set(encode, candidates, _turns(_read(folder / "dev.jsonl"), "gold_services"),
                                           ("e5", "default"))
    if (JMULTIWOZ / "dev.jsonl").exists():
        texts: dict[str, list[str]] = {}
        for tool in _read(JMULTIWOZ / "tools.jsonl"):
            texts.setdefault(tool["domain"], []).append(tool["description"])
        candidates = {d: " ".join(descs) for d, descs in texts.items()}
        turns = _turns(_read(JMULTIWOZ / "dev.jsonl"), "gold_domains")
        results["JMultiWOZ-TC dev"] = route_set(encode, candidates, turns, ("e5", "default"))
    return results


def probe_recall(encode: Encode, path: Path = EVERYDAY_TRAIN,
                 pooled: Sequence[str] = ("e5", "default", "pair")) -> dict[str, Any]:
    """First-memory and first-three figures per variant on the everyday stores of ``path`` (answerable questions;
    a store's memories are its candidates; ``pooled``: the pooled scores ``encode`` gives)."""
    hits: dict[str, dict[str, list[tuple[bool, bool]]]] = {}
    for store in _read(path):
        memories = store["memories"]
        mem_enc = encode([m["text"] for m in memories], "passage")
        cands = [mem_enc[m["text"]] for m in memories]
        ranking = Ranking(cands, pooled)
        questions = [q for q in store["questions"] if q["type"] != "unanswerable"]
        q_enc = encode([q["text"] for q in questions], "query")
        for q in questions:
            answers = set(q["answers"])
            table = score_table(q_enc[q["text"]], ranking)
            groups = ["all", q["language"]] + (["cross-language"] if q.get("cross_language") else [])
            for variant, hit in _top1(table, [m["id"] in answers for m in memories]).items():
                for group in groups:
                    hits.setdefault(group, {}).setdefault(variant, []).append(hit)
    return _summary(hits, top3=True)


def probe_locomo(encode: Encode, path: Path = LOCOMO, pooled: Sequence[str] = ("e5", "default")) -> dict[str, Any]:
    """Recall@5 of the evidence turns per variant on LoCoMo (``../shared/data/locomo_retrieval``, the project's
    fitting set for recall): each conversation's turns (``Speaker: text``, a shared photo as its caption, as
    :mod:`memroute.eval.locomo` makes them, without the neighbouring turns memroute embeds beside them) are the
    candidates of its questions (those with evidence). ``paired``: questions whose recall@5 is higher / lower than
    under ``pooled-default``."""
    from memroute.eval.locomo import CATEGORIES, load_locomo

    rows: dict[str, dict[str, list[float]]] = {}
    for conv in load_locomo(path):
        texts = [f"{t.speaker}: {t.text}" for t in conv.turns]
        enc = encode(texts, "passage")
        ranking = Ranking([enc[t] for t in texts], pooled)
        ids = [t.id for t in conv.turns]
        questions = [q for q in conv.questions if q.evidence]
        q_enc = encode([q.text for q in questions], "query")
        for q in questions:
            evidence = set(q.evidence)
            for variant, scores in score_table(q_enc[q.text], ranking).items():
                top5 = {ids[i] for i in np.argsort(-scores, kind="stable")[:5]}
                for group in ("all", f"{q.category} {CATEGORIES[q.category]}"):
                    rows.setdefault(group, {}).setdefault(variant, []).append(len(top5 & evidence) / len(evidence))
    out: dict[str, Any] = {}
    for group, variants in rows.items():
        base = variants["pooled-default"]
        out[group] = {"n": len(base), **{v: round(float(np.mean(r)), 3) for v, r in variants.items()},
                      "paired": {v: [sum(a > b for a, b in zip(r, base, strict=True)),
                                     sum(a < b for a, b in zip(r, base, strict=True))] for v, r in variants.items()}}
    return out


def memroute_encoder(pooled: dict[str, str]) -> Encode:
    """e5's int8 engine for token vectors and ``pooled-e5``, and memroute's embedders by name for the other pooled
    scores (``{"default": "use-m3+e5-ja-ko", ...}``); every distinct text is encoded once per side."""
    from memroute.embed import EMBEDDERS
    from memroute.embed.e5_int8 import E5Int8, packaged_weights

    engine = E5Int8(packaged_weights())
    models = {key: EMBEDDERS[name]() for key, name in pooled.items()}
    cache: dict[tuple[str, str], Encoded] = {}

    def encode(texts: Sequence[str], side: str) -> dict[str, Encoded]:
        todo = [t for t in dict.fromkeys(texts) if (t, side) not in cache]
        others = {key: model.embed(todo, side) for key, model in models.items()} if todo else {}  # type: ignore[arg-type]
        for row, text in enumerate(todo):
            vec, ids, tokens = engine.embed_tokens(text, side)
            vectors = {"e5": vec, **{key: np.asarray(v[row], np.float32) for key, v in others.items()}}
            cache[(text, side)] = Encoded(ids, tokens, vectors)
        return {t: cache[(t, side)] for t in texts}

    return encode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", action="append", choices=["route", "recall", "locomo"],
                        help="which probes (default: route and recall)")
    parser.add_argument("--json", action="store_true", help="one JSON line per probe")
    args = parser.parse_args(argv)
    probes = args.probe or ["route", "recall"]
    for probe in probes:
        t0 = time.perf_counter()
        if probe == "route":
            report = probe_route(memroute_encoder({"default": "use-m3+e5-ja-ko"}))
        elif probe == "recall":
            report = probe_recall(memroute_encoder({"default": "use-m3", "pair": "use-m3+e5-small"}))
        else:
            report = probe_locomo(memroute_encoder({"default": "use-m3"}))
        out = {"probe": probe, "seconds": round(time.perf_counter() - t0, 1), **report}
        print(json.dumps(out, ensure_ascii=False, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
