"""Class scores as the pages rank them (static/js/contract/scores.js, its twin): softmax for logits, top-k by
value descending with equal values by index."""
from __future__ import annotations

import numpy as np


def softmax(values: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in double precision."""
    values = np.asarray(values, dtype=np.float64)
    exps = np.exp(values - values.max(axis=-1, keepdims=True))
    return exps / exps.sum(axis=-1, keepdims=True)


def sigmoid(values: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.asarray(values, dtype=np.float64)))


def top_k(values: np.ndarray, k: int) -> list[int]:
    """Indices of the k largest values, largest first; equal values by ascending index."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    order = np.lexsort((np.arange(len(values)), -values))
    return [int(i) for i in order[:k]]
