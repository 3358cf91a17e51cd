"""Which of a team's labelled turns become an agent's example utterances (``memroute fit --dialogues``, (a)).

Single-label turns that sit closer to their own agent's centroid than to any other's (a bare "yes, please"
belongs to no agent), said mostly to that agent, de-duplicated, and chosen to cover the agent's requests:
greedy facility location over cosine similarity (each pick is the turn that most raises every candidate's
similarity to its nearest pick), at most ``per_agent`` each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from memroute.routing.index import F32


def select_examples(vectors: F32, owners: Sequence[str], texts: Sequence[str], per_agent: int,
                    pool: int = 1500, duplicate: float = 0.95) -> dict[str, tuple[str, ...]]:
    """Representative, de-duplicated example utterances per agent (see the module docstring); an agent's
    candidates are its single-label turns (``vectors`` unit-length rows, ``owners`` their agents).

    A text said to several agents ("two nights, please", "thanks, that's all") is kept only for an agent
    that gets at least four fifths of it; each distinct text counts once in its agent's centroid, so a
    frequent bare answer cannot pull the centroid to itself."""
    votes: dict[str, Counter[str]] = {}
    first: dict[str, int] = {}
    for i, (text, agent) in enumerate(zip(texts, owners, strict=True)):
        key = " ".join(text.lower().split())
        votes.setdefault(key, Counter())[agent] += 1
        first.setdefault(key, i)
    rows_by_agent: dict[str, list[int]] = {}
    for key, count in votes.items():
        agent, n = count.most_common(1)[0]
        if 5 * n >= 4 * sum(count.values()):
            rows_by_agent.setdefault(agent, []).append(first[key])
    ids = sorted(rows_by_agent)
    if len(ids) < 2:
        return {}  # examples of one agent only would pull every message to it
    centroids = np.stack([vectors[rows_by_agent[a]].mean(axis=0) for a in ids])
    centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-6)
    out: dict[str, tuple[str, ...]] = {}
    for k, agent in enumerate(ids):
        rows = np.array(rows_by_agent[agent])
        sims = vectors[rows] @ centroids.T
        own = sims[:, k]
        other = np.delete(sims, k, axis=1).max(axis=1)
        closer = rows[own > other]
        if closer.size < min(3, rows.size):  # keep a few even when the agent overlaps everything
            closer = rows[np.argsort(other - own, kind="stable")[:min(3, rows.size)]]
        unique = closer.tolist()
        if len(unique) > pool:  # a deterministic spread keeps the similarity matrix bounded
            unique = [unique[i * len(unique) // pool] for i in range(pool)]
        out[agent] = tuple(texts[i] for i in _facility_location(vectors[unique], per_agent, duplicate,
                                                                 np.array(unique)))
    return out


def _facility_location(v: F32, k: int, duplicate: float, rows: np.ndarray[Any, Any]) -> list[int]:
    """Greedy facility location: pick the candidate that most raises every candidate's best similarity to
    a pick, ``k`` times, never two above ``duplicate`` cosine of each other."""
    s = np.maximum(v @ v.T, 0.0)
    best = np.zeros(len(v), dtype=np.float32)
    open_ = np.ones(len(v), dtype=bool)
    picks: list[int] = []
    while len(picks) < k and open_.any():
        gain = np.maximum(s - best[:, None], 0.0).sum(axis=0)
        gain[~open_] = -1.0
        j = int(np.argmax(gain))
        picks.append(int(rows[j]))
        best = np.maximum(best, s[:, j])
        open_ &= s[j] < duplicate
    return picks
