"""Runs in the training child (converters/scenes/train.py): Ultralytics' trainer on the
written scenes, then result.json with the best checkpoint's path and final metrics."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(request_file: str) -> None:
    request = json.loads(Path(request_file).read_text())
    from ultralytics import YOLO

    model = YOLO(request["model"], task=request["task"])
    # augment: augmentation overrides; hyp: other trainer arguments (batch, nbs, lr0...)
    options = {"batch": 16, **request.get("augment", {}), **request.get("hyp", {})}
    results = model.train(
        data=request["data"], epochs=request["epochs"], imgsz=request["imgsz"], device="cpu",
        workers=0, seed=0, deterministic=True, amp=False, plots=False, val=True, verbose=False,
        project=request["project"], name="train", exist_ok=True, patience=0, mosaic=request["mosaic"], **options)
    metrics = {k: round(float(v), 4) for k, v in (getattr(results, "results_dict", None) or {}).items()}
    best = Path(request["project"]) / "train" / "weights" / "best.pt"
    Path(request["result"]).write_text(json.dumps({"best": str(best), "metrics": metrics}))


if __name__ == "__main__":
    main(sys.argv[1])
