"""The manifest's ``input`` contract, implemented once in numpy.

The browser (static/js/geometry.js) does the same arithmetic with tf.image.resizeBilinear
(halfPixelCenters=true, no antialiasing), so page, API and converter parity agree.

Input spec (manifest["input"]):
    shape      [1, H, W, 3], layout NHWC, dtype float32, color RGB
    resize     "letterbox" | "center-crop" | "stretch"
    pad_value  letterbox fill, in 0..255 pixel units
    crop_fraction  centre-crop: the crop is this fraction of the shorter resized side
    scale, mean, std   value = (pixel * scale - mean) / std, per channel
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Transform:
    """Maps model-input pixel coordinates back to source-image pixels."""
    scale_x: float
    scale_y: float
    offset_x: float
    offset_y: float

    def to_source(self, xy: np.ndarray) -> np.ndarray:
        xy = np.asarray(xy, dtype=np.float64).copy()
        xy[..., 0::2] = (xy[..., 0::2] - self.offset_x) / self.scale_x
        xy[..., 1::2] = (xy[..., 1::2] - self.offset_y) / self.scale_y
        return xy


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize with half-pixel centres and no antialiasing (= tf.image.resizeBilinear
    with halfPixelCenters=true in TF.js). ``image``: HxWxC, returns float32."""
    src = np.asarray(image)
    in_h, in_w = src.shape[:2]
    if (in_h, in_w) == (height, width):
        return src.astype(np.float32)

    def axis(out_size: int, in_size: int):
        pos = (np.arange(out_size, dtype=np.float64) + 0.5) * (in_size / out_size) - 0.5
        pos = np.clip(pos, 0, None)
        lo = np.minimum(np.floor(pos).astype(np.int64), in_size - 1)
        hi = np.minimum(lo + 1, in_size - 1)
        return lo, hi, (pos - lo).astype(np.float32)

    y0, y1, fy = axis(height, in_h)
    x0, x1, fx = axis(width, in_w)
    # The four neighbours are gathered in the source dtype and only then cast: the same
    # float32 values as casting the whole image first, without a float copy of a large photo.
    # In-place float32 arithmetic below: the same operations in the same order.
    rows0, rows1 = src[y0], src[y1]
    wx0, wx1 = (1 - fx)[None, :, None], fx[None, :, None]

    def lerp_x(rows):
        left = np.take(rows, x0, axis=1).astype(np.float32)
        right = np.take(rows, x1, axis=1).astype(np.float32)
        left *= wx0
        right *= wx1
        left += right
        return left

    top, bottom = lerp_x(rows0), lerp_x(rows1)
    top *= (1 - fy)[:, None, None]
    bottom *= fy[:, None, None]
    top += bottom
    return top


def round_half_up(value: float) -> int:
    """JavaScript's Math.round (Python's round() rounds halves to even)."""
    return int(np.floor(value + 0.5))


def letterbox_geometry(src_w: int, src_h: int, dst_w: int, dst_h: int):
    """Scale and integer offsets of a centred letterbox (identical in geometry.js)."""
    scale = min(dst_w / src_w, dst_h / src_h)
    new_w = max(1, round_half_up(src_w * scale))
    new_h = max(1, round_half_up(src_h * scale))
    left = (dst_w - new_w) // 2
    top = (dst_h - new_h) // 2
    return new_w, new_h, left, top


def center_crop_geometry(src_w: int, src_h: int, dst_w: int, dst_h: int, crop_fraction: float):
    """Resize so the crop window (dst / crop_fraction) fits the shorter side, then crop the centre."""
    scale = max(dst_w / crop_fraction / src_w, dst_h / crop_fraction / src_h)
    new_w = max(dst_w, round_half_up(src_w * scale))
    new_h = max(dst_h, round_half_up(src_h * scale))
    left = (new_w - dst_w) // 2
    top = (new_h - dst_h) // 2
    return new_w, new_h, left, top


def prepare(image_rgb: np.ndarray, spec: dict) -> tuple[np.ndarray, Transform]:
    """uint8 HxWx3 RGB -> model input [1,H,W,3] float32 and the inverse transform."""
    _, dst_h, dst_w, _ = spec["shape"]
    src_h, src_w = image_rgb.shape[:2]
    resize = spec.get("resize", "stretch")
    if resize == "letterbox":
        new_w, new_h, left, top = letterbox_geometry(src_w, src_h, dst_w, dst_h)
        canvas = np.full((dst_h, dst_w, 3), float(spec.get("pad_value", 0)), dtype=np.float32)
        canvas[top:top + new_h, left:left + new_w] = resize_bilinear(image_rgb, new_h, new_w)
        pixels = canvas
        transform = Transform(new_w / src_w, new_h / src_h, left, top)
    elif resize == "center-crop":
        new_w, new_h, left, top = center_crop_geometry(src_w, src_h, dst_w, dst_h,
                                                       float(spec.get("crop_fraction", 1.0)))
        pixels = resize_bilinear(image_rgb, new_h, new_w)[top:top + dst_h, left:left + dst_w]
        transform = Transform(new_w / src_w, new_h / src_h, -left, -top)
    elif resize == "stretch":
        pixels = resize_bilinear(image_rgb, dst_h, dst_w)
        transform = Transform(dst_w / src_w, dst_h / src_h, 0.0, 0.0)
    else:
        raise ValueError(f"unknown resize method {resize!r}")
    scale = np.float32(spec.get("scale", 1.0))
    mean = np.asarray(spec.get("mean", [0.0, 0.0, 0.0]), dtype=np.float32)
    std = np.asarray(spec.get("std", [1.0, 1.0, 1.0]), dtype=np.float32)
    values = pixels * scale  # then in place: (pixel * scale - mean) / std
    if mean.any():  # x - 0 and x / 1 are exact: skip those passes
        values -= mean
    if (std != 1).any():
        values /= std
    return values[None].astype(np.float32, copy=False), transform
