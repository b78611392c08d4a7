"""Reading every output format a manifest names (``outputs.format``), as the pages do
(static/js/contract/decode.js, static/js/pages/classify.js), so the API returns what a page shows.

Detectors:
  "nms"       NMS inside the graph (yolov5n): boxes [1,N,4] x1,y1,x2,y2 / input size, scores,
              classes, valid_detections; its IoU, score floor and row count are baked in.
  "yolo-raw"  raw head [1, 4+nc, A] (ultralytics): cx,cy,w,h in input pixels + class scores;
              best class per anchor, NMS (class-agnostic unless the manifest's nms.agnostic
              is false) as the page runs it.
  "yolo-seg"  the same head with nm mask coefficients after the scores, [1, 4+nc+nm, A], and
              prototypes [1, mh, mw, nm]: each row gets "polygons" (modelcontract.masks).
  "yolo-pose" keypoints after the scores, [1, 4+nc+k*d, A] (x, y in input pixels, then the
              visibility after sigmoid when d is 3): each row gets "keypoints" [[x, y, v], ...].
  "yolo-obb"  [1, 4+nc+1, A]: cx, cy, w, h, scores, angle (radians); NMS on rotated boxes
              (modelcontract.rotated): each row gets "corners" and "angle", its "box" is
              the corners' bounding box.
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

from . import masks, rotated
from .boxes import non_max_suppression
from .limits import DEFAULT_IOU, DEFAULT_MAX_DET, DEFAULT_SCORE
from .scores import softmax, top_k

DETECT_FORMATS = ("nms", "yolo-raw", "yolo-seg", "yolo-pose", "yolo-obb")
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


def raw_candidates(raw: np.ndarray, nc: int, opts: DetectOptions, agnostic: bool = True):
    """decode.js rawCandidates: [1, 4+nc+extra, A] -> the kept anchors after NMS (class-agnostic
    or per class), as (indices into the rows, rows [A, 4+nc+extra] float32, xyxy, best score,
    best class). Anchors of unwanted classes are dropped before NMS."""
    rows = np.asarray(raw, dtype=np.float32)[0].T
    class_scores = rows[:, 4:4 + nc]
    best = class_scores.max(1)
    best_class = class_scores.argmax(1)
    cx, cy, w, h = (rows[:, i] for i in range(4))
    half_w, half_h = w / np.float32(2), h / np.float32(2)
    xyxy = np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], 1)
    index = np.arange(len(rows))
    if opts.classes:
        index = np.flatnonzero(np.isin(best_class, list(opts.classes)))
    shifted = xyxy[index] if agnostic else xyxy[index] + best_class[index].astype(np.float32)[:, None] * CLASS_SHIFT
    kept = index[non_max_suppression(shifted[:, [1, 0, 3, 2]], best[index], opts.max_det, opts.iou, opts.score)]
    return kept, rows, xyxy, best, best_class


def decode_raw(raw: np.ndarray, labels, transform, width, height, opts: DetectOptions,
               agnostic: bool = True) -> list[dict]:
    """decode.js decodeRaw: [1, 4+nc, A] -> xyxy (float32) and best class per anchor; anchors
    of unwanted classes dropped; NMS (class-agnostic, or per class) keeping up to max_det boxes
    above the score."""
    nc = np.asarray(raw).shape[1] - 4
    kept, _, xyxy, best, best_class = raw_candidates(raw, nc, opts, agnostic)
    return [detection(labels, int(best_class[i]), best[i], xyxy[i], transform, width, height) for i in kept]


def _to_source_points(points: np.ndarray, transform, width: int, height: int) -> np.ndarray:
    """Input-pixel points [..., 2] -> source pixels, clamped to the image (as scale_coords)."""
    xy = transform.to_source(np.asarray(points, np.float64))
    xy[..., 0] = np.clip(xy[..., 0], 0, width)
    xy[..., 1] = np.clip(xy[..., 1], 0, height)
    return xy


def decode_segment(raw: np.ndarray, prototypes: np.ndarray, nc: int, input_size: tuple[int, int], labels,
                   transform, width, height, opts: DetectOptions, agnostic: bool = True) -> list[dict]:
    """decode.js decodeSegment: the detections of decode_raw, each with its mask's outline in
    source pixels ("polygons": one per 4-connected part). Prototypes [1, mh, mw, nm];
    ``input_size`` (width, height) of the model input. An instance whose mask is empty is
    dropped, as Ultralytics drops it."""
    kept, rows, xyxy, best, best_class = raw_candidates(raw, nc, opts, agnostic)
    protos = np.asarray(prototypes, np.float32)[0]
    logits = masks.mask_logits(rows[kept, 4 + nc:], protos)
    out = []
    for i, instance in zip(kept, logits):
        mask, origin = masks.instance_mask(instance, xyxy[i], input_size)
        if not mask.any():
            continue
        row = detection(labels, int(best_class[i]), best[i], xyxy[i], transform, width, height)
        row["polygons"] = [_to_source_points(np.array(loop, np.float64), transform, width, height).tolist()
                           for loop in masks.outlines(mask, origin)]
        out.append(row)
    return out


def decode_pose(raw: np.ndarray, nc: int, kpt_shape, labels, transform, width, height, opts: DetectOptions,
                agnostic: bool = True) -> list[dict]:
    """decode.js decodePose: the detections of decode_raw, each with "keypoints" [[x, y, v]...]
    in source pixels (clamped to the image; v is 1 where the model gives no visibility)."""
    k, d = int(kpt_shape[0]), int(kpt_shape[1])
    kept, rows, xyxy, best, best_class = raw_candidates(raw, nc, opts, agnostic)
    out = []
    for i in kept:
        row = detection(labels, int(best_class[i]), best[i], xyxy[i], transform, width, height)
        points = rows[i, 4 + nc:4 + nc + k * d].reshape(k, d)
        xy = _to_source_points(points[:, :2], transform, width, height)
        row["keypoints"] = [[float(x), float(y), float(p[2]) if d == 3 else 1.0] for (x, y), p in zip(xy, points)]
        out.append(row)
    return out


def decode_obb(raw: np.ndarray, labels, transform, width, height, opts: DetectOptions,
               agnostic: bool = True) -> list[dict]:
    """decode.js decodeObb: best class per anchor above the score, fast NMS on rotated boxes
    (probiou; per class unless agnostic), up to max_det; each row's "corners" (source
    pixels, not clamped), "angle" (radians, [0, pi/2)) and "box" (the corners' bounding box,
    clamped to the image)."""
    rows = np.asarray(raw, dtype=np.float32)[0].T
    nc = rows.shape[1] - 5
    class_scores = rows[:, 4:4 + nc]
    best, best_class = class_scores.max(1), class_scores.argmax(1)
    wanted = best > np.float32(opts.score)
    if opts.classes:
        wanted &= np.isin(best_class, list(opts.classes))
    index = np.flatnonzero(wanted)
    boxes = np.concatenate([rows[index, :4], rows[index, -1:]], 1).astype(np.float64)
    if not agnostic:
        boxes[:, :2] += best_class[index, None] * float(CLASS_SHIFT)
    kept = index[rotated.fast_nms(boxes, best[index], opts.iou)][:opts.max_det]
    out = []
    for i in kept:
        box = rotated.regularize([*rows[i, :4], rows[i, -1]])
        corners = transform.to_source(np.array(rotated.corners(box)))  # not clamped, as Ultralytics
        (x1, y1), (x2, y2) = corners.min(0), corners.max(0)
        out.append({"class_id": int(best_class[i]), "label": label_of(labels, int(best_class[i])),
                    "score": float(best[i]),
                    "box": [float(np.clip(x1, 0, width)), float(np.clip(y1, 0, height)),
                            float(np.clip(x2, 0, width)), float(np.clip(y2, 0, height))],
                    "corners": corners.tolist(), "angle": box[4]})
    return out


def decode_detections(fmt: str, outputs: dict, manifest: dict, transform, width: int, height: int,
                      opts: DetectOptions) -> list[dict]:
    """A detector's outputs ({name or key: array}) in the manifest's format -> result rows.
    The YOLO formats take their class count from the labels; "yolo-seg" tells its two outputs
    apart by rank (head 3, prototypes 4); "yolo-pose" reads the manifest's kpt_shape."""
    labels = list(manifest.get("labels") or [])
    _, in_h, in_w, _ = manifest["input"]["shape"]
    if fmt == "nms":
        return decode_nms(outputs, (in_w, in_h), labels, transform, width, height, opts)
    agnostic = (manifest.get("nms") or {}).get("agnostic", True) is not False
    values = [np.asarray(v) for v in outputs.values()]
    if fmt == "yolo-raw":
        return decode_raw(values[0], labels, transform, width, height, opts, agnostic)
    if fmt == "yolo-seg":
        head = next(v for v in values if v.ndim == 3)
        prototypes = next(v for v in values if v.ndim == 4)
        return decode_segment(head, prototypes, len(labels), (in_w, in_h), labels, transform, width, height,
                              opts, agnostic)
    if fmt == "yolo-pose":
        return decode_pose(values[0], len(labels), manifest["kpt_shape"], labels, transform, width, height,
                           opts, agnostic)
    if fmt == "yolo-obb":
        return decode_obb(values[0], labels, transform, width, height, opts, agnostic)
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
