"""Do quantised .tflite files of YOLOv5n pay on LiteRT.js WASM? One run, side by side:

  fp32      what the converter ships (model.tflite)
  float16   float16 weights (TFLite's float16 quantisation; XNNPACK computes in fp32)
  int8-dyn  int8 weights, dynamic-range activations (TFLite's default optimisation)
  int8      int8 weights and activations, calibrated on synthetic scenes (not the photos
            measured), float input and output: what Ultralytics' int8=True export gives

For each: size, LiteRT.js WASM ms in headless Chromium (the bytes are compiled in the page,
same input for all), native LiteRT ms at --threads, and the accuracy cost against fp32 on
bus.jpg and zidane.jpg (detections kept, worst IoU and score change of the matched ones).

    .venv/bin/python -m bench.litert_quantized [--weights ../shared/models/yolov5n.pt] [--runs 10]
                                               [--out bench/results/litert_quantized.json]
"""
from __future__ import annotations

import argparse
import base64
import tempfile
from pathlib import Path

import numpy as np

from bench._browser import ROOT, median, native_litert_ms
from bench._results import add_out_option, write_results
from harness.browser import launch
from harness.servers import live_server

PAGE_MS = """async ([b64, shape, n]) => {
  const litert = await import('/static/js/runtime/litert.js');
  const runtime = await litert.loadRuntime();
  const core = await import('/vendor/litertjs/core/index.js');
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const compiled = await core.loadAndCompile(bytes, {accelerator: 'wasm'});
  const input = new core.Tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.5), shape);
  const times = [];
  for (let i = 0; i <= n; i++) {
    const t0 = performance.now();
    const out = await compiled.run([input]);
    out.forEach((t) => t.toTypedArray());
    times.push(performance.now() - t0);
    out.forEach((t) => t.delete());
  }
  input.delete();
  compiled.delete();
  return {times: times.slice(1), note: runtime.note};
}"""


def calibration(shape, count: int = 32):
    """Representative inputs for static int8: synthetic scenes letterboxed to the input."""
    from converters.scenes.dataset import scene
    from modelcontract.geometry import prepare

    from converters import yolov5

    for seed in range(count):
        image, _ = scene("segment", 700_000 + seed, max(shape[1:3]))
        yield [prepare(image, yolov5.INPUT)[0]]


def convert(saved_model: Path, out: Path, variant: str) -> Path:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model))
    if variant != "fp32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "float16":
        converter.target_spec.supported_types = [tf.float16]
    if variant == "int8":   # ops without an int8 kernel (the in-graph NMS) stay float
        from converters import yolov5

        converter.representative_dataset = lambda: calibration(yolov5.INPUT["shape"])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.lite.OpsSet.TFLITE_BUILTINS]
    out.write_bytes(converter.convert())
    return out


def detections(tflite_path: Path, x: np.ndarray) -> dict:
    from converters import tflite
    from converters.yolov5.nms import OUTPUT_KEYS, detections_of

    return detections_of(tflite.run_tflite(tflite_path, {"images": x}), {k: k for k in OUTPUT_KEYS})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weights", type=Path, default=ROOT.parent / "shared" / "models" / "yolov5n.pt")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    add_out_option(parser, "litert_quantized")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from converters import sources, yolov5
    from converters.yolov5.graph import save_saved_model
    from server import create_app
    from modelcontract.geometry import prepare

    inputs = {name: prepare(sources.load_photo(name), yolov5.INPUT)[0] for name in ("bus.jpg", "zidane.jpg")}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = yolov5.load_model(yolov5.resolve_source(str(args.weights)))
        saved = save_saved_model(model, tmp / "saved_model", yolov5.INPUT)
        files = {v: convert(saved, tmp / f"{v}.tflite", v) for v in ("fp32", "float16", "int8-dyn", "int8")}
        reference = {name: detections(files["fp32"], x) for name, x in inputs.items()}
        rows = {}
        app = create_app({"MODELS_DIR": tmp, "TESTING": True})
        with live_server(app) as url, sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page()
            page.goto(f"{url}/")
            for variant, path in files.items():
                b64 = base64.b64encode(path.read_bytes()).decode()
                web = page.evaluate(PAGE_MS, [b64, list(yolov5.INPUT["shape"]), args.runs])
                native = native_litert_ms(path, inputs["bus.jpg"], args.threads, args.runs)
                cost = [yolov5.match_detections(reference[n], detections(path, x)) for n, x in inputs.items()]
                rows[variant] = {"mb": path.stat().st_size / 1e6, "web": median(web["times"]), "native": native,
                                 "kept": sum(c["count"] for c in cost), "ref": sum(c["reference_count"] for c in cost),
                                 "iou": min(c["min_iou_same_class"] for c in cost),
                                 "score": max(c["max_score_abs"] for c in cost), "note": web["note"]}
            browser.close()
    print(f"LiteRT.js: {rows['fp32']['note']}; native LiteRT: {args.threads} threads")
    print(f"{'variant':9s} {'MB':>6s} {'LiteRT.js ms':>13s} {'vs fp32':>8s} {'native ms':>10s} "
          f"{'detections':>11s} {'min IoU':>8s} {'max |dscore|':>13s}")
    for variant, r in rows.items():
        print(f"{variant:9s} {r['mb']:6.2f} {r['web']:13.1f} {rows['fp32']['web'] / r['web']:7.2f}x {r['native']:10.1f} "
              f"{r['kept']:>5d}/{r['ref']:<5d} {r['iou']:8.4f} {r['score']:13.4f}")
    write_results("litert_quantized", args, {
        "litert_js": rows["fp32"]["note"], "native_threads": args.threads,
        "variants": {v: {"mb": r["mb"], "litert_js_wasm_ms": r["web"], "fp32_over_this": rows["fp32"]["web"] / r["web"],
                         "native_litert_ms": r["native"], "detections_kept": r["kept"], "detections_fp32": r["ref"],
                         "min_iou_vs_fp32": r["iou"], "max_score_change_vs_fp32": r["score"]}
                     for v, r in rows.items()}}, chromium=True)


if __name__ == "__main__":
    main()
