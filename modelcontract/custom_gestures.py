"""Python twin of static/js/contract/custom_gestures.js: your own hand gestures as recorded examples
(21 keypoints normalised to 40 numbers), matched by k nearest neighbours (example_sets).
The hands page records and exports the file; POST /api/v1/hands takes it as its ``custom``
part and answers the same names (tests/unit/test_custom_gestures.py runs both on the same hands
and the same bad files). custom_gestures.js's header explains the rules.
"""
from __future__ import annotations

import math

from .example_sets import ExampleSets
from .twins import TWINS

KIND = TWINS["example_sets"]["custom_gestures"]   # format, size, limits, max_distance, k (twins.json)
SIZE = KIND["size"]   # 20 keypoints x (x, y)


def normalise_hand(points, handedness: str) -> list[float]:
    if points is None or len(points) != 21:
        raise ValueError(f"need 21 landmarks, got {0 if points is None else len(points)}")
    pts = [(float(p[0]), float(p[1])) for p in points]
    wx, wy = pts[0]
    mx, my = pts[9][0] - wx, pts[9][1] - wy
    scale = math.hypot(mx, my) or 1
    ux, uy = mx / scale, my / scale
    flip = -1 if handedness == "Left" else 1
    out = []
    for x, y in pts[1:]:
        x, y = x - wx, y - wy
        out += [flip * (-uy * x + ux * y) / scale, (-ux * x - uy * y) / scale]
    return out


def hand_distance(a, b) -> float:
    total = 0.0
    for i in range(0, SIZE, 2):
        total += math.hypot(a[i] - b[i], a[i + 1] - b[i + 1])
    return total / (SIZE / 2)


GESTURE_SETS = ExampleSets.of(KIND, distance=hand_distance)
