"""Python references for what the pages show: the converter's server artifact (LiteRT, the
same weights as the TF.js files) on the same preprocessed input."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from converters.tflite import run_tflite
from modelcontract.geometry import prepare


def manifest(model_dir: Path) -> dict:
    return json.loads((Path(model_dir) / "manifest.json").read_text())


def detect(model_dir: Path, rgb: np.ndarray) -> list[dict]:
    """Detections in source pixels for an in-graph-NMS detector ("nms" format)."""
    m = manifest(model_dir)
    assert m["outputs"]["format"] == "nms"
    x, transform = prepare(rgb, m["input"])
    out = run_tflite(Path(model_dir) / m["server"]["model"], {m["input"]["name"]: x})
    _, in_h, in_w, _ = m["input"]["shape"]
    h, w = rgb.shape[:2]
    found = []
    for i in range(int(out["valid_detections"][0])):
        box = out["boxes"][0, i] * np.array([in_w, in_h, in_w, in_h])
        box = transform.to_source(box)
        box = np.clip(box, 0, [w, h, w, h])
        cls = int(out["classes"][0, i])
        found.append({"class_id": cls, "label": m["labels"][cls], "score": float(out["scores"][0, i]),
                      "box": [float(v) for v in box]})
    return found


def classify(model_dir: Path, rgb: np.ndarray) -> np.ndarray:
    m = manifest(model_dir)
    x, _ = prepare(rgb, m["input"])
    out = run_tflite(Path(model_dir) / m["server"]["model"], {m["input"]["name"]: x})
    return np.asarray(next(iter(out.values())))[0]


def decode_jpeg_like_browser(path: Path) -> np.ndarray:
    from PIL import Image, ImageOps

    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
