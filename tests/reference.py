"""Python references for what the pages show: the converter's server artifact (LiteRT, the
same weights as the TF.js files) on the same preprocessed input."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from converters.tflite import run_tflite
from modelcontract.decode import DetectOptions, decode_nms, nms_defaults
from modelcontract.geometry import prepare
from harness.models import read_manifest as manifest


def detect(model_dir: Path, rgb: np.ndarray) -> list[dict]:
    """Every detection of an in-graph-NMS detector ("nms" format), in source pixels."""
    m = manifest(model_dir)
    assert m["outputs"]["format"] == "nms"
    x, transform = prepare(rgb, m["input"])
    out = run_tflite(Path(model_dir) / m["server"]["model"], {m["input"]["name"]: x})
    _, in_h, in_w, _ = m["input"]["shape"]
    h, w = rgb.shape[:2]
    everything = DetectOptions(score=0.0, iou=nms_defaults(m)["iou"], max_det=len(out["scores"].reshape(-1)))
    return decode_nms(out, (in_w, in_h), m["labels"], transform, w, h, everything)


def classify(model_dir: Path, rgb: np.ndarray) -> np.ndarray:
    m = manifest(model_dir)
    x, _ = prepare(rgb, m["input"])
    out = run_tflite(Path(model_dir) / m["server"]["model"], {m["input"]["name"]: x})
    return np.asarray(out[m["server"]["output"]])[0]
