"""Boxes: IoU, and non-max suppression exactly as TF.js's ``tf.image.nonMaxSuppression`` (hard NMS) does it,
so server and page keep the same boxes: candidates are the scores strictly above
``score_threshold``, visited by score (descending; equal scores by index), and a candidate
is dropped when its IoU with an already selected box is >= ``iou_threshold``. Boxes are
[y1, x1, y2, x2] (any consistent corner order: TF.js normalises min/max per box); a box
with zero or negative area overlaps nothing. IoU is computed in double precision from the
float32 coordinates, like the JavaScript kernel.
"""
from __future__ import annotations

import numpy as np


def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, max_output: int, iou_threshold: float,
                        score_threshold: float = -np.inf) -> np.ndarray:
    """Indices of the kept boxes, in selection order."""
    boxes = np.asarray(boxes, dtype=np.float32).astype(np.float64).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float32)
    candidates = np.flatnonzero(scores > np.float32(score_threshold) if np.isfinite(score_threshold)
                                else np.ones(scores.shape, bool))
    if max_output <= 0 or candidates.size == 0:
        return np.zeros(0, dtype=np.int64)
    # score descending, ties by ascending index (stable sort of the negated scores)
    order = candidates[np.argsort(-scores[candidates].astype(np.float64), kind="stable")]
    if iou_threshold >= 1:  # no suppression: the model's NMS ran inside it
        return order[:max_output]
    y1 = np.minimum(boxes[:, 0], boxes[:, 2])
    x1 = np.minimum(boxes[:, 1], boxes[:, 3])
    y2 = np.maximum(boxes[:, 0], boxes[:, 2])
    x2 = np.maximum(boxes[:, 1], boxes[:, 3])
    area = (y2 - y1) * (x2 - x1)
    keep: list[int] = []
    remaining = order
    while remaining.size and len(keep) < max_output:
        i = int(remaining[0])
        keep.append(i)
        rest = remaining[1:]
        if rest.size == 0:
            break
        ih = np.maximum(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0.0)
        iw = np.maximum(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0.0)
        inter = ih * iw
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / (area[i] + area[rest] - inter)
        valid = (area[i] > 0) & (area[rest] > 0)
        iou = np.where(valid, iou, 0.0)
        remaining = rest[~(iou >= iou_threshold)]
    return np.asarray(keep, dtype=np.int64)



def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of [N,4] and [M,4] x1,y1,x2,y2 boxes -> [N, M] (0 where the union is empty)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)[:, None, :]
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)[None, :, :]
    iw = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    ih = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    inter = iw * ih
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    union = area_a + area_b - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)
