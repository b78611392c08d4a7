"""Rotated boxes (cx, cy, w, h, angle in radians) of a YOLO OBB head, as Ultralytics treats them
(static/js/contract/rotated.js is the page's twin): probabilistic IoU (each box as a Gaussian),
its fast NMS (a box is dropped when any higher-scored box overlaps it >= the threshold, kept
or not), the angle brought into [0, pi/2) and the four corners.
"""
from __future__ import annotations

import math

import numpy as np

EPS = 1e-7


def _covariance(boxes: np.ndarray):
    a, b = boxes[:, 2] ** 2 / 12, boxes[:, 3] ** 2 / 12
    cos, sin = np.cos(boxes[:, 4]), np.sin(boxes[:, 4])
    return a * cos ** 2 + b * sin ** 2, a * sin ** 2 + b * cos ** 2, (a - b) * cos * sin


def probiou(boxes: np.ndarray) -> np.ndarray:
    """[n, 5] -> [n, n] probabilistic IoU (Ultralytics' batch_probiou), in float64."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 5)
    a, b, c = _covariance(boxes)
    x, y = boxes[:, 0], boxes[:, 1]
    a1, a2 = a[:, None], a[None, :]
    b1, b2 = b[:, None], b[None, :]
    c1, c2 = c[:, None], c[None, :]
    dx, dy = x[:, None] - x[None, :], y[:, None] - y[None, :]
    den = (a1 + a2) * (b1 + b2) - (c1 + c2) ** 2 + EPS
    t1 = ((a1 + a2) * dy ** 2 + (b1 + b2) * dx ** 2) / den * 0.25
    t2 = ((c1 + c2) * -dx * dy) / den * 0.5
    det = np.clip(a * b - c ** 2, 0, None)
    t3 = np.log(((a1 + a2) * (b1 + b2) - (c1 + c2) ** 2) / (4 * np.sqrt(det[:, None] * det[None, :]) + EPS) + EPS) * 0.5
    bd = np.clip(t1 + t2 + t3, EPS, 100.0)
    return 1 - np.sqrt(1.0 - np.exp(-bd) + EPS)


def fast_nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """Indices kept, by score descending (equal scores by index): a box goes when a
    higher-scored one overlaps it >= ``iou``, whether that one was kept or not."""
    scores = np.asarray(scores, np.float32)
    order = np.argsort(-scores.astype(np.float64), kind="stable")
    if iou >= 1:  # no suppression: the model's NMS ran inside it
        return order
    overlaps = np.triu(probiou(np.asarray(boxes)[order]), 1)
    return order[~(overlaps >= iou).any(0)]


def regularize(box) -> list[float]:
    """(cx, cy, w, h, angle) with the angle in [0, pi/2), w and h swapped where it turned by
    pi/2 or more: one rectangle, one way to write it."""
    cx, cy, w, h, angle = (float(v) for v in box)
    if angle % math.pi >= math.pi / 2:
        w, h = h, w
    return [cx, cy, w, h, angle % (math.pi / 2)]


def corners(box) -> list[list[float]]:
    """The four corners of (cx, cy, w, h, angle), in Ultralytics' order (xywhr2xyxyxyxy)."""
    cx, cy, w, h, angle = (float(v) for v in box)
    cos, sin = math.cos(angle), math.sin(angle)
    v1 = (w / 2 * cos, w / 2 * sin)
    v2 = (-h / 2 * sin, h / 2 * cos)
    return [[cx + v1[0] + v2[0], cy + v1[1] + v2[1]], [cx + v1[0] - v2[0], cy + v1[1] - v2[1]],
            [cx - v1[0] - v2[0], cy - v1[1] - v2[1]], [cx - v1[0] + v2[0], cy - v1[1] + v2[1]]]
