"""Makes tests/fixtures/ultralytics-litert: one small .tflite per Ultralytics task, written by
today's Ultralytics LiteRT export (``format="litert"``, metadata appended inside the file), as
users bring them to the pages, with Ultralytics' own ``predict()`` answers on held-out scenes.

The tests drop these files into /detect and /classify and hold the pages to those answers.
The project's venv has what this script needs (ultralytics 8.4.190, litert-torch):

    .venv/bin/python tools/ultralytics_litert_fixtures.py [--out DIR] [--epochs N]

Each model is the task's YOLOv8 architecture at half its n scale's width (8 to 32
channels in the backbone: about 2 MB), trained on the synthetic scenes of converters/scenes (detect on the segment
scenes' boxes) for minutes on the CPU. Deterministic for its arguments (seed 0, workers 0).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "ultralytics-litert"
# task -> (Ultralytics' architecture, the scenes it trains on)
TASKS = {"detect": ("yolov8n.yaml", "segment"), "segment": ("yolov8n-seg.yaml", "segment"),
         "pose": ("yolov8n-pose.yaml", "pose"), "obb": ("yolov8n-obb.yaml", "obb"),
         "classify": ("yolov8n-cls.yaml", "classify")}
IMGSZ = {"classify": 64}      # the others: 160
WIDTH = 0.125                 # of the n scale's channels (0.25)
MAX_CHANNELS = 256            # of its 1024
HELD_OUT = (900_001, 900_002)  # scene seeds no training set uses
CONF = 0.25


def tiny_yaml(name: str, folder: Path) -> Path:
    """Ultralytics' own architecture with its n scale narrowed (the file name keeps the scale)."""
    import yaml
    from ultralytics.nn.tasks import yaml_model_load

    cfg = yaml_model_load(name)
    depth = cfg["scales"]["n"][0]
    cfg["scales"] = {"n": [depth, WIDTH, MAX_CHANNELS]}
    cfg.pop("scale", None)
    cfg.pop("yaml_file", None)
    path = folder / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def runs(mask) -> list[int]:
    """A boolean mask, row by row, as alternating run lengths starting with a run of False."""
    import numpy as np

    flat = np.concatenate([[False], mask.ravel(), [not mask.ravel()[-1]]])
    edges = np.flatnonzero(flat[1:] != flat[:-1])
    return np.diff(np.concatenate([[0], edges])).tolist()


def answers(model, task: str, image) -> dict:
    """Ultralytics' predict() on one RGB image: what the page must show."""
    result = model.predict(image[:, :, ::-1], conf=CONF, verbose=False)[0]  # predict takes BGR
    if task == "classify":
        return {"top5": [int(i) for i in result.probs.top5],
                "top5_scores": [float(v) for v in result.probs.top5conf]}
    out = []
    boxes = result.obb if task == "obb" else result.boxes
    if task == "segment":
        from ultralytics.utils import ops

        masks = (ops.scale_masks(result.masks.data[None].float(), image.shape[:2])[0] > 0.5).numpy()
    for i in range(len(boxes)):
        row = {"class_id": int(boxes.cls[i]), "score": float(boxes.conf[i])}
        if task == "obb":
            row["corners"] = boxes.xyxyxyxy[i].tolist()
            row["box"] = boxes.xyxy[i].tolist()
        else:
            row["box"] = boxes.xyxy[i].tolist()
        if task == "segment":  # the mask at the image's size, as run lengths
            row["mask_runs"] = runs(masks[i])
        if task == "pose":
            row["keypoints"] = result.keypoints.data[i].tolist()
        out.append(row)
    return {"detections": out}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--answers-only", action="store_true",
                        help="record predict()'s answers again for the .tflite files already in --out")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ul-fixtures-") as tmp:
        folder = Path(tmp)
        os.environ.update({"YOLO_OFFLINE": "true", "YOLO_AUTOINSTALL": "false",
                           "YOLO_CONFIG_DIR": str(folder / "config")})
        import cv2
        import ultralytics
        from ultralytics import YOLO

        from converters.scenes import dataset, train

        args.out.mkdir(parents=True, exist_ok=True)
        for task in args.tasks:
            name, scenes = TASKS[task]
            imgsz = IMGSZ.get(task, 160)
            target = args.out / f"{task}.tflite"
            record_path = args.out / f"{task}.json"
            if args.answers_only:
                record = json.loads(record_path.read_text())
            else:
                started = time.perf_counter()
                data = dataset.write(scenes, folder / f"data-{scenes}", 240, 40, train.SCENE_SIZE[scenes])
                model = YOLO(str(tiny_yaml(name, folder)), task=task)
                model.train(data=str(data), epochs=args.epochs, imgsz=imgsz, batch=16, device="cpu", workers=0, seed=0,
                            deterministic=True, amp=False, plots=False, verbose=False, project=str(folder / "runs"),
                            name=task, exist_ok=True, patience=0, mosaic=0.0,
                            **train.DEFAULTS[scenes].get("augment", {}))
                best = YOLO(str(folder / "runs" / task / "weights" / "best.pt"))
                exported = Path(best.export(format="litert", imgsz=imgsz))
                target.write_bytes(exported.read_bytes())
                record = {"task": task, "architecture": name, "width": WIDTH, "imgsz": imgsz, "epochs": args.epochs,
                          "scenes": scenes, "seconds": round(time.perf_counter() - started, 1)}
            litert = YOLO(str(target), task=task)
            record.update(ultralytics=ultralytics.__version__, conf=CONF, images={})
            for seed in HELD_OUT:
                image, _ = dataset.scene(scenes, seed, train.SCENE_SIZE[scenes])
                photo = f"{task}-{seed}.png"
                cv2.imwrite(str(args.out / photo), image[:, :, ::-1])
                record["images"][photo] = answers(litert, task, image)
            record_path.write_text(json.dumps(record, indent=1) + "\n")
            print(task, target.stat().st_size, "bytes", record["seconds"], "s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
