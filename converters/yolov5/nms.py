"""Agnostic NMS at one set of thresholds, twice: inside the TF graph (the exported
model's four outputs) and with torchvision on the PyTorch head (the reference detections
parity compares them with)."""
from __future__ import annotations

import numpy as np

NMS = {"iou": 0.45, "score": 0.25, "max_det": 100, "agnostic": True}
OUTPUT_KEYS = ("boxes", "scores", "classes", "valid_detections")


def nms(raw, imgsz: int):
    """Agnostic NMS on the decoded head, padded to max_det rows (no empty tensors: the
    WASM backend fails on them before GatherV2); boxes divided by the input side."""
    import tensorflow as tf

    p = raw[0]
    conf = p[:, 5:] * p[:, 4:5]
    score = tf.reduce_max(conf, 1)
    label = tf.argmax(conf, 1, output_type=tf.int32)
    boxes = tf.concat([p[:, 0:2] - p[:, 2:4] / 2, p[:, 0:2] + p[:, 2:4] / 2], 1)
    idx, valid = tf.raw_ops.NonMaxSuppressionV4(
        boxes=boxes, scores=score, max_output_size=NMS["max_det"], iou_threshold=NMS["iou"],
        score_threshold=NMS["score"], pad_to_max_output_size=True)
    keep = tf.range(NMS["max_det"]) < valid
    keep_f = tf.cast(keep, tf.float32)
    return {
        "boxes": (tf.gather(boxes, idx) * (keep_f[:, None] / imgsz))[None],
        "scores": (tf.gather(score, idx) * keep_f)[None],
        "classes": (tf.gather(label, idx) * tf.cast(keep, tf.int32))[None],
        "valid_detections": tf.reshape(valid, [1]),
    }


def nms_reference(raw: np.ndarray, imgsz: int) -> dict:
    """The same agnostic NMS on the PyTorch head, with torchvision (the reference detections)."""
    import torch
    import torchvision

    p = torch.from_numpy(raw[0]).double()
    conf = p[:, 5:] * p[:, 4:5]
    score, label = conf.max(1)
    boxes = torch.cat((p[:, :2] - p[:, 2:4] / 2, p[:, :2] + p[:, 2:4] / 2), 1)
    keep = score > NMS["score"]
    boxes, score, label = boxes[keep], score[keep], label[keep]
    idx = torchvision.ops.nms(boxes, score, NMS["iou"])[:NMS["max_det"]]
    return {"boxes": (boxes[idx] / imgsz).numpy(), "scores": score[idx].numpy(), "classes": label[idx].numpy()}


def padded_outputs(found: dict) -> dict:
    """torchvision's detections in the graph's four outputs (max_det rows, zeros past the valid ones)."""
    n, rows = len(found["scores"]), NMS["max_det"]
    boxes, scores, classes = np.zeros((1, rows, 4)), np.zeros((1, rows)), np.zeros((1, rows))
    boxes[0, :n], scores[0, :n], classes[0, :n] = found["boxes"], found["scores"], found["classes"]
    return {"boxes": boxes, "scores": scores, "classes": classes, "valid_detections": np.array([n])}


def detections_of(outputs: dict, names: dict) -> dict:
    """Valid rows of the four NMS outputs (names: output key -> graph tensor name), boxes as
    fractions of the input (modelcontract.decode.nms_rows)."""
    from modelcontract.decode import nms_rows

    return nms_rows({key: outputs[names[key]] for key in OUTPUT_KEYS}, (1, 1))
