"""Train a small Ultralytics model on synthetic scenes, on the CPU, offline, with Ultralytics'
own trainer: real trained weights for the tasks no offline checkpoint covers.

The trainer runs in a child process (as the export does, converters/ultralytics_yolo/child.py):
ultralytics reads its settings from the environment at import time and writes into the
working directory. A run is deterministic for its arguments (seeded scenes, seed=0,
deterministic=True, workers=0), and ``train`` skips it when ``out`` already holds the result
of the same arguments: the cache the tests and `make run` share.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import ConverterError
from . import dataset

TASKS = ("segment", "pose", "obb", "classify", "semantic", "depth")
# The architecture trained per task: Ultralytics' own YAML at its n scale (YOLO26 for semantic
# and depth, which YOLOv8 lacks). Another one (for instance yolo11n-seg.yaml) trains the same
# way with --model.
MODELS = {"segment": "yolov8n-seg.yaml", "pose": "yolov8n-pose.yaml", "obb": "yolov8n-obb.yaml",
          "classify": "yolov8n-cls.yaml", "semantic": "yolo26n-sem.yaml", "depth": "yolo26n-depth.yaml"}
# Small enough for minutes on two cores, large enough that held-out scenes come out right
# (segment: 30 epochs left squares and triangles confused). No mosaic: four scenes in one
# 160-px image make objects too small to learn in minutes.
DEFAULTS = {"segment": {"imgsz": 160, "train": 240, "val": 40, "epochs": 60, "mosaic": 0.0},
            "pose": {"imgsz": 160, "train": 240, "val": 40, "epochs": 30, "mosaic": 0.0},
            "obb": {"imgsz": 160, "train": 240, "val": 40, "epochs": 60, "mosaic": 0.0},
            # from scratch a classifier wants many scenes more than many epochs: 300 scenes x 100
            # epochs (no random erasing, no RandAugment) reached val top-1 0.63 of 3 classes in
            # 4 min, 1200 x 25 0.68 in 2.5 min, 2400 x 20 1.0 in 3.4-3.9 min
            "classify": {"imgsz": 64, "train": 2400, "val": 60, "epochs": 20, "mosaic": 0.0,
                         "augment": {"erasing": 0.0, "auto_augment": None}},
            # The dense tasks step after every batch of 8 (nbs=8; at the default nbs=64 the trainer
            # steps every 64 images and 8 epochs are 30 steps: depth stayed one blur for every
            # scene). semantic: 16 epochs at lr0 0.003, zoom +-25 % reached val mIoU 0.83 (pixel
            # accuracy 0.98) in 3.2 CPU-min; 20 epochs at the auto lr (0.00125) and +-50 % zoom 0.74.
            "semantic": {"imgsz": 160, "train": 240, "val": 40, "epochs": 16, "mosaic": 0.0,
                         "augment": {"scale": 0.25},
                         "hyp": {"batch": 8, "nbs": 8, "warmup_epochs": 1, "optimizer": "AdamW", "lr0": 0.003}},
            # depth: 128 px, as 8 epochs at 160 take 5 min; no zoom, which would change an object's
            # size but not its depth. At lr0 0.001 val abs_rel (scale-aligned, as the trainer
            # scores) fell every epoch, to 0.12 in 3.5 CPU-min in all; at the auto lr (0.002) it
            # swung between 0.14 and 0.24 in the last epochs, a metric loss (dlam 0.5) ended at 0.17.
            "depth": {"imgsz": 128, "train": 240, "val": 40, "epochs": 8, "mosaic": 0.0,
                      "augment": {"scale": 0.0},
                      "hyp": {"batch": 8, "nbs": 8, "warmup_epochs": 1, "optimizer": "AdamW", "lr0": 0.001}}}
SCENE_SIZE = {"segment": 256, "pose": 256, "obb": 256, "classify": 128, "semantic": 256, "depth": 256}


def settings(task: str, **overrides) -> dict:
    if task not in TASKS:
        raise ConverterError(f"no synthetic scenes for task {task!r}", f"pass one of: {', '.join(TASKS)}")
    return {"task": task, "model": MODELS[task], **DEFAULTS[task],
            **{k: v for k, v in overrides.items() if v is not None}}


def key(args: dict) -> str:
    """What identifies a trained result: the arguments and the scene code."""
    code = b"".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py")))
    return hashlib.sha256(json.dumps(args, sort_keys=True).encode() + code).hexdigest()[:16]


def offline_env(folder: Path) -> dict:
    env = dict(os.environ)
    (folder / "config").mkdir(exist_ok=True)
    env.update({"YOLO_OFFLINE": "true", "YOLO_AUTOINSTALL": "false", "YOLO_CONFIG_DIR": str(folder / "config")})
    return env


def train(task: str, out: Path, log=print, **overrides) -> Path:
    """``out``/<task>.pt trained on scenes (see ``settings``), with ``out``/<task>.json (the
    arguments, the cache key, seconds, the trainer's final metrics); the cached one when the
    key matches."""
    args = settings(task, **overrides)
    digest = key(args)
    out.mkdir(parents=True, exist_ok=True)
    weights, record = out / f"{task}.pt", out / f"{task}.json"
    if weights.is_file() and record.is_file() and json.loads(record.read_text()).get("key") == digest:
        log(f"[scenes] {task}: trained already ({weights})")
        return weights
    with tempfile.TemporaryDirectory(prefix=f"scenes-{task}-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        data = dataset.write(task, folder / "data", args["train"], args["val"], SCENE_SIZE[task])
        request = {**args, "data": str(data), "project": str(folder / "runs"), "result": str(folder / "result.json")}
        (folder / "request.json").write_text(json.dumps(request))
        log(f"[scenes] {task}: training {args['model']} {args['epochs']} epochs at {args['imgsz']} px "
            f"on {args['train']} scenes")
        with open(folder / "train.log", "w") as stream:
            proc = subprocess.run([sys.executable, "-m", "converters.scenes.child", str(folder / "request.json")],
                                  cwd=folder, env=offline_env(folder), stdout=stream, stderr=subprocess.STDOUT)
        if proc.returncode != 0 or not (folder / "result.json").is_file():
            tail = "\n".join((folder / "train.log").read_text(errors="replace").splitlines()[-25:])
            raise ConverterError(f"training on {task} scenes failed (exit {proc.returncode}):\n{tail}",
                                 "see the log above")
        result = json.loads((folder / "result.json").read_text())
        shutil.copy(result["best"], weights)
        seconds = round(time.perf_counter() - started, 1)
        record.write_text(json.dumps({"key": digest, "args": args, "seconds": seconds,
                                      "metrics": result["metrics"]}, indent=1))
    log(f"[scenes] {task}: {seconds}s -> {weights}")
    return weights
