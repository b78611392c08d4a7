"""The manifest's ``input`` contract (resize, letterbox, centre crop, normalise), implemented
once in numpy for the server, the converters' parity checks, tests and benches.

The browser (static/js/contract/geometry.js) does the same arithmetic with tf.image.resizeBilinear
(halfPixelCenters=true, no antialiasing), so page, API and converter parity agree.

Input spec (manifest["input"]):
    shape      [1, H, W, 3], layout NHWC, dtype float32, color RGB
    resize     "letterbox" | "center-crop" | "stretch"
    pad_value  letterbox fill, in 0..255 pixel units
    crop_fraction  centre-crop: the crop is this fraction of the shorter resized side
    scale, mean, std   value = (pixel * scale - mean) / std, per channel

Work and memory are proportional to the model input, not to the resized image: the centre
crop computes only the pixels inside the crop (a 600x1 image would otherwise be resized to
134400x224 first). Only the source image itself is read in full.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

# OpenCV's float32 INTER_LINEAR resize uses the same half-pixel rule (no antialiasing, edges
# clamped); it differs from resize_bilinear only in rounding the sample positions to float32
# (5e-5 on 0..255 values for photos, under 0.02 at worst: tests/unit/test_preprocess.py) and is
# several times faster.
# It needs a float32 copy of the whole source (12 bytes a pixel), so it is used up to this
# many source pixels (48 MB); larger images take resize_bilinear, whose memory is that of
# the output.
FAST_RESIZE_MAX_PIXELS = 4_000_000


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


def bilinear_axis(out_size: int, in_size: int, start: int = 0, count: int | None = None):
    """Source neighbours (lo, hi) and weight of hi for output indices start..start+count-1 of
    a half-pixel resize of one axis from in_size to out_size (= geometry.js bilinearAxis)."""
    count = out_size - start if count is None else count
    pos = (np.arange(start, start + count, dtype=np.float64) + 0.5) * (in_size / out_size) - 0.5
    pos = np.clip(pos, 0, None)
    lo = np.minimum(np.floor(pos).astype(np.int64), in_size - 1)
    hi = np.minimum(lo + 1, in_size - 1)
    return lo, hi, (pos - lo).astype(np.float32)


def resize_bilinear(image: np.ndarray, height: int, width: int,
                    window: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """Bilinear resize with half-pixel centres and no antialiasing (= tf.image.resizeBilinear
    with halfPixelCenters=true in TF.js). ``image``: HxWxC, returns float32.

    ``window`` = (top, left, rows, cols): only that part of the height x width result is
    computed, so work and memory follow the window, not the resized image."""
    src = np.asarray(image)
    in_h, in_w = src.shape[:2]
    top, left, rows, cols = window or (0, 0, height, width)
    if (in_h, in_w) == (height, width):
        return src[top:top + rows, left:left + cols].astype(np.float32)

    y0, y1, fy = bilinear_axis(height, in_h, top, rows)
    x0, x1, fx = bilinear_axis(width, in_w, left, cols)
    # The four neighbours are gathered (output-sized) in the source dtype and only then cast:
    # the same float32 values as casting the whole image first, without a float copy of a
    # large photo. In-place float32 arithmetic below: the same operations in the same order.
    wx0, wx1 = (1 - fx)[None, :, None], fx[None, :, None]

    def lerp_x(ys):
        left_px = src[ys[:, None], x0[None, :]].astype(np.float32)
        right_px = src[ys[:, None], x1[None, :]].astype(np.float32)
        left_px *= wx0
        right_px *= wx1
        left_px += right_px
        return left_px

    upper, lower = lerp_x(y0), lerp_x(y1)
    upper *= (1 - fy)[:, None, None]
    lower *= fy[:, None, None]
    upper += lower
    return upper


def resize_fast(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """resize_bilinear of a whole image, with OpenCV when the source is small enough
    (see FAST_RESIZE_MAX_PIXELS)."""
    in_h, in_w = image.shape[:2]
    if in_h * in_w > FAST_RESIZE_MAX_PIXELS or (in_h, in_w) == (height, width) or image.shape[2] != 3:
        return resize_bilinear(image, height, width)
    return cv2.resize(image.astype(np.float32), (width, height), interpolation=cv2.INTER_LINEAR)


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
        canvas[top:top + new_h, left:left + new_w] = resize_fast(image_rgb, new_h, new_w)
        pixels = canvas
        transform = Transform(new_w / src_w, new_h / src_h, left, top)
    elif resize == "center-crop":
        new_w, new_h, left, top = center_crop_geometry(src_w, src_h, dst_w, dst_h,
                                                       float(spec.get("crop_fraction", 1.0)))
        # Crop first: only the dst_h x dst_w window of the new_h x new_w resize is computed.
        pixels = resize_bilinear(image_rgb, new_h, new_w, window=(top, left, dst_h, dst_w))
        transform = Transform(new_w / src_w, new_h / src_h, -left, -top)
    elif resize == "stretch":
        pixels = resize_fast(image_rgb, dst_h, dst_w)
        transform = Transform(dst_w / src_w, dst_h / src_h, 0.0, 0.0)
    else:
        raise ValueError(f"unknown resize method {resize!r}")
    scale = np.float32(spec.get("scale", 1.0))
    mean = np.asarray(spec.get("mean", [0.0, 0.0, 0.0]), dtype=np.float32)
    std = np.asarray(spec.get("std", [1.0, 1.0, 1.0]), dtype=np.float32)
    # (pixel * scale - mean) / std, in place: pixels is a fresh float32 array of the model
    # input's size. x * 1, x - 0 and x / 1 are exact: those passes are skipped.
    values = pixels
    if scale != 1:
        values *= scale
    if mean.any():
        values -= mean
    if (std != 1).any():
        values /= std
    return values[None].astype(np.float32, copy=False), transform


# ---- The answer-check pattern (modelcontract/answers.py; geometry.js checkPattern) ----
# A scene a page can draw without any file: a colour ramp with two dark-centred discs, in
# integer arithmetic only, so Python and JavaScript make the same bytes. YOLOv5n finds two
# "frisbee"s in it at 640 px (0.51, 0.33) and one at 320 px (0.49), all well clear of its 0.25
# score floor, so a detector's check compares real boxes, not only empty rows.
CHECK_PATTERN = "discs-v1"
CHECK_DISCS = ((4, 4, 3, (230, 40, 40)), (12, 12, 3, (250, 250, 250)))  # centre x, y, radius in 1/16 of the side
CHECK_CORE = (20, 20, 20)


def check_pattern(height: int, width: int) -> np.ndarray:
    """The answer-check scene as uint8 height x width x 3 RGB (= geometry.js checkPattern)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.int64)
    image = np.empty((height, width, 3), np.int64)
    image[..., 0] = 96 + (x * 64) // width
    image[..., 1] = 128
    image[..., 2] = 96 + (y * 64) // height
    side = min(width, height)
    for cx, cy, r, colour in CHECK_DISCS:
        dx, dy = x * 16 - cx * width, y * 16 - cy * height
        d2, r2 = dx * dx + dy * dy, (r * side) ** 2
        image[d2 < r2] = colour
        image[d2 * 4 < r2] = CHECK_CORE
    return image.astype(np.uint8)
