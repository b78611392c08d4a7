"""Scenes written as an Ultralytics dataset: images/{train,val}/*.png with labels/{train,val}/*.txt
(normalised, one object a line) and a data YAML; classify as {train,val}/<class>/*.png; depth
with depth/{train,val}/*.png (uint16, DEPTH_SCALE units a metre) in place of labels.

Label lines, as Ultralytics reads them:
- segment, semantic  ``class x1 y1 x2 y2 ...``                 (the polygon; with no masks_dir in
                     the YAML Ultralytics rasterises it and adds a "background" class after ours)
- pose               ``class cx cy w h x1 y1 v1 ... xk yk vk``  (box, then keypoints)
- obb                ``class x1 y1 x2 y2 x3 y3 x4 y4``          (the four corners)
"""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from . import draw

# Depth PNGs hold millimetres (Ultralytics' default depth_scale); 0 would mean "no depth".
DEPTH_SCALE = 1000
# Farther than any surface a depth scene draws (its wall is at most 12 m): the Eigen protocol
# the validator and the calibration follow scores only depths below it.
MAX_DEPTH = 20.0


def label_lines(task: str, truth: list, size: int) -> list[str]:
    def norm(values) -> str:
        return " ".join(f"{min(max(v / size, 0.0), 1.0):.6f}" for v in values)

    lines = []
    for obj in truth:
        if task in ("segment", "semantic"):
            lines.append(f"{obj['class_id']} {norm(np.ravel(obj['polygon']))}")
        elif task == "obb":
            lines.append(f"{obj['class_id']} {norm(np.ravel(obj['corners']))}")
        elif task == "pose":
            x1, y1, x2, y2 = obj["box"]
            box = norm([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1])
            points = " ".join(f"{norm([x, y])} {int(v)}" for x, y, v in obj["keypoints"])
            lines.append(f"{obj['class_id']} {box} {points}")
        else:
            raise ValueError(f"no label lines for task {task!r}")
    return lines


def scene(task: str, seed: int, size: int):
    """One scene of ``task``, the same for the same seed and size."""
    return draw.SCENES[task](np.random.default_rng(seed), size)


def write(task: str, root: Path, train: int, val: int, size: int, seed: int = 0) -> Path:
    """``train`` + ``val`` scenes under ``root``; -> what Ultralytics' ``data=`` takes (the YAML,
    or the folder for classify). Seeds: train seed*1e6+i, val seed*1e6+500000+i."""
    root.mkdir(parents=True, exist_ok=True)
    names = draw.NAMES[task]
    for split, count, offset in (("train", train, 0), ("val", val, 500_000)):
        for i in range(count):
            image, truth = scene(task, seed * 1_000_000 + offset + i, size)
            if task == "classify":
                folder = root / split / names[truth["class_id"]]
                folder.mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(folder / f"{i:05d}.png"), image[:, :, ::-1])
                continue
            (root / "images" / split).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / "images" / split / f"{i:05d}.png"), image[:, :, ::-1])
            if task == "depth":
                write_depth(root / "depth" / split / f"{i:05d}.png", truth["depth"])
                continue
            (root / "labels" / split).mkdir(parents=True, exist_ok=True)
            (root / "labels" / split / f"{i:05d}.txt").write_text("\n".join(label_lines(task, truth, size)) + "\n")
    if task == "classify":
        for split in ("train", "val"):  # every class has a folder, even one no scene drew
            for name in names:
                (root / split / name).mkdir(parents=True, exist_ok=True)
        return root
    data = {"path": str(root.resolve()), "train": "images/train", "val": "images/val",
            "names": dict(enumerate(names))}
    if task == "pose":
        data.update(kpt_shape=draw.KPT_SHAPE, flip_idx=draw.FLIP_IDX)
    if task == "depth":
        data.update(depth_scale=DEPTH_SCALE, max_depth=MAX_DEPTH)
    yaml_path = root / "data.yaml"
    yaml_path.write_text(json.dumps(data, indent=1))  # JSON is YAML
    return yaml_path


def write_depth(path: Path, depth: np.ndarray) -> None:
    """A depth map in metres as the 16-bit PNG DepthDataset reads (``depth_scale`` units a metre)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.clip(np.rint(depth * DEPTH_SCALE), 1, 65535).astype(np.uint16))


def read_depth(path: Path) -> np.ndarray:
    """Metres from a PNG ``write_depth`` wrote."""
    return cv2.imread(str(path), cv2.IMREAD_UNCHANGED).astype(np.float32) / DEPTH_SCALE
