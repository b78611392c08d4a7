"""Detection runner: the manifest's input contract, the .tflite, and the decoding of
modelcontract.decode (the same as static/js/tensor/decode.js and contract/decode.js), so the API returns what the page
draws. A dense model (semantic segmentation, depth) on the detect page runs here too: no
detections, its map (modelcontract.dense, the twin of dense.js) encoded beside them."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from modelcontract import dense, ultralytics_litert
from modelcontract.decode import DETECT_FORMATS, DetectOptions, decode_detections, nms_defaults
from modelcontract.geometry import prepare

from ..settings import Settings
from .base import Runner, parameter_error


class DetectRunner(Runner):
    task = "detect"

    def __init__(self, manifest: dict, folder: Path, settings: Settings | None = None):
        super().__init__(manifest, folder, settings)
        self.format = manifest.get("outputs", {}).get("format")
        if self.format not in DETECT_FORMATS + dense.DENSE_FORMATS:
            raise ValueError(f"detector output format {self.format!r} is not one of "
                             f"{DETECT_FORMATS + dense.DENSE_FORMATS}")
        self.labels = list(manifest.get("labels") or [])
        self.model = ultralytics_litert.wrap(self.load_tflite(manifest["server"]["model"]), manifest)
        self.defaults = nms_defaults(manifest)

    def options(self, score: float | None, iou: float | None, max_det: int | None,
                classes: frozenset[int] | None = None) -> DetectOptions:
        """Request parameters -> options (already range-checked by the API), or a 400 Problem."""
        opts = DetectOptions(score=self.defaults["score"] if score is None else score,
                             iou=self.defaults["iou"] if iou is None else iou,
                             max_det=self.defaults["max_det"] if max_det is None else max_det,
                             classes=classes or None)
        if self.format == "nms" and iou is not None and abs(iou - self.defaults["iou"]) > 1e-6:
            raise parameter_error(f"model {self.id} runs NMS inside its graph at IoU "
                                  f"{self.defaults['iou']}; iou cannot be changed for it (omit it)")
        return opts

    def __call__(self, image: np.ndarray, opts: DetectOptions) -> dict:
        t0 = time.perf_counter()
        x, transform = prepare(image, self.manifest["input"])
        t1 = time.perf_counter()
        outputs = self.model.run1(x)
        t2 = time.perf_counter()
        height, width = image.shape[:2]
        if self.format in dense.DENSE_FORMATS:
            values = dense.decode_dense(self.format, outputs, transform, width, height)
            found = {"detections": [], **dense.result(self.format, values, self.labels)}
        else:
            found = {"detections": decode_detections(self.format, outputs, self.manifest, transform, width, height,
                                                     opts)}
        t3 = time.perf_counter()
        return {"model": self.id, "image": {"width": width, "height": height}, **found,
                "timing_ms": timing(t0, t1, t2, t3)}


    def dense_map(self, image: np.ndarray) -> np.ndarray:
        """A dense model's map of ``image`` (modelcontract.dense): what __call__ encodes."""
        x, transform = prepare(image, self.manifest["input"])
        height, width = image.shape[:2]
        return dense.decode_dense(self.format, self.model.run1(x), transform, width, height)


def timing(t0: float, t1: float, t2: float, t3: float) -> dict:
    return {"preprocess": round((t1 - t0) * 1e3, 3), "model": round((t2 - t1) * 1e3, 3),
            "postprocess": round((t3 - t2) * 1e3, 3)}
