"""A dense model's output -> a map of the photo, as Ultralytics' predictors make it; the twin of
static/js/contract/dense.js (tests/unit/test_dense_twin.py holds the two together).

  "yolo-semantic"  class logits [1, h, w, nc] over the letterboxed input: cropped to the
                   letterbox's content, resized to the photo (bilinear, half-pixel), argmax ->
                   a class map (uint8, one class id a pixel)
  "yolo-depth"     a depth map [1, h, w, 1] over the stretched input: resized to the photo
                   (bilinear, align_corners, as the depth predictor does) -> float32 depth

The API sends a map compactly (``encode_map``): a class map as an 8-bit greyscale PNG whose
values are the class ids; a depth map as a 16-bit greyscale PNG, depth = min + value *
(max - min) / 65535. Both decode with any PNG reader (``decode_map`` here).
"""
from __future__ import annotations

import base64

import cv2
import numpy as np

from .geometry import Transform, resize_bilinear

DENSE_FORMATS = ("yolo-semantic", "yolo-depth")
DEPTH_LEVELS = 65535  # a 16-bit PNG's largest value
MAX_CV_CHANNELS = 512  # OpenCV's CV_CN_MAX


def class_map(logits: np.ndarray, transform: Transform, width: int, height: int) -> np.ndarray:
    """[1, h, w, nc] logits over a letterboxed input -> the photo's class map [height, width]
    (uint8). The letterbox's content is [top, top + rows) x [left, left + cols) of the input."""
    rows, cols = round(transform.scale_y * height), round(transform.scale_x * width)
    top, left = int(transform.offset_y), int(transform.offset_x)
    content = np.ascontiguousarray(logits[0, top:top + rows, left:left + cols], np.float32)
    # OpenCV's half-pixel resize is resize_bilinear's within float32 rounding (4e-6 on logits)
    # and 25x faster; it takes at most 512 channels.
    resized = cv2.resize(content, (width, height), interpolation=cv2.INTER_LINEAR) \
        if content.shape[-1] <= MAX_CV_CHANNELS else resize_bilinear(content, height, width)
    # argmax, ties to the lower class as numpy and tf.argMax take them
    return np.argmax(resized.reshape(height, width, -1), axis=-1).astype(np.uint8)


def align_corners_axis(out_size: int, in_size: int):
    """Source neighbours (lo, hi) and weight of hi for each output index of an align_corners
    resize of one axis (= dense.js's tf.image.resizeBilinear(..., alignCorners=true))."""
    step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    pos = np.arange(out_size, dtype=np.float64) * step
    lo = np.minimum(np.floor(pos).astype(np.int64), in_size - 1)
    hi = np.minimum(lo + 1, in_size - 1)
    return lo, hi, (pos - lo).astype(np.float32)


def depth_map(depth: np.ndarray, width: int, height: int) -> np.ndarray:
    """[1, h, w, 1] depth over a stretched input -> the photo's depth [height, width] (float32)."""
    src = np.asarray(depth, np.float32)[0, :, :, 0]
    y0, y1, fy = align_corners_axis(height, src.shape[0])
    x0, x1, fx = align_corners_axis(width, src.shape[1])
    rows = src[y0] * (1 - fy)[:, None] + src[y1] * fy[:, None]
    return rows[:, x0] * (1 - fx)[None, :] + rows[:, x1] * fx[None, :]


def semantic_summary(classes: np.ndarray, labels: list) -> dict:
    """The classes a class map holds, most pixels first: {width, height, classes: [{class_id,
    label, pixels, share}]}."""
    counts = np.bincount(classes.ravel(), minlength=len(labels))
    order = sorted((int(c) for c in np.flatnonzero(counts)), key=lambda c: (-int(counts[c]), c))
    return {"width": int(classes.shape[1]), "height": int(classes.shape[0]),
            "classes": [{"class_id": c, "label": labels[c] if c < len(labels) else str(c),
                         "pixels": int(counts[c]), "share": round(float(counts[c]) / classes.size, 6)}
                        for c in order]}


def depth_summary(depth: np.ndarray) -> dict:
    """{width, height, min, max, mean} of a depth map."""
    return {"width": int(depth.shape[1]), "height": int(depth.shape[0]), "min": float(depth.min()),
            "max": float(depth.max()), "mean": float(depth.mean())}


def decode_dense(fmt: str, outputs: dict, transform: Transform, width: int, height: int) -> np.ndarray:
    """The map of a dense model's one output (``outputs``: {name: array})."""
    (value,) = outputs.values()
    if fmt == "yolo-semantic":
        return class_map(np.asarray(value), transform, width, height)
    if fmt == "yolo-depth":
        return depth_map(value, width, height)
    raise ValueError(f"dense output format {fmt!r} is not one of {DENSE_FORMATS}")


def result(fmt: str, values: np.ndarray, labels: list) -> dict:
    """The result's "semantic" or "depth" entry, its map encoded (``encode_map``)."""
    if fmt == "yolo-semantic":
        return {"semantic": {**semantic_summary(values, labels), "map": encode_map(values)}}
    summary = depth_summary(values)
    return {"depth": {**summary, "map": encode_map(values, summary["min"], summary["max"])}}


def encode_map(values: np.ndarray, low: float | None = None, high: float | None = None) -> dict:
    """A class map (uint8) as an 8-bit PNG, a depth map (float) as a 16-bit PNG spanning
    [low, high]: {"encoding": "png" | "png16", "data": base64}."""
    if values.dtype == np.uint8:
        return {"encoding": "png", "data": _png(values)}
    span = (high - low) or 1.0
    levels = np.rint((values - low) * (DEPTH_LEVELS / span)).clip(0, DEPTH_LEVELS).astype(np.uint16)
    return {"encoding": "png16", "data": _png(levels)}


def decode_map(entry: dict) -> np.ndarray:
    """A result's "semantic" or "depth" entry -> its map (uint8 class ids, or float32 depth)."""
    encoded = entry["map"]
    values = cv2.imdecode(np.frombuffer(base64.b64decode(encoded["data"]), np.uint8), cv2.IMREAD_UNCHANGED)
    if encoded["encoding"] == "png":
        return values
    span = entry["max"] - entry["min"]
    return (entry["min"] + values.astype(np.float64) * (span / DEPTH_LEVELS)).astype(np.float32)


def _png(values: np.ndarray) -> str:
    ok, data = cv2.imencode(".png", values)
    if not ok:
        raise ValueError("the map could not be encoded as PNG")
    return base64.b64encode(data.tobytes()).decode("ascii")
