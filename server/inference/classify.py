"""Classification runner: the manifest's input contract (centre crop etc.), the .tflite, and
the page's top-k (static/js/classify.js: value descending, equal values by index; a
"logits" output goes through softmax first)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..preprocess import prepare
from .base import Runner
from .detect import timing

FORMATS = ("probabilities", "logits")
DEFAULT_TOP_K = 5


def softmax(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    exps = np.exp(values - values.max())
    return exps / exps.sum()


def top_k(values: np.ndarray, k: int) -> list[int]:
    order = np.lexsort((np.arange(len(values)), -np.asarray(values, dtype=np.float64)))
    return [int(i) for i in order[:k]]


def class_count(manifest: dict) -> int:
    """The classifier's output size (its first output tensor), else its label count."""
    tensors = (manifest.get("outputs") or {}).get("tensors")
    return int(np.prod(tensors[0]["shape"][1:])) if tensors else len(manifest.get("labels") or [])


class ClassifyRunner(Runner):
    task = "classify"

    def __init__(self, manifest: dict, folder: Path):
        super().__init__(manifest, folder)
        self.format = manifest.get("outputs", {}).get("format")
        if self.format not in FORMATS:
            raise ValueError(f"classifier output format {self.format!r} is not one of {FORMATS}")
        self.labels = list(manifest.get("labels") or [])
        server = manifest["server"]
        self.model = self.load_tflite(server["model"])
        self.model.batch()  # concurrent requests share invokes (DATARAILROAD_BATCH, bench/server.py)
        self.output_key = server.get("output") if server.get("output") in self.model.output_keys \
            else self.model.output_keys[0]
        self.num_classes = class_count(manifest)
        self.defaults = {"top_k": min(DEFAULT_TOP_K, self.num_classes)}

    def __call__(self, image: np.ndarray, k: int | None = None) -> dict:
        k = self.defaults["top_k"] if k is None else min(k, self.num_classes)
        t0 = time.perf_counter()
        x, _ = prepare(image, self.manifest["input"])
        t1 = time.perf_counter()
        values = self.model.run1(x)[self.output_key].reshape(-1).astype(np.float64)
        t2 = time.perf_counter()
        if self.format == "logits":
            values = softmax(values)
        top = [{"class_id": i, "label": self.labels[i] if i < len(self.labels) else str(i),
                "probability": float(values[i])} for i in top_k(values, k)]
        t3 = time.perf_counter()
        height, width = image.shape[:2]
        return {"model": self.id, "image": {"width": width, "height": height}, "top": top,
                "timing_ms": timing(t0, t1, t2, t3)}
