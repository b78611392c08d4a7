"""python -m converters <name>|all|official|list [--weights PATH|NAME|none] [--id ID] [--out DIR]
                        [--quantize none|float16|uint8] [--imgsz N] [--force]

``official`` builds the official Ultralytics checkpoints (one per task) that can be had here:
each one missing is one line saying how to get it, and the others still build."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import FAMILIES, QUANTIZATIONS
from .errors import ConverterError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m converters",
        description="Convert real models to TF.js graph models (+ server artifact and manifest).")
    parser.add_argument("name", help=f"one of: {', '.join(FAMILIES)}; 'all'; 'official' (the official "
                        "Ultralytics checkpoints found here); or 'list'")
    parser.add_argument("--weights", help="source weights file, an official checkpoint's name (yolo11n-pose.pt), "
                        "or 'none' for random weights (default: the official download when online)")
    parser.add_argument("--id", dest="model_id", help="the installed model's id (default: the checkpoint's name "
                        "for yolo, else the family's)")
    parser.add_argument("--out", type=Path, help="models folder (default: the app's, $DATARAILROAD_MODELS or ./models)")
    parser.add_argument("--quantize", choices=QUANTIZATIONS, default="none")
    # checked by the pipeline (converters.stages.input_side), so a bad value is a clean error
    parser.add_argument("--imgsz", help="input side in pixels for the detectors (yolov5n, yolo): a multiple "
                        "of 32, default 640; another size builds into its own folder, e.g. yolov5n-320")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from . import pipeline

    try:
        if args.name == "list":
            for name, task, summary in pipeline.summaries():
                print(f"{name:20s} {task:9s} {summary}")
            return 0
        if args.name == "official":
            return build_official(args)
        if args.name == "all":
            refuse_one_model_options(args, "all", ("weights", "imgsz", "model_id"))
            names = list(FAMILIES)
        else:
            pipeline.family(args.name)  # unknown name -> clear error before any work
            names = [args.name]
        started = time.perf_counter()
        failed = []
        for name in names:
            if args.name == "all" and not args.force and pipeline.is_installed(name, args.out, args.quantize):
                print(f"[{name}] already installed (--force rebuilds it)")
                continue
            try:
                pipeline.convert(name, weights=args.weights, out=args.out, quantize=args.quantize,
                                 force=args.force, imgsz=args.imgsz, model_id=args.model_id)
            except ConverterError as exc:
                if len(names) == 1:
                    raise
                pipeline.report_error(exc)
                failed.append(name)
        return finish(started, failed)
    except ConverterError as exc:
        pipeline.report_error(exc)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the previous model (if any) is untouched", file=sys.stderr)
        return 130


def build_official(args) -> int:
    """Every official Ultralytics checkpoint that is here or can be downloaded, one by one; one
    that can't be had is one line (skipped), one that fails to build is an error (exit 2)."""
    from . import pipeline
    from .ultralytics_yolo import official

    from .ultralytics_yolo import DEFAULT_CHECKPOINT

    refuse_one_model_options(args, "official", ("weights", "model_id"))
    started = time.perf_counter()
    failed = []

    for name in official.CHECKPOINTS:
        try:
            # the family's default is built as `all` builds it: each finds the other's up to date
            pipeline.convert("yolo", weights=None if name == DEFAULT_CHECKPOINT else name, out=args.out,
                             quantize=args.quantize, force=args.force, imgsz=args.imgsz)
        except official.Unavailable as exc:
            print(f"[yolo] skipped {name}: {exc.message}; {exc.fix}", file=sys.stderr)
        except ConverterError as exc:
            pipeline.report_error(exc)
            failed.append(name)
    return finish(started, failed)


def refuse_one_model_options(args, command: str, options: tuple) -> None:
    for option in options:
        if getattr(args, option):
            flag = "--" + option.replace("model_id", "id")
            raise ConverterError(f"{flag} applies to one model, not '{command}'",
                                 f"convert that model on its own: python -m converters NAME {flag} ...")


def finish(started: float, failed: list) -> int:
    """The last lines of a run of several builds; exit 2 when any failed."""
    print(f"total {time.perf_counter() - started:.1f}s")
    if failed:
        print(f"not built: {', '.join(failed)} (see the fixes above)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
