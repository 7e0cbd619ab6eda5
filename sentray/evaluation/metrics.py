"""STS's metrics as SentEval computes them: row-wise cosine similarity and Spearman correlation
(ties share their mean rank, as in scipy), vectorised over any leading axes (the head search
scores every layer-head at once)."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity over the last axis: (..., N, D) x (..., N, D) -> (..., N)."""
    a = a.astype(np.float64, copy=False)
    b = b.astype(np.float64, copy=False)
    dot = (a * b).sum(-1)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return dot / np.maximum(norms, 1e-12)


def spearman(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of `predicted` (..., N) with `gold` (N,): the Pearson
    correlation of average ranks (ties share their mean rank, as in scipy)."""
    ranks = rankdata(predicted, axis=-1)
    gold_ranks = rankdata(gold)
    ranks = ranks - ranks.mean(-1, keepdims=True)
    gold_ranks = gold_ranks - gold_ranks.mean()
    numerator = (ranks * gold_ranks).sum(-1)
    denominator = np.sqrt((ranks ** 2).sum(-1) * (gold_ranks ** 2).sum())
    return numerator / np.where(denominator == 0, np.nan, denominator)
