"""Reading every output format a manifest names (``outputs.format``), as the pages do
(static/js/contract/decode.js, static/js/pages/classify.js), so the API returns what a page shows.

Detectors:
  "nms"       NMS inside the graph (yolov5n): boxes [1,N,4] x1,y1,x2,y2 / input size, scores,
              classes, valid_detections; its IoU, score floor and row count are baked in.
  "yolo-raw"  raw head [1, 4+nc, A] (ultralytics): cx,cy,w,h in input pixels + class scores;
              best class per anchor, NMS (class-agnostic unless the manifest's nms.agnostic
              is false) as the page runs it.
Classifiers:
  "probabilities"  scores as they are;  "logits"  softmax first.

The class filter (``classes``: only these class ids) is one rule for both detector formats
and both languages: a box of another class is no candidate at all. For "yolo-raw" it is
dropped before NMS, so it neither suppresses a wanted box nor uses up one of the max_det
places; the in-graph NMS of "nms" has already run, so there its rows are skipped before the
max_det cut.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .boxes import non_max_suppression
from .limits import DEFAULT_IOU, DEFAULT_MAX_DET, DEFAULT_SCORE
from .scores import softmax, top_k

DETECT_FORMATS = ("nms", "yolo-raw")
CLASSIFY_FORMATS = ("probabilities", "logits")
NMS_KEYS = ("boxes", "scores", "classes", "valid_detections")
DEFAULT_TOP_K = 5
# decode.js shifts each class's boxes this far apart for per-class NMS in one call.
CLASS_SHIFT = np.float32(4096)


@dataclass(frozen=True)
class DetectOptions:
    score: float
    iou: float
    max_det: int
    classes: frozenset[int] | None = None  # only these class ids; None or empty: all


def nms_defaults(manifest: dict) -> dict:
    """score / iou / max_det: the manifest's ``nms`` values, else the page's defaults (limits)."""
    nms = manifest.get("nms") or {}
    return {"score": float(nms.get("score", DEFAULT_SCORE)), "iou": float(nms.get("iou", DEFAULT_IOU)),
            "max_det": int(nms.get("max_det", DEFAULT_MAX_DET))}


def label_of(labels, class_id: int) -> str:
    return labels[class_id] if 0 <= class_id < len(labels) else str(class_id)


def _wanted(opts: DetectOptions, class_id: int) -> bool:
    return not opts.classes or class_id in opts.classes


def detection(labels, class_id: int, score: float, box, transform, width: int, height: int) -> dict:
    """One result row: the input-pixel box mapped to the source image and clamped to it."""
    x1, y1, x2, y2 = (float(v) for v in transform.to_source(np.asarray(box, dtype=np.float64)))

    def clamp(v, hi):
        return min(max(v, 0.0), float(hi))

    return {"class_id": int(class_id), "label": label_of(labels, class_id), "score": float(score),
            "box": [clamp(x1, width), clamp(y1, height), clamp(x2, width), clamp(y2, height)]}


def nms_rows(outputs: dict, input_size: tuple[int, int]) -> dict:
    """An in-graph-NMS detector's valid rows: {"boxes": [n, 4] x1,y1,x2,y2 in input pixels
    (float64), "scores": [n], "classes": [n] (int)}. ``outputs`` by key (NMS_KEYS),
    ``input_size`` (width, height)."""
    in_w, in_h = input_size
    scores = np.asarray(outputs["scores"]).reshape(-1)
    n = min(int(np.asarray(outputs["valid_detections"]).reshape(-1)[0]), len(scores))
    boxes = np.asarray(outputs["boxes"]).reshape(-1, 4)[:n].astype(np.float64) * [in_w, in_h, in_w, in_h]
    classes = np.round(np.asarray(outputs["classes"]).reshape(-1)[:n]).astype(int)
    return {"boxes": boxes, "scores": scores[:n], "classes": classes}


def decode_nms(outputs: dict, input_size: tuple[int, int], labels, transform, width, height,
               opts: DetectOptions) -> list[dict]:
    """decode.js decodeNms: the graph's rows up to valid_detections, score and class
    filter, max_det."""
    rows = nms_rows(outputs, input_size)
    detections = []
    for box, score, class_id in zip(rows["boxes"], rows["scores"], rows["classes"]):
        if len(detections) >= opts.max_det:
            break
        if score < opts.score or not _wanted(opts, int(class_id)):
            continue
        detections.append(detection(labels, int(class_id), score, box, transform, width, height))
    return detections


def decode_raw(raw: np.ndarray, labels, transform, width, height, opts: DetectOptions,
               agnostic: bool = True) -> list[dict]:
    """decode.js decodeRaw: [1, 4+nc, A] -> xyxy (float32) and best class per anchor; anchors
    of unwanted classes dropped; NMS (class-agnostic, or per class) keeping up to max_det boxes
    above the score."""
    rows = np.asarray(raw, dtype=np.float32)[0].T  # [A, 4+nc]
    class_scores = rows[:, 4:]
    best = class_scores.max(1)
    best_class = class_scores.argmax(1)
    cx, cy, w, h = (rows[:, i] for i in range(4))
    half_w, half_h = w / np.float32(2), h / np.float32(2)
    xyxy = np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], 1)
    if opts.classes:
        wanted = np.flatnonzero(np.isin(best_class, list(opts.classes)))
        xyxy, best, best_class = xyxy[wanted], best[wanted], best_class[wanted]
    shifted = xyxy if agnostic else xyxy + best_class.astype(np.float32)[:, None] * CLASS_SHIFT
    kept = non_max_suppression(shifted[:, [1, 0, 3, 2]], best, opts.max_det, opts.iou, opts.score)
    return [detection(labels, int(best_class[i]), best[i], xyxy[i], transform, width, height) for i in kept]


def decode_detections(fmt: str, outputs: dict, manifest: dict, transform, width: int, height: int,
                      opts: DetectOptions) -> list[dict]:
    """A detector's outputs ({name or key: array}) in the manifest's format -> result rows."""
    labels = list(manifest.get("labels") or [])
    if fmt == "nms":
        _, in_h, in_w, _ = manifest["input"]["shape"]
        return decode_nms(outputs, (in_w, in_h), labels, transform, width, height, opts)
    if fmt == "yolo-raw":
        agnostic = (manifest.get("nms") or {}).get("agnostic", True) is not False
        return decode_raw(next(iter(outputs.values())), labels, transform, width, height, opts, agnostic)
    raise ValueError(f"detector output format {fmt!r} is not one of {DETECT_FORMATS}")


def class_count(manifest: dict) -> int:
    """The classifier's output size (its first output tensor), else its label count."""
    tensors = (manifest.get("outputs") or {}).get("tensors")
    return int(np.prod(tensors[0]["shape"][1:])) if tensors else len(manifest.get("labels") or [])


def class_probabilities(values: np.ndarray, fmt: str) -> np.ndarray:
    """A classifier's output in the manifest's format -> probabilities (float64, flat)."""
    if fmt not in CLASSIFY_FORMATS:
        raise ValueError(f"classifier output format {fmt!r} is not one of {CLASSIFY_FORMATS}")
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    return softmax(values) if fmt == "logits" else values


def top_classes(probabilities: np.ndarray, labels, k: int) -> list[dict]:
    """classify.js's top-k rows: value descending, equal values by index."""
    return [{"class_id": i, "label": label_of(labels, i), "probability": float(probabilities[i])}
            for i in top_k(probabilities, k)]
