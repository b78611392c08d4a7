"""The model files users already have, on /detect, side by side in one run: each picked as the
visitor's model, the fake camera showing bus.jpg and zidane.jpg (letterboxed to 640x480), on
the backend its runtime offers (LiteRT.js WASM for a .tflite, ONNX Runtime Web WASM for an
.onnx). For each: live FPS (the camera gives 30 at most), the page's median ms a frame and by
stage, and for a .tflite the same file alone in native LiteRT. The same checkpoint (yolo11n,
320 px) as float32 and as int8 (Ultralytics' older TensorFlow export, int8 calibrated on
synthetic scenes) says what int8 buys in the browser and natively.

    .venv/bin/python -m bench.browser_user_files [--seconds 8] [--rounds 2] [--files NAME ...]

Files are made from ../shared/models by harness/user_exports.py into --cache (kept between runs).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from bench._browser import native_litert_ms, server_and_browser
from bench._results import add_out_option, write_results
from bench.browser_official import real_clip
from bench.browser_tasks import STAGES, live_fps
from harness.browser import fake_camera_flags
from harness.paths import SHARED
from harness.user_exports import legacy_tflite, onnx_file

CHECKPOINTS = SHARED / "models"
REAL = SHARED / "fixtures" / "ultralytics-tflite"
# name -> how the file is had: a real file, or (maker, checkpoint, arguments)
FILES = {
    "yolo11n .tflite float32 (TF export)": (legacy_tflite, "yolo11n.pt", {"precision": "float32"}),
    "yolo11n .tflite int8 (TF export)": (legacy_tflite, "yolo11n.pt", {"precision": "int8"}),
    "yolo11n .onnx": (onnx_file, "yolo11n.pt", {}),
    "yolov8n int8 .tflite (real, 8.1.23)": REAL / "yolov8n_int8_320.tflite",
    "yolo11n-seg .onnx": (onnx_file, "yolo11n-seg.pt", {}),
    "yolo11n-pose .tflite, nms=True (TF export)": (legacy_tflite, "yolo11n-pose.pt", {"nms": True}),
    "yolo11n-pose .onnx, nms=True": (onnx_file, "yolo11n-pose.pt", {"nms": True}),
}


def the_file(how, cache: Path) -> Path:
    if isinstance(how, Path):
        return how
    maker, checkpoint, kwargs = how
    return maker(cache, CHECKPOINTS / checkpoint, 320, **kwargs)


def int8_cost(float32: Path, int8: Path) -> dict:
    """What int8 costs: Ultralytics' predict() on the two files, bus.jpg and zidane.jpg."""
    from harness.photos import photo_file
    from harness.ultralytics_reference import answers, match

    photos = [photo_file(p) for p in ("bus.jpg", "zidane.jpg")]
    base, quantized = answers(float32, photos, 320), answers(int8, photos, 320)
    pairs = [(a, b, match(a["boxes"], b["boxes"])) for a, b in zip(base, quantized)]
    same = [(a, b, i, j, iou) for a, b, m in pairs for i, j, iou in m if a["classes"][i] == b["classes"][j] and iou >= 0.5]
    return {"float32_detections": sum(len(a["boxes"]) for a in base), "int8_detections": sum(len(b["boxes"]) for b in quantized),
            "matched": len(same), "worst_iou": round(min((s[4] for s in same), default=0.0), 4),
            "worst_score_change": round(max((abs(float(a["scores"][i] - b["scores"][j])) for a, b, i, j, _ in same),
                                            default=0.0), 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8, help="live window per file and round")
    parser.add_argument("--rounds", type=int, default=2, help="turns each file takes, alternating")
    parser.add_argument("--frames", type=int, default=20, help="frames timed by stage per file and round")
    parser.add_argument("--files", nargs="+", default=list(FILES), choices=list(FILES), metavar="NAME")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "datarailroad-user-files")
    add_out_option(parser, "browser_user_files")
    args = parser.parse_args()
    paths = {name: the_file(FILES[name], args.cache) for name in args.files}
    backends = {name: "onnx-wasm" if path.suffix == ".onnx" else "litert-wasm" for name, path in paths.items()}
    results = {"seconds": args.seconds, "rounds": args.rounds, "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        camera = real_clip(Path(tmp) / "photos.y4m")
        (Path(tmp) / "no-models").mkdir()
        with server_and_browser(Path(tmp) / "no-models", fake_camera_flags(camera)) as (url, browser):
            for backend in sorted(set(backends.values())):
                names = [n for n in paths if backends[n] == backend]
                live = live_fps(browser, url, backend, args.seconds, names, paths, args.rounds, frames=args.frames)
                for name in names:
                    results["files"][name] = {"file": paths[name].name, "mb": round(paths[name].stat().st_size / 1e6, 2),
                                              **live[name]}
    for name, path in paths.items():
        if path.suffix == ".tflite":
            results["files"][name]["native_litert_ms"] = round(native_litert_ms(path, None, os.cpu_count() or 1, 50), 2)
    print(f"/detect, the fake camera on bus.jpg and zidane.jpg; native LiteRT at {os.cpu_count()} threads")
    print(f"{'file':44s} {'MB':>5s} {'backend':12s} {'ms/frame':>9s} {'FPS':>6s} {'model ms':>9s} {'native ms':>10s}")
    for name, r in results["files"].items():
        native = r.get("native_litert_ms")
        print(f"{name:44s} {r['mb']:5.1f} {r['backend']:12s} {r['frame_ms']:9.1f} {r['fps']:6.1f} "
              f"{r['stages_ms']['model']:9.1f} {native if native is not None else '':>10}")
    names = ("yolo11n .tflite float32 (TF export)", "yolo11n .tflite int8 (TF export)")
    pair = [results["files"].get(n) for n in names]
    if all(pair):
        results["int8"] = {
            "litert_js_wasm_model_speedup": round(pair[0]["stages_ms"]["model"] / pair[1]["stages_ms"]["model"], 3),
            "native_litert_speedup": round(pair[0]["native_litert_ms"] / pair[1]["native_litert_ms"], 3),
            **int8_cost(paths[names[0]], paths[names[1]])}
        i8 = results["int8"]
        print(f"int8 over float32, the same yolo11n: LiteRT.js WASM model {i8['litert_js_wasm_model_speedup']:.2f}x, "
              f"native LiteRT {i8['native_litert_speedup']:.2f}x; predict() on bus.jpg and zidane.jpg: "
              f"{i8['matched']} of float32's {i8['float32_detections']} found (int8 {i8['int8_detections']}), "
              f"box IoU worst {i8['worst_iou']:.3f}, score change worst {i8['worst_score_change']:.3f}")
    print("stages (ms): " + ", ".join(STAGES))
    write_results("browser_user_files", args, results, chromium=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
