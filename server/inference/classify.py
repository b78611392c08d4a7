"""Classification runner: the manifest's input contract (centre crop etc.), the .tflite, and
the page's top-k (modelcontract.decode: a "logits" output goes through softmax first)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from modelcontract.decode import (CLASSIFY_FORMATS, DEFAULT_TOP_K, class_count, class_probabilities,
                                  top_classes)
from modelcontract.geometry import prepare

from .base import Runner
from .detect import timing


class ClassifyRunner(Runner):
    task = "classify"

    def __init__(self, manifest: dict, folder: Path):
        super().__init__(manifest, folder)
        self.format = manifest.get("outputs", {}).get("format")
        if self.format not in CLASSIFY_FORMATS:
            raise ValueError(f"classifier output format {self.format!r} is not one of {CLASSIFY_FORMATS}")
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
        values = self.model.run1(x)[self.output_key]
        t2 = time.perf_counter()
        top = top_classes(class_probabilities(values, self.format), self.labels, k)
        t3 = time.perf_counter()
        height, width = image.shape[:2]
        return {"model": self.id, "image": {"width": width, "height": height}, "top": top,
                "timing_ms": timing(t0, t1, t2, t3)}
