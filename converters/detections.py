"""Detection sets compared, for the detector families (yolov5n, yolo): parity of a converted
graph with its source, and ``agreement`` of a smaller-input build with the 640-px reference.

A detection set is {"boxes": [N,4] x1,y1,x2,y2, "scores": [N], "classes": [N]} (numpy),
all boxes of one set in the same units.
"""
from __future__ import annotations

import numpy as np
from modelcontract.boxes import box_iou

AGREEMENT_IOU = 0.5
AGREEMENT_RULE = f"IoU >= {AGREEMENT_IOU}, same class"
AGREEMENT_PHOTOS = ("bus.jpg", "zidane.jpg")


def same_class_iou(ref: dict, got: dict) -> np.ndarray:
    """[N_ref, N_got] IoU, 0 where the classes differ."""
    n_ref, n_got = len(ref["classes"]), len(got["classes"])
    if not n_ref or not n_got:
        return np.zeros((n_ref, n_got))
    ious = box_iou(ref["boxes"], got["boxes"])
    return np.where(np.asarray(ref["classes"])[:, None] == np.asarray(got["classes"])[None, :], ious, 0.0)


def match_detections(ref: dict, got: dict) -> dict:
    """Pair each reference detection with the best-overlapping candidate of the same class
    (parity: a faithful conversion gives the same set, IoU ~1 and equal scores)."""
    ious = same_class_iou(ref, got)
    n_ref, n_got = ious.shape
    best = ious.max(1) if n_got else np.zeros(n_ref)
    score_diff = [abs(float(ref["scores"][i]) - float(got["scores"][j])) for i, j in enumerate(ious.argmax(1))] \
        if n_ref and n_got else []
    return {"reference_count": n_ref, "count": n_got,
            "min_iou_same_class": float(best.min()) if n_ref else 1.0,
            "max_score_abs": max(score_diff, default=0.0)}


def kept(ref: dict, got: dict, iou: float = AGREEMENT_IOU) -> int:
    """How many reference detections ``got`` keeps: one-to-one, same class, IoU >= ``iou``,
    the reference's detections taken by descending score, each to its best free candidate."""
    ious = same_class_iou(ref, got)
    free = np.ones(ious.shape[1], bool)
    count = 0
    for i in np.argsort(-np.asarray(ref["scores"], dtype=np.float64), kind="stable"):
        candidates = np.where(free, ious[i], 0.0)
        if candidates.size and candidates.max() >= iou:
            free[int(candidates.argmax())] = False
            count += 1
    return count


def agreement(reference: dict[str, dict], candidate: dict[str, dict], reference_name: str,
              reference_size: int, runtime: str) -> dict:
    """The manifest's ``agreement``: of the reference's detections on each photo (boxes in
    source pixels), how many the candidate build keeps."""
    per_photo = {photo: {"reference_detections": len(reference[photo]["classes"]),
                         "kept": kept(reference[photo], candidate[photo])} for photo in reference}
    total = sum(p["reference_detections"] for p in per_photo.values())
    count = sum(p["kept"] for p in per_photo.values())
    return {"reference": reference_name, "reference_size": reference_size, "photos": list(reference),
            "reference_detections": total, "kept": count,
            "fraction": round(count / total, 4) if total else None,
            "rule": AGREEMENT_RULE, "runtime": runtime, "per_photo": per_photo}
