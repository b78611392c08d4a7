"""Conversion time and model sizes per model and quantisation, side by side in one run.

Builds into a temporary folder (./models is not touched). Models whose weights cannot be
had offline are built with random weights (--weights none) and marked so: their time and
size are the same as with real weights, only the numbers inside differ.

    .venv/bin/python -m bench.convert [--models yolov5n efficientnet-lite0 ...]
                                      [--quantize none float16 uint8] [--yolov5n-weights PATH]
                                      [--out bench/results/convert.json]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from bench._results import add_out_option, write_results
from converters import FAMILIES, QUANTIZATIONS, pipeline
from modelcontract import manifest
from converters.errors import ConverterError

SHARED_YOLOV5N = ROOT.parent / "shared" / "models" / "yolov5n.pt"
# Families that need --weights offline; everything else has offline defaults.
RANDOM_OFFLINE = {"yolo": "yolov8n.yaml", "efficientnetv2-b0": "none"}


def weights_for(name: str, yolov5n: Path | None):
    if name == "yolov5n":
        return (str(yolov5n), "real") if yolov5n and yolov5n.is_file() else ("none", "random")
    if name in RANDOM_OFFLINE:
        return RANDOM_OFFLINE[name], "random"
    return None, "real"


def sizes(folder: Path) -> tuple[int, int]:
    """(TF.js bytes, the other files' bytes) of an installed model."""
    data = manifest.read(folder)
    tfjs = manifest.browser_bytes(data)
    return tfjs, sum(data.get("files", {}).values()) - tfjs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(FAMILIES))
    parser.add_argument("--quantize", nargs="+", default=list(QUANTIZATIONS), choices=QUANTIZATIONS)
    parser.add_argument("--yolov5n-weights", type=Path, default=SHARED_YOLOV5N)
    add_out_option(parser, "convert")
    args = parser.parse_args()
    rows = []
    print(f"{'model':20s} {'quant':8s} {'weights':8s} {'seconds':>8s} {'TF.js MB':>9s} {'server MB':>10s} {'vs fp32':>8s}")
    with tempfile.TemporaryDirectory(prefix="bench-convert-") as out:
        for name in args.models:
            weights, kind = weights_for(name, args.yolov5n_weights)
            fp32_size = None
            for quantize in args.quantize:
                started = time.perf_counter()
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        folder = pipeline.convert(name, weights=weights, out=Path(out), quantize=quantize)
                except ConverterError as exc:
                    print(f"{name:20s} {quantize:8s} {kind:8s}  not built: {exc.message}")
                    rows.append({"model": name, "quantize": quantize, "weights": kind, "not_built": exc.message})
                    continue
                seconds = time.perf_counter() - started
                tfjs, server = sizes(folder)
                if quantize == "none":
                    fp32_size = tfjs
                ratio = f"{tfjs / fp32_size:8.2f}" if fp32_size else f"{'':8s}"
                print(f"{name:20s} {quantize:8s} {kind:8s} {seconds:8.1f} {tfjs / 2**20:9.2f} "
                      f"{server / 2**20:10.2f} {ratio}", flush=True)
                rows.append({"model": name, "quantize": quantize, "weights": kind, "seconds": round(seconds, 1),
                             "tfjs_mb": round(tfjs / 2**20, 2), "server_mb": round(server / 2**20, 2),
                             "tfjs_vs_fp32": round(tfjs / fp32_size, 3) if fp32_size else None})
    write_results("convert", args, {"conversions": rows})


if __name__ == "__main__":
    main()
