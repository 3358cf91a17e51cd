"""Fitting the sameness-of-subject model of facts that change (:data:`memroute.retrieval.changes.SAMENESS`).

A pair is an older memory and a newer one that says something changed (a change cue), both in one store
of the everyday set's train split. It is positive when an update question of that store names the older
as stale and the newer as its answer, negative otherwise. Its features are read from the whole store (its
memories stand for a recall's candidates; in a store of 8-14 memories a recall's candidates are most of
them): the pair's cosine as a z-score against the store's pairwise cosines, the Jaccard overlap of their
content tokens, and whether the older is the newer's nearest memory. ``python -m memroute.eval.changes_fit``
fits on both packaged encoders' pairs and prints the model with its leave-one-store-out links.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memroute.embed import get_embedder
from memroute.eval.everyday import EverydayStore, data_path, load_everyday
from memroute.retrieval.changes import SamenessModel, change_cue, content_tokens
from memroute.retrieval.rerank_fit import fit_logistic

L2 = 0.1


@dataclass(frozen=True, slots=True)
class Pair:
    store: str
    older: str
    newer: str
    x: tuple[float, float, float]
    """cosine z-score, content-token Jaccard, nearest neighbour (1.0 / 0.0)."""
    same: bool


def pairs(stores: Sequence[EverydayStore], embedder: str) -> list[Pair]:
    """Every (older, newer-with-a-cue) pair of each store, labelled by the store's update questions."""
    model = get_embedder(embedder)
    out = []
    for s in stores:
        vectors = np.asarray(model.embed([m.text for m in s.memories], side="passage"), dtype=np.float64)
        sims = vectors @ vectors.T
        upper = sims[np.triu_indices(len(vectors), k=1)]
        mean, sd = float(upper.mean()), max(float(upper.std()), 1e-3)
        true = {(a, b) for q in s.questions if q.type == "update" for a in q.stale for b in q.answers}
        contents = [content_tokens(m.text) for m in s.memories]
        for i, older in enumerate(s.memories):
            for j, newer in enumerate(s.memories):
                if newer.occurred_at <= older.occurred_at or change_cue(newer.text) is None:
                    continue
                union = contents[i] | contents[j]
                jaccard = len(contents[i] & contents[j]) / len(union) if union else 0.0
                others = [sims[j, k] for k in range(len(vectors)) if k != j]
                nearest = float(sims[j, i] >= max(others) - 1e-6)
                out.append(Pair(s.id, older.id, newer.id, ((sims[i, j] - mean) / sd, jaccard, nearest),
                                (older.id, newer.id) in true))
    return out


def fit(train: Sequence[Pair], fitted_on: str = "") -> SamenessModel:
    x, y = _arrays(train)
    w, bias, mean, scale = fit_logistic(x, y, l2=L2)
    return SamenessModel((float(w[0]), float(w[1]), float(w[2])), bias,
                         (float(mean[0]), float(mean[1]), float(mean[2])),
                         (float(scale[0]), float(scale[1]), float(scale[2])), fitted_on)


def leave_one_store_out(data: Sequence[Pair]) -> dict[str, int]:
    """True links found, false links made and true links missed, each store scored by a model fitted
    without it."""
    tally = {"true_links": 0, "false_links": 0, "missed": 0}
    for store in dict.fromkeys(p.store for p in data):
        model = fit([p for p in data if p.store != store])
        for p in data:
            if p.store == store:
                linked = model.probability(p.x[0], p.x[1], bool(p.x[2])) >= 0.5
                key = ("true_links" if p.same else "false_links") if linked else ("missed" if p.same else "")
                if key:
                    tally[key] += 1
    return tally


def _arrays(data: Sequence[Pair]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    return (np.array([p.x for p in data], dtype=np.float64), np.array([float(p.same) for p in data]))


def main() -> None:
    stores = load_everyday(data_path("train"))
    data = [p for name in ("use-m3", "use-m3+e5-small") for p in pairs(stores, name)]
    model = fit(data, f"everyday train, {len(data)} pairs, {sum(p.same for p in data)} true; "
                      "use-m3 and use-m3+e5-small")
    print(json.dumps({"model": {"weights": model.weights, "bias": model.bias, "mean": model.mean,
                                "scale": model.scale, "fitted_on": model.fitted_on},
                      "leave_one_store_out": leave_one_store_out(data)}, indent=1))


if __name__ == "__main__":
    main()
