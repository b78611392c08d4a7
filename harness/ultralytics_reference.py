"""Ultralytics' own answers for a checkpoint, for tests and benches: its ``predict()`` on photos
(its own letterbox and post-processing), and the raw head of the same PyTorch model on the
inputs our geometry prepared, which our decoders read. Runs in a child process: ultralytics
reads its settings from the environment at import time.

``answers(weights, images, imgsz, ...)`` -> one dict per image (for an exported file, such as
a .tflite, only predict()'s results):
  "raw": the head's outputs on our input ([1, 4+nc+extra, A]; and "prototypes" [1, mh, mw, nm]
         for segmentation; a classifier's probabilities [1, nc]), "transform" (our input ->
         source), and Ultralytics' results:
  "boxes" [n, 4] xyxy source pixels, "scores", "classes"; "masks" [n, H, W] bool (source
  pixels); "keypoints" [n, k, 3]; "corners" [n, 4, 2]; "top5" [(class, probability)];
  "class_map" [H, W] class ids (semantic); "depth" [H, W] (depth).
"""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from converters.scenes.train import offline_env


def _child(request_file: str) -> None:
    request = json.loads(Path(request_file).read_text())
    import cv2
    import torch
    from ultralytics import YOLO
    from ultralytics.utils import ops

    yolo = YOLO(request["weights"], task=request.get("task"))
    task = yolo.task
    found = []
    for image_path, input_path in zip(request["images"], request["inputs"]):
        entry = {"task": task}
        if input_path:   # a checkpoint: its raw head too
            with torch.no_grad():
                y = yolo.model.eval()(torch.from_numpy(np.load(input_path)).permute(0, 3, 1, 2).contiguous())
            first = y[0] if isinstance(y, (list, tuple)) else y
            if task == "segment":
                entry["raw"] = first[0].numpy()
                entry["prototypes"] = first[1].permute(0, 2, 3, 1).numpy()
            else:
                entry["raw"] = (first[0] if isinstance(first, (list, tuple)) else first).numpy()
        image = cv2.imread(image_path)
        result = yolo.predict(image, imgsz=request["imgsz"], conf=request["conf"], iou=request["iou"],
                              max_det=request["max_det"], agnostic_nms=request["agnostic"], rect=request["rect"],
                              verbose=False, device="cpu")[0]
        if task == "semantic":
            entry["class_map"] = result.semantic_mask.data.numpy()
        elif task == "depth":
            entry["depth"] = result.depth.data.numpy()
        elif task == "classify":
            probs = result.probs.data.numpy()
            entry["top5"] = [(int(i), float(probs[i])) for i in np.argsort(-probs, kind="stable")[:5]]
        elif task == "obb":
            entry.update(boxes=result.obb.xyxy.numpy(), scores=result.obb.conf.numpy(),
                         classes=result.obb.cls.numpy().astype(int), corners=result.obb.xyxyxyxy.numpy())
        else:
            entry.update(boxes=result.boxes.xyxy.numpy(), scores=result.boxes.conf.numpy(),
                         classes=result.boxes.cls.numpy().astype(int))
            if task == "segment":
                data = result.masks.data if result.masks is not None else torch.zeros((0, *image.shape[:2]))
                entry["masks"] = (ops.scale_masks(data[None].float(), image.shape[:2])[0] > 0.5).numpy() \
                    if len(data) else np.zeros((0, *image.shape[:2]), bool)
            if task == "pose":
                entry["keypoints"] = result.keypoints.data.numpy()
        found.append(entry)
    with open(request["out"], "wb") as f:
        pickle.dump(found, f)


def answers(weights: Path, images: list[Path], imgsz: int, conf: float = 0.25, iou: float = 0.7,
            max_det: int = 100, agnostic: bool = False, task: str = "detect", rect: bool = False) -> list[dict]:
    """See the module's docstring; the images are read as files (RGB photos or PNG scenes);
    ``task``: the model's, for our input's preprocessing (a classifier's is a centre crop).
    ``rect``: predict()'s own default, True, letterboxes a wide photo to the smallest
    stride-multiple rectangle (640x384 for 16:9); False to the imgsz square, as our graphs."""
    import cv2

    from converters.ultralytics_yolo import input_spec
    from modelcontract.geometry import prepare

    with tempfile.TemporaryDirectory(prefix="ultralytics-reference-") as tmp:
        folder = Path(tmp)
        inputs, transforms = [], []
        for i, image in enumerate(images):
            rgb = cv2.imread(str(image))[:, :, ::-1]
            x, transform = prepare(np.ascontiguousarray(rgb), input_spec(imgsz, task))
            np.save(folder / f"input{i}.npy", x)
            inputs.append(str(folder / f"input{i}.npy"))
            transforms.append(transform)
        exported = Path(weights).suffix != ".pt"   # an exported file: predict() alone, on its own size
        if exported:
            inputs = [None] * len(images)
        request = {"weights": str(weights), "images": [str(p) for p in images], "inputs": inputs, "imgsz": imgsz,
                   "task": task if exported else None,
                   "conf": conf, "iou": iou, "max_det": max_det, "agnostic": agnostic, "rect": rect,
                   "out": str(folder / "answers.pkl")}
        (folder / "request.json").write_text(json.dumps(request))
        proc = subprocess.run([sys.executable, "-m", "harness.ultralytics_reference", str(folder / "request.json")],
                              cwd=folder, env=offline_env(folder), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"ultralytics reference failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        with open(folder / "answers.pkl", "rb") as f:
            found = pickle.load(f)
    for entry, transform in zip(found, transforms):
        entry["transform"] = transform
    return found


def polygons_mask(polygons: list, width: int, height: int) -> np.ndarray:
    """The pixels of a width x height image whose centres lie inside any of the polygons."""
    from matplotlib.path import Path as Outline

    ys, xs = np.mgrid[0:height, 0:width]
    centres = np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5], 1)
    inside = np.zeros(height * width, bool)
    for polygon in polygons:
        inside |= Outline(np.asarray(polygon, np.float64)).contains_points(centres)
    return inside.reshape(height, width)


def match(a_boxes, b_boxes) -> list[tuple[int, int, float]]:
    """Greedy one-to-one matching by IoU: (index in a, index in b, IoU), best first."""
    from modelcontract.boxes import box_iou

    if not len(a_boxes) or not len(b_boxes):
        return []
    iou = box_iou(np.asarray(a_boxes, float).reshape(-1, 4), np.asarray(b_boxes, float).reshape(-1, 4))
    pairs = []
    while iou.size and iou.max() > 0:
        i, j = np.unravel_index(iou.argmax(), iou.shape)
        pairs.append((int(i), int(j), float(iou[i, j])))
        iou[i, :] = -1
        iou[:, j] = -1
    return pairs


def corner_distance(mine, theirs) -> float:
    """The largest distance, in pixels per axis, between two rotated boxes' corners [4, 2],
    the same rectangle possibly starting at another corner."""
    mine, theirs = np.asarray(mine, float), np.asarray(theirs, float)
    return min(float(np.abs(np.roll(mine, k, 0) - theirs).max()) for k in range(4))


def assert_same_rows(got: list[dict], want: list[dict], width: int, height: int) -> None:
    """The page's rows are the API's: the same classes in order, boxes within half a pixel,
    masks (IoU >= 0.98), keypoints and rotated corners within half a pixel, where given."""
    assert len(want) >= 1 and [r["class_id"] for r in got] == [d["class_id"] for d in want]
    for mine, theirs in zip(got, want):
        assert np.allclose(mine["box"], theirs["box"], atol=0.5)
        if "polygons" in theirs:
            assert mask_iou(polygons_mask(mine["polygons"], width, height),
                            polygons_mask(theirs["polygons"], width, height)) >= 0.98
        for key in ("keypoints", "corners"):
            if key in theirs:
                assert np.abs(np.asarray(mine[key]) - np.asarray(theirs[key])).max() <= 0.5


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


if __name__ == "__main__":
    _child(sys.argv[1])
