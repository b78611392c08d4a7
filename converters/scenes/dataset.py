"""Scenes written as an Ultralytics dataset: images/{train,val}/*.png with labels/{train,val}/*.txt
(normalised, one object a line) and a data YAML; classify as {train,val}/<class>/*.png.

Label lines, as Ultralytics reads them:
- segment  ``class x1 y1 x2 y2 ...``                 (the polygon)
- pose     ``class cx cy w h x1 y1 v1 ... xk yk vk``  (box, then keypoints)
- obb      ``class x1 y1 x2 y2 x3 y3 x4 y4``          (the four corners)
"""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from . import draw


def label_lines(task: str, truth: list, size: int) -> list[str]:
    def norm(values) -> str:
        return " ".join(f"{min(max(v / size, 0.0), 1.0):.6f}" for v in values)

    lines = []
    for obj in truth:
        if task == "segment":
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
            (root / "labels" / split).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / "images" / split / f"{i:05d}.png"), image[:, :, ::-1])
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
    yaml_path = root / "data.yaml"
    yaml_path.write_text(json.dumps(data, indent=1))  # JSON is YAML
    return yaml_path
