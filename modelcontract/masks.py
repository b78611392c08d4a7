"""Instance masks of a YOLO segmentation head, as Ultralytics' ``process_mask`` makes them
(static/js/contract/masks.js is the page's twin):

1. logits = coefficients @ prototypes, at the prototypes' resolution (input / 4);
2. zero outside the box, scaled to that resolution and rounded (half to even, as torch);
3. bilinear upsampling to the model input (half-pixel centres, edges clamped:
   ``F.interpolate(mode="bilinear")``), only over the box's window: outside it every value is 0;
4. a pixel is in the mask where the upsampled logit is > 0 (sigmoid > 0.5).

The outline of a mask is traced along pixel edges (``outlines``): each 4-connected part's
outer boundary as a polygon of pixel corners, so filling the polygons gives back the mask
exactly. Prototypes are NHWC: [mask_h, mask_w, nm] (batch dropped).
"""
from __future__ import annotations

import numpy as np

from .geometry import bilinear_axis


def mask_logits(coefficients: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """[n, nm] @ [mh, mw, nm] -> [n, mh, mw] (float32)."""
    mh, mw, nm = prototypes.shape
    flat = np.asarray(prototypes, np.float32).reshape(mh * mw, nm)
    return (np.asarray(coefficients, np.float32).reshape(-1, nm) @ flat.T).reshape(-1, mh, mw)


def crop_window(box, input_size: tuple[int, int], mask_size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The box (x1, y1, x2, y2 in input pixels) at the prototypes' resolution: the kept
    [x1, x2) x [y1, y2) of ``crop_mask`` (clamped at 0, rounded half to even)."""
    in_w, in_h = input_size
    mw, mh = mask_size
    ratios = np.array([mw / in_w, mh / in_h, mw / in_w, mh / in_h], np.float32)
    x1, y1, x2, y2 = np.round(np.maximum(np.asarray(box, np.float32) * ratios, 0)).astype(int)
    return x1, y1, x2, y2


def instance_mask(logits: np.ndarray, box, input_size: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
    """One instance's mask in input pixels, as (bool [rows, cols], (left, top)): the window of
    the input that can hold mask pixels (the crop plus one prototype pixel each side)."""
    in_w, in_h = input_size
    mh, mw = logits.shape
    x1, y1, x2, y2 = crop_window(box, input_size, (mw, mh))
    cropped = np.zeros_like(logits)
    cropped[max(y1, 0):max(y2, 0), max(x1, 0):max(x2, 0)] = logits[max(y1, 0):max(y2, 0), max(x1, 0):max(x2, 0)]
    sx, sy = in_w / mw, in_h / mh
    left, top = max(int(np.floor((x1 - 1) * sx)), 0), max(int(np.floor((y1 - 1) * sy)), 0)
    right, bottom = min(int(np.ceil((x2 + 1) * sx)), in_w), min(int(np.ceil((y2 + 1) * sy)), in_h)
    if right <= left or bottom <= top:
        return np.zeros((0, 0), bool), (0, 0)
    y_lo, y_hi, fy = bilinear_axis(in_h, mh, top, bottom - top)
    x_lo, x_hi, fx = bilinear_axis(in_w, mw, left, right - left)
    fx, fy = fx[None, :], fy[:, None]
    one = np.float32(1)
    upper = cropped[y_lo][:, x_lo] * (one - fx) + cropped[y_lo][:, x_hi] * fx
    lower = cropped[y_hi][:, x_lo] * (one - fx) + cropped[y_hi][:, x_hi] * fx
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
