"""Fitting the reranker: L2-regularised logistic regression by Newton's method (IRLS), in numpy.

Pointwise: each fused candidate of a training question is one row, labelled 1 when it is one of the
question's evidence memories. Features are standardised first (the mean and scale ship with the
weights), so one L2 strength fits all of them. Used by ``memroute eval recall --fit`` and ``--loo``;
:func:`fit_logistic` also fits the relevance judge (:mod:`memroute.retrieval.judge_fit`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memroute.errors import InputError
from memroute.retrieval.rerank import FEATURES, RerankModel, with_small

Array = npt.NDArray[np.float64]


def fit_reranker(x: Array, y: Array, l2: float = 1.0, iterations: int = 50, fitted_on: str = "",
                 weight: Array | None = None, small: Array | None = None, late: Array | None = None) -> RerankModel:
    """``weight``: one per row (data sets weighed); ``small``: one flag per row (its question's candidates are
    a small store's all): the model then has the small-store columns too; ``late``: one late-interaction score
    per row (:data:`~memroute.retrieval.rerank.LATE`; NaN where a candidate has none: the column's mean)."""
    if x.ndim != 2 or x.shape[1] != len(FEATURES) or len(x) != len(y):
        raise InputError(f"training data must be (n, {len(FEATURES)}) features with n labels")
    if late is not None:
        col = np.asarray(late, dtype=np.float64).reshape(-1)
        if len(col) != len(x):
            raise InputError(f"{len(col)} late-interaction scores for {len(x)} rows")
        known = col[~np.isnan(col)]
        x = np.hstack([x, np.where(np.isnan(col), known.mean() if len(known) else 0.0, col)[:, None]])
    w, bias, mean, scale = fit_logistic(x if small is None else with_small(x, small), y, l2, iterations, weight)
    return RerankModel(tuple(float(v) for v in w), bias, tuple(float(v) for v in mean),
                       tuple(float(v) for v in scale), fitted_on, late is not None)


def fit_logistic(x: Array, y: Array, l2: float = 1.0, iterations: int = 50,
                 weight: Array | None = None, unshrunk: Sequence[int] = ()) -> tuple[Array, float, Array, Array]:
    """Weights, bias, and the features' mean and scale (standardisation); ``weight``: one per row;
    ``unshrunk``: columns the ridge leaves alone (as it does the bias)."""
    if not 0 < y.sum() < len(y):
        raise InputError("training data needs both relevant and irrelevant candidates")
    sw = np.ones(len(y)) if weight is None else np.asarray(weight, dtype=np.float64)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = 0.0  # the bias is not shrunk
    reg[list(unshrunk)] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -30, 30)))
        grad = z.T @ (sw * (p - y)) + reg * w
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-7:
            break
    return w[:-1], float(w[-1]), mean, scale
