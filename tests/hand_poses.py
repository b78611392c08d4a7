"""Hand landmark sets moved into other poses, for the gesture tests: in-plane turns, mirror
images, and fingers or thumb folded. Points are 21 x [x, y(, z)] with y pointing down."""
from __future__ import annotations

import numpy as np


def rotate(points: np.ndarray, degrees: float, centre=None) -> np.ndarray:
    """In-plane rotation (x, y; z kept) about the centre, y pointing down like the image."""
    p = np.array(points, dtype=float)
    c = p[:, :2].mean(axis=0) if centre is None else centre
    t = np.deg2rad(degrees)
    r = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
    p[:, :2] = (p[:, :2] - c) @ r.T + c
    return p


def mirror(points: np.ndarray) -> np.ndarray:
    p = np.array(points, dtype=float)
    p[:, 0] = -p[:, 0]
    return p


def thumb_angle(points: np.ndarray) -> float:
    """Degrees between the thumb (MCP -> tip) and straight up, in the picture."""
    v = points[4, :2] - points[2, :2]
    return float(np.degrees(np.arctan2(abs(v[0]), -v[1])))


def tuck_thumb(points: np.ndarray) -> np.ndarray:
    """Thumb folded across the curled fingers: tip on the index/middle middle phalanges, IP
    between its MCP and the index PIP — the fist that must NOT read as a thumbs-up."""
    p = np.array(points, dtype=float)
    p[4] = (p[6] + p[10]) / 2 + (p[7] - p[6]) * 0.3
    p[3] = (p[2] + p[6]) / 2
    return p


def point_index(points: np.ndarray) -> np.ndarray:
    """Index finger straightened along the palm (wrist -> index MCP), the others still curled."""
    p = np.array(points, dtype=float)
    d = p[5] - p[0]
    for i, k in zip((6, 7, 8), (0.45, 0.75, 1.0)):
        p[i] = p[5] + d * k
    return p


def index_angle(points: np.ndarray) -> float:
    """Degrees between the index finger (MCP -> tip) and straight up, in the picture."""
    v = points[8, :2] - points[5, :2]
    return float(np.degrees(np.arctan2(abs(v[0]), -v[1])))


def fold(points: np.ndarray, fingers: tuple[int, ...]) -> np.ndarray:
    """Fingers (0 index .. 3 pinky) curled into the palm: PIP a third of a palm beyond the MCP,
    DIP back at the MCP's height, tip back towards the wrist."""
    p = np.array(points, dtype=float)
    for f in fingers:
        mcp = 5 + 4 * f
        d = p[mcp] - p[0]
        p[mcp + 1] = p[mcp] + d * 0.3
        p[mcp + 2] = p[mcp] + d * 0.1
        p[mcp + 3] = p[mcp] - d * 0.25
    return p


# Poses made from an open palm by folding fingers (and, for the fist, tucking the thumb).
FROM_PALM = {"victory": lambda p: fold(p, (2, 3)), "iloveyou": lambda p: fold(p, (1, 2)),
             "pointing_up": lambda p: fold(p, (1, 2, 3)), "closed_fist": lambda p: tuck_thumb(fold(p, (0, 1, 2, 3)))}
