"""python -m converters.scenes TASK [--out DIR] [--epochs N] [--imgsz N] [--model YAML]

Trains a small model of TASK (segment, pose, obb, classify, semantic, depth) on synthetic
scenes and writes DIR/TASK.pt (default DIR: models/scenes); convert it with
python -m converters yolo --weights DIR/TASK.pt."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConverterError
from . import train


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m converters.scenes", description=__doc__.split("\n\n")[1])
    parser.add_argument("task", help=f"one of: {', '.join(train.TASKS)}")
    parser.add_argument("--out", type=Path, default=Path("models") / "scenes")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--imgsz", type=int)
    parser.add_argument("--model", help="an Ultralytics architecture YAML of the task (default: its n-scale YOLOv8 one; "
                        "YOLO26 for semantic and depth)")
    args = parser.parse_args(argv)
    try:
        train.train(args.task, args.out, epochs=args.epochs, imgsz=args.imgsz, model=args.model)
    except ConverterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
