"""Instance masks of a YOLO segmentation head, as Ultralytics' ``process_mask`` makes them in
predict() today (upsample=True; since 8.4.x it upsamples before it crops, ultralytics #24272)
(static/js/contract/masks.js is the page's twin):

1. logits = coefficients @ prototypes, at the prototypes' resolution (input / 4);
2. bilinear upsampling to the model input (half-pixel centres, edges clamped:
   ``F.interpolate(mode="bilinear")``), computed only inside the box;
3. a pixel is in the mask where the upsampled logit is > 0 (sigmoid > 0.5) and it lies in the
   box: x1 <= column < x2, y1 <= row < y2 (``crop_mask`` at the input's resolution, float32).

The outline of a mask is traced along pixel edges (``outlines``): each 4-connected part's
outer boundary as a polygon of pixel corners, so filling the polygons gives back the mask
exactly. Prototypes are NHWC: [mask_h, mask_w, nm] (batch dropped).
"""
from __future__ import annotations

import math

import numpy as np

from .geometry import bilinear_axis


def mask_logits(coefficients: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """[n, nm] @ [mh, mw, nm] -> [n, mh, mw] (float32)."""
    mh, mw, nm = prototypes.shape
    flat = np.asarray(prototypes, np.float32).reshape(mh * mw, nm)
    return (np.asarray(coefficients, np.float32).reshape(-1, nm) @ flat.T).reshape(-1, mh, mw)


def crop_window(box, input_size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The input pixels ``crop_mask`` keeps of a box (x1, y1, x2, y2 in input pixels, float32):
    columns [left, right) with x1 <= column < x2, rows [top, bottom) likewise, within the input."""
    in_w, in_h = input_size
    x1, y1, x2, y2 = (float(v) for v in np.asarray(box, np.float32))
    return (min(max(math.ceil(x1), 0), in_w), min(max(math.ceil(y1), 0), in_h),
            min(max(math.ceil(x2), 0), in_w), min(max(math.ceil(y2), 0), in_h))


def instance_mask(logits: np.ndarray, box, input_size: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
    """One instance's mask in input pixels over its box's window, as (bool [rows, cols],
    (left, top)); ``logits`` [mh, mw] (only the prototype pixels the window's upsampling reads
    matter)."""
    in_w, in_h = input_size
    mh, mw = logits.shape
    left, top, right, bottom = crop_window(box, input_size)
    if right <= left or bottom <= top:
        return np.zeros((0, 0), bool), (0, 0)
    y_lo, y_hi, fy = bilinear_axis(in_h, mh, top, bottom - top)
    x_lo, x_hi, fx = bilinear_axis(in_w, mw, left, right - left)
    fx, fy = fx[None, :], fy[:, None]
    one = np.float32(1)
    logits = np.asarray(logits, np.float32)
    upper = logits[y_lo][:, x_lo] * (one - fx) + logits[y_lo][:, x_hi] * fx
    lower = logits[y_hi][:, x_lo] * (one - fx) + logits[y_hi][:, x_hi] * fx
    return (upper * (one - fy) + lower * fy) > 0, (left, top)


def outlines(mask: np.ndarray, origin: tuple[int, int] = (0, 0)) -> list[list[list[int]]]:
    """The outer boundary of each 4-connected part of ``mask`` (bool [rows, cols]) as a polygon
    of pixel corners [[x, y], ...] (clockwise on screen, straight runs merged), offset by
    ``origin`` (left, top). Parts in the order of their first row, then column."""
    m = np.pad(np.asarray(mask, bool), 1)
    fg = m[1:-1, 1:-1]
    tops = fg & ~m[:-2, 1:-1]
    ys, xs = np.nonzero(tops)  # pixels whose top side is a boundary: one per loop at least
    # every boundary edge, directed with the part on its right (y grows downwards): start -> step
    edges: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def add(sel, dx0, dy0, step):
        for y, x in zip(*np.nonzero(sel)):
            edges.setdefault((int(x) + dx0, int(y) + dy0), []).append(step)

    add(tops, 0, 0, (1, 0))                  # top: left to right
    add(fg & ~m[1:-1, 2:], 1, 0, (0, 1))     # right: downwards
    add(fg & ~m[2:, 1:-1], 1, 1, (-1, 0))    # bottom: right to left
    add(fg & ~m[1:-1, :-2], 0, 1, (0, -1))   # left: upwards
    used: set[tuple[int, int, int, int]] = set()
    loops = []
    for y, x in zip(ys.tolist(), xs.tolist()):
        if (x, y, 1, 0) in used:
            continue
        start, step = (x, y), (1, 0)
        points, at = [start], start
        while True:
            used.add((*at, *step))
            at = (at[0] + step[0], at[1] + step[1])
            if at == start:
                break
            options = edges[at]
            if len(options) == 1:
                turn = options[0]
            else:  # two parts touch at a corner: turn right, keeping them apart
                turn = (-step[1], step[0])
            if turn != step:
                points.append(at)
            step = turn
        if step == (1, 0):  # the start lies inside a straight run
            points.pop(0)
        area2 = sum(px * qy - qx * py for (px, py), (qx, qy) in zip(points, points[1:] + points[:1]))
        if area2 > 0:  # outer boundary (a hole runs the other way)
            loops.append([[px + origin[0], py + origin[1]] for px, py in points])
    return loops
