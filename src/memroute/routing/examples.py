"""Agents with example utterances: a small classifier fitted on the frozen embeddings of their examples.

When agents come with example utterances (semantic-router's routes, intent sets such as CLINC150), the
examples say how users really talk to each agent. Nearest-neighbour similarity to them (the embedding
strategy's example channel) treats every direction of the embedding space alike; a softmax regression
fitted on the same frozen vectors learns which directions separate *these* agents, which is what fine-
grained intents ("card arrival" vs "card delivery estimate") need. Measured in ``docs/benchmarks.md``:
BANKING77 0.880 -> 0.910; CLINC150 in-scope 0.812 -> 0.940 at about the same out-of-scope recall
(0.61 / 0.62).

The classifier is fitted once per catalogue version when the index is built (numpy only, deterministic:
a fixed shuffle seed), in 1-3 s for 10,000-15,000 examples on two busy cores (embedding them takes
longer). It is skipped when it cannot help (fewer than two agents with examples, too few examples per
agent: nearest neighbours are as good there) or would cost too much to fit (:data:`MAX_FIT_WORK`); the
example channel then stays nearest-neighbour similarity.

Only agents with examples are touched (here, and in the mention strategy, which does not count their
names found in running text): every other agent's score is computed exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# Declared here, not imported from the index module, which imports this one.
F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]

MIN_EXAMPLES_PER_AGENT = 5.0
"""Average examples per agent below which the classifier is not fitted (one or two examples per agent
are nearest-neighbour territory: a regression has nothing to generalise from)."""
MAX_FIT_WORK = 5_000_000
"""Largest examples x agents product fitted (CLINC150: 15,000 x 150 = 2.25 M, 1-3 s); beyond it
(say 10,000 agents with a few examples each) the fit would take minutes and nearest neighbours stay."""
SCALE = 10.0
"""Input scale: unit-length sentence vectors times this (a softmax temperature). Chosen, with EPOCHS, by
5-fold cross-validation on the training sides of BANKING77 and CLINC150 only."""
EPOCHS = 5
MIN_STEPS = 100
"""Small catalogues (100 examples: one batch per epoch) get more passes, so that they are fitted too."""
BATCH = 256
LEARNING_RATE = 0.01
L2 = 1e-4
SEED = 0


@dataclass(frozen=True, slots=True)
class ExampleClassifier:
    """Softmax regression over the agents that have examples (positions ``agents`` in the index)."""

    agents: I32
    weights: F32
    """(dimension, agents), the input scale folded in."""
    bias: F32

    def probabilities(self, vector: F32) -> F32:
        """P(agent | message) over ``agents`` (sums to 1: the classifier knows no 'none of these')."""
        logits = vector @ self.weights + self.bias
        logits = logits - logits.max()
        p = np.exp(logits)
        out: F32 = (p / p.sum()).astype(np.float32)
        return out

    def scores(self, vector: F32, similarity: F32) -> F32:
        """The example channel for every agent: for agents with examples, the mean of their nearest-example
        similarity and their probability scaled by the message's best example similarity; others unchanged.

        The probability is scaled because a softmax is always sure of *some* agent: a message far from every
        example (best similarity 0.2) must not score like one that repeats an example, or agents without
        examples, scored by their descriptions, could never win in a mixed catalogue.
        """
        out = similarity.copy()
        near = similarity[self.agents]
        closest = float(max(near.max(), 0.0))
        out[self.agents] = 0.5 * (near + self.probabilities(vector) * np.float32(closest))
        return out


def fit_classifier(matrix: F32, owner: I32) -> ExampleClassifier | None:
    """Fit on stacked example vectors (rows of ``matrix``, agent position per row in ``owner``), or ``None``
    when a classifier would not help or would cost too much (see the module docstring)."""
    agents, y = np.unique(owner, return_inverse=True)
    n, m = len(owner), len(agents)
    if m < 2 or n < MIN_EXAMPLES_PER_AGENT * m or n * m > MAX_FIT_WORK:
        return None
    x = (matrix * np.float32(SCALE)).astype(np.float32)
    # Start from the normalised class means (nearest-centroid), so a few passes are enough.
    means = np.zeros((m, x.shape[1]), dtype=np.float32)
    np.add.at(means, y, matrix)
    means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), np.float32(1e-6))
    w = np.ascontiguousarray(means.T)
    b = np.zeros(m, dtype=np.float32)
    w, b = _adam(x, y.astype(np.int64), w, b)
    return ExampleClassifier(agents.astype(np.int32), (w * np.float32(SCALE)).astype(np.float32), b)


def _adam(x: F32, y: np.ndarray[tuple[int], np.dtype[np.int64]], w: F32, b: F32) -> tuple[F32, F32]:
    """Mini-batch Adam (Kingma & Ba 2015) on L2-regularised softmax cross-entropy, fixed shuffle seed."""
    rng = np.random.default_rng(SEED)
    state = [np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)]
    step = 0
    n = len(y)
    for _ in range(max(EPOCHS, -(-MIN_STEPS // -(-n // BATCH)))):
        order = rng.permutation(n)
        for start in range(0, n, BATCH):
            rows = order[start:start + BATCH]
            step += 1
            z = x[rows] @ w + b
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(len(rows)), y[rows]] -= 1.0
            grad_w = x[rows].T @ p / np.float32(len(rows)) + np.float32(L2) * w
            grad_b = p.mean(axis=0)
            _update(w, grad_w, state[0], state[1], step)
            _update(b, grad_b, state[2], state[3], step)
    return w, b


def _update(param: F32, grad: F32, m: F32, v: F32, step: int) -> None:
    m *= np.float32(0.9)
    m += np.float32(0.1) * grad
    v *= np.float32(0.999)
    v += np.float32(0.001) * grad * grad
    m_hat = m / np.float32(1 - 0.9 ** step)
    v_hat = v / np.float32(1 - 0.999 ** step)
    param -= np.float32(LEARNING_RATE) * m_hat / (np.sqrt(v_hat) + np.float32(1e-8))


def example_grid(starts: I32, total: int) -> I32 | None:
    """Row positions of each agent's examples as a padded (agents, most examples) grid, the padding pointing
    one past the last row; ``None`` when padding would more than double the work (very uneven counts)."""
    if not len(starts):
        return None
    counts = np.diff(np.r_[starts, total])
    width = int(counts.max())
    if len(starts) * width > 2 * total + 1024:
        return None
    grid = np.full((len(starts), width), total, dtype=np.int32)
    cols = np.arange(total) - np.repeat(starts, counts)
    grid[np.repeat(np.arange(len(starts)), counts), cols] = np.arange(total, dtype=np.int32)
    return grid


def top_mean(sims: F32, grid: I32, k: int) -> F32:
    """Mean of the ``k`` largest similarities of each agent's examples (fewer if it has fewer): one partition
    of the padded grid instead of sorting every similarity, ~10x faster at 15,000 examples."""
    padded = np.append(sims, np.float32(-np.inf))[grid]
    kk = max(1, min(k, padded.shape[1]))
    top = -np.partition(-padded, kk - 1, axis=1)[:, :kk]
    finite = np.isfinite(top)
    out: F32 = (np.where(finite, top, 0.0).sum(axis=1) / finite.sum(axis=1)).astype(np.float32)
    return out
