"""Classification runner: the manifest's input contract (centre crop etc.), the .tflite, and
the page's top-k (modelcontract.decode: a "logits" output goes through softmax first)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from modelcontract.custom_classes import CLASS_SETS
from modelcontract.decode import (CLASSIFY_FORMATS, DEFAULT_TOP_K, class_count, class_probabilities,
                                  top_classes)
from modelcontract import ultralytics_litert
from modelcontract.geometry import prepare

from ..settings import Settings
from .base import Runner
from .detect import timing


class ClassifyRunner(Runner):
    task = "classify"

    def __init__(self, manifest: dict, folder: Path, settings: Settings | None = None):
        super().__init__(manifest, folder, settings)
        self.format = manifest.get("outputs", {}).get("format")
        if self.format not in CLASSIFY_FORMATS:
            raise ValueError(f"classifier output format {self.format!r} is not one of {CLASSIFY_FORMATS}")
        self.labels = list(manifest.get("labels") or [])
        server = manifest["server"]
        self.model = ultralytics_litert.wrap(self.load_tflite(server["model"]), manifest)
        # Concurrent requests share invokes (DATARAILROAD_BATCH, bench/server.py).
        self.model.batch(self.settings.batch, self.settings.batch_wait_ms / 1e3)
        self.output_key = server.get("output") if server.get("output") in self.model.output_keys \
            else self.model.output_keys[0]
        # The pooled feature vector, where the build has it (Teach: modelcontract.custom_classes).
        self.features_key = server.get("features") if server.get("features") in self.model.output_keys else None
        self.num_classes = class_count(manifest)
        self.defaults = {"top_k": min(DEFAULT_TOP_K, self.num_classes)}

    def __call__(self, image: np.ndarray, k: int | None = None, custom: dict | None = None) -> dict:
        """The page's top-k; with ``custom`` (your classes), also the page's match of them."""
        k = self.defaults["top_k"] if k is None else min(k, self.num_classes)
        t0 = time.perf_counter()
        x, _ = prepare(image, self.manifest["input"])
        t1 = time.perf_counter()
        outputs = self.model.run1(x)
        t2 = time.perf_counter()
        top = top_classes(class_probabilities(outputs[self.output_key], self.format), self.labels, k)
        height, width = image.shape[:2]
        result = {"model": self.id, "image": {"width": width, "height": height}, "top": top}
        if custom is not None:
            result["custom"] = CLASS_SETS.match(outputs[self.features_key].reshape(-1).tolist(), custom)
        result["timing_ms"] = timing(t0, t1, t2, time.perf_counter())
        return result
