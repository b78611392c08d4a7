"""An Ultralytics LiteRT .tflite (``format="litert"``) in the converter's layout: the twin of
static/js/contract/ultralytics_litert.js (static/js/tensor/ultralytics-graph.js applies it).

Ultralytics' LiteRT export takes an NCHW input and gives the boxes (and pose keypoints) as
fractions of the input size and segmentation prototypes as NCHW; the converter's graphs take
NHWC and give input pixels and NHWC prototypes, which modelcontract.decode reads. A manifest
whose ``graph`` is ``"ultralytics-litert"`` has such a .tflite; ``Layout`` moves between the two
around any runner with ``run1(x) -> {name: array}``.
"""
from __future__ import annotations

import numpy as np

GRAPH = "ultralytics-litert"


def head_scale(rows: int, size: tuple[int, int], nc: int, kpt_shape=None) -> np.ndarray:
    """The head's scale per row [rows]: x rows by the input width, y rows by its height, the
    rest 1. Rows: cx, cy, w, h, nc class scores, then the task's (k keypoints of d values)."""
    height, width = size
    scale = np.ones(rows, np.float32)
    scale[:4] = (width, height, width, height)
    if kpt_shape:
        k, d = kpt_shape
        start = 4 + nc
        scale[start:start + k * d:d] = width
        scale[start + 1:start + k * d:d] = height
    return scale


def to_nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def converter_outputs(outputs: dict, size: tuple[int, int], nc: int, kpt_shape=None) -> dict:
    """The file's outputs {name: array} -> the converter's, same names: a detector's head (rank
    3) in input pixels and its prototypes (rank 4) NHWC; a classifier's as they are."""
    out = {}
    for name, value in outputs.items():
        value = np.asarray(value)
        if value.ndim == 3:
            value = value * head_scale(value.shape[1], size, nc, kpt_shape)[None, :, None]
        elif value.ndim == 4:
            value = value.transpose(0, 2, 3, 1)
        out[name] = value
    return out


class Layout:
    """``model`` (run1 on NCHW) seen as a converter-layout model (run1 on NHWC)."""

    def __init__(self, model, manifest: dict):
        self.model = model
        _, height, width, _ = manifest["input"]["shape"]
        self.size = (height, width)
        self.nc = len(manifest.get("labels") or [])
        self.kpt_shape = manifest.get("kpt_shape")

    @property
    def output_keys(self) -> list:
        return self.model.output_keys

    def batch(self, *args) -> None:
        self.model.batch(*args)

    def run1(self, x: np.ndarray) -> dict:
        return converter_outputs(self.model.run1(to_nchw(x)), self.size, self.nc, self.kpt_shape)


def wrap(model, manifest: dict):
    """``model`` as the decode expects it: itself, or its ``Layout`` for an Ultralytics file."""
    return Layout(model, manifest) if manifest.get("graph") == GRAPH else model
