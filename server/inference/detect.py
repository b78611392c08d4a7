"""Detection runner: the manifest's input contract, the .tflite, and the same decoding as
static/js/detector.js, so the API returns what the page draws.

Output formats (manifest ``outputs.format``):
  "nms"       NMS inside the graph (yolov5n): boxes [1,N,4] x1,y1,x2,y2 / input size, scores,
              classes, valid_detections; its IoU, score floor and row count are baked in.
  "yolo-raw"  raw head [1, 4+nc, A] (ultralytics): cx,cy,w,h in input pixels + class scores;
              decoded here, best class per anchor, class-agnostic NMS as the page runs it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..preprocess import prepare
from .base import ParameterError, Runner
from .nms import non_max_suppression

FORMATS = ("nms", "yolo-raw")
MAX_DET_LIMIT = 1000


@dataclass(frozen=True)
class DetectOptions:
    score: float
    iou: float
    max_det: int


class DetectRunner(Runner):
    task = "detect"

    def __init__(self, manifest: dict, folder: Path):
        super().__init__(manifest, folder)
        self.format = manifest.get("outputs", {}).get("format")
        if self.format not in FORMATS:
            raise ValueError(f"detector output format {self.format!r} is not one of {FORMATS}")
        self.labels = list(manifest.get("labels") or [])
        self.model = self.load_tflite(manifest["server"]["model"])
        self.defaults = nms_defaults(manifest)

    def options(self, score: float | None, iou: float | None, max_det: int | None) -> DetectOptions:
        """Request parameters -> options (already range-checked by the API), or ParameterError."""
        opts = DetectOptions(score=self.defaults["score"] if score is None else score,
                             iou=self.defaults["iou"] if iou is None else iou,
                             max_det=self.defaults["max_det"] if max_det is None else max_det)
        if self.format == "nms" and iou is not None and abs(iou - self.defaults["iou"]) > 1e-6:
            raise ParameterError("iou", f"model {self.id} runs NMS inside its graph at IoU "
                                        f"{self.defaults['iou']}; iou cannot be changed for it (omit it)")
        return opts

    def __call__(self, image: np.ndarray, opts: DetectOptions) -> dict:
        t0 = time.perf_counter()
        x, transform = prepare(image, self.manifest["input"])
        t1 = time.perf_counter()
        outputs = self.model.run1(x)
        t2 = time.perf_counter()
        height, width = image.shape[:2]
        if self.format == "nms":
            detections = self._decode_nms(outputs, transform, width, height, opts)
        else:
            detections = self._decode_raw(outputs, transform, width, height, opts)
        t3 = time.perf_counter()
        return {"model": self.id, "image": {"width": width, "height": height}, "detections": detections,
                "timing_ms": timing(t0, t1, t2, t3)}

    def _decode_nms(self, outputs, transform, width, height, opts: DetectOptions) -> list[dict]:
        _, in_h, in_w, _ = self.manifest["input"]["shape"]
        return decode_nms(outputs, (in_w, in_h), self.labels, transform, width, height, opts)

    def _decode_raw(self, outputs, transform, width, height, opts: DetectOptions) -> list[dict]:
        agnostic = self.manifest.get("nms", {}).get("agnostic", True) is not False
        return decode_raw(next(iter(outputs.values())), self.labels, transform, width, height, opts, agnostic)


def nms_defaults(manifest: dict) -> dict:
    """Page defaults (templates/detect.html: score 0.25, IoU 0.45, 100 boxes) unless the
    manifest says otherwise."""
    nms = manifest.get("nms") or {}
    return {"score": float(nms.get("score", 0.25)), "iou": float(nms.get("iou", 0.45)),
            "max_det": int(nms.get("max_det", 100))}


# ---------------------------------------------------------------------------- decoding, as static/js/detector.js

def _detection(labels, class_id: int, score: float, box, transform, width: int, height: int) -> dict:
    x1, y1, x2, y2 = (float(v) for v in transform.to_source(np.asarray(box, dtype=np.float64)))

    def clamp(v, hi):
        return min(max(v, 0.0), float(hi))

    label = labels[class_id] if 0 <= class_id < len(labels) else str(class_id)
    return {"class_id": int(class_id), "label": label, "score": float(score),
            "box": [clamp(x1, width), clamp(y1, height), clamp(x2, width), clamp(y2, height)]}


def decode_nms(outputs: dict, input_size: tuple[int, int], labels, transform, width, height,
               opts: DetectOptions) -> list[dict]:
    """detector.js decodeNms: the graph's rows up to valid_detections, score filter, max_det."""
    in_w, in_h = input_size
    boxes = outputs["boxes"].reshape(-1, 4).astype(np.float64)
    scores = outputs["scores"].reshape(-1)
    classes = outputs["classes"].reshape(-1)
    valid = int(np.asarray(outputs["valid_detections"]).reshape(-1)[0])
    detections = []
    for i in range(min(valid, len(scores))):
        if len(detections) >= opts.max_det:
            break
        if scores[i] < opts.score:
            continue
        b = boxes[i]
        detections.append(_detection(labels, int(np.round(classes[i])), scores[i],
                                     [b[0] * in_w, b[1] * in_h, b[2] * in_w, b[3] * in_h], transform, width, height))
    return detections


# detector.js shifts each class's boxes this far apart for per-class NMS in one call.
CLASS_SHIFT = np.float32(4096)


def decode_raw(raw: np.ndarray, labels, transform, width, height, opts: DetectOptions,
               agnostic: bool = True) -> list[dict]:
    """detector.js decodeRaw: [1, 4+nc, A] -> xyxy (float32) and best class per anchor, NMS
    (class-agnostic, or per class when the manifest says so: max_det * 4 candidates above the
    score), then score filter and max_det."""
    rows = np.asarray(raw, dtype=np.float32)[0].T  # [A, 4+nc]
    cx, cy, w, h = (rows[:, i] for i in range(4))
    half_w, half_h = w / np.float32(2), h / np.float32(2)
    xyxy = np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], 1)
    class_scores = rows[:, 4:]
    best = class_scores.max(1)
    best_class = class_scores.argmax(1)
    shifted = xyxy if agnostic else xyxy + best_class.astype(np.float32)[:, None] * CLASS_SHIFT
    kept = non_max_suppression(shifted[:, [1, 0, 3, 2]], best, opts.max_det * 4, opts.iou, opts.score)
    detections = []
    for i in kept:
        if len(detections) >= opts.max_det:
            break
        if best[i] < opts.score:
            continue
        detections.append(_detection(labels, int(best_class[i]), best[i], xyxy[i], transform, width, height))
    return detections


def timing(t0: float, t1: float, t2: float, t3: float) -> dict:
    return {"preprocess": round((t1 - t0) * 1e3, 3), "model": round((t2 - t1) * 1e3, 3),
            "postprocess": round((t3 - t2) * 1e3, 3)}
