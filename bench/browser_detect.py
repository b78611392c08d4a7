"""/detect in headless Chromium, per backend, side by side in one run: live FPS on the fake
camera, the full per-frame pipeline vs the bare model, first result with a warm cache; then
the same .tflite in native LiteRT at the browser's thread count.

Prints, for the default backends (TF.js WASM and LiteRT.js WASM):
  - live FPS litert-wasm / wasm          (target >= 1.8)
  - bare model litert-wasm / native LiteRT (target <= 3)
  - pipeline / bare per backend
  - live FPS yolov5n-320 / yolov5n per backend, when the 320-px build is installed
    (expect about 3x: 4x fewer pixels, less fixed cost per frame)

    .venv/bin/python bench/browser_detect.py [--models DIR] [--backends wasm litert-wasm webgl]
                                             [--frames 20] [--seconds 20] [--threads 2]
                                             [--out bench/results/browser_detect.json]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from _browser import BARE_MODEL_TIMES, median, native_litert_ms, parse_args, server_and_browser

from bench._results import write_results
from converters.sources import load_photo
from tests.support.browser import fake_camera_flags
from tests.support.clips import write_y4m
from tests.support.photos import letterbox_rgb

FRAME_TIMES = """async (n) => {
  const list = document.getElementById('results');
  const seen = [];
  let last = +list.dataset.frame;
  while (seen.length < n) {
    await new Promise((r) => setTimeout(r, 5));
    if (+list.dataset.frame !== last) { last = +list.dataset.frame; seen.push(+list.dataset.totalMs); }
  }
  return seen;
}"""

# Frames drawn per second over a window of the live loop.
LIVE_FPS = """async (seconds) => {
  const list = document.getElementById('results');
  const f0 = +list.dataset.frame, t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  return (+list.dataset.frame - f0) * 1000 / (performance.now() - t0);
}"""


def open_live(context, url, model_id, backend):
    """/detect on the fake camera, past its first frames; returns (page, backend it chose)."""
    page = context.new_page()
    page.goto(f"{url}/detect?model={model_id}&backend={backend}")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=600_000)
    page.wait_for_function("() => +document.getElementById('results').dataset.frame >= 3", timeout=600_000)
    return page, page.get_attribute("body", "data-backend")


def live_fps(browser, url, model_id, backend, seconds) -> float:
    context = browser.new_context()
    page, chosen = open_live(context, url, model_id, backend)
    fps = page.evaluate(LIVE_FPS, seconds)
    context.close()
    if chosen != backend:
        sys.exit(f"the page ran {chosen}, not {backend}")
    return fps


def measure(browser, url, model_id, backend, args) -> dict:
    context = browser.new_context()
    page, chosen = open_live(context, url, model_id, backend)
    fps = page.evaluate(LIVE_FPS, args.seconds)
    pipeline = median(page.evaluate(FRAME_TIMES, args.frames))
    page.click("#pause-button")
    bare = median(page.evaluate(BARE_MODEL_TIMES, [model_id, backend, "view", args.frames]))
    # Warm cache: same context (HTTP cache + remembered backend), fresh navigation.
    page.goto(f"{url}/detect?model={model_id}&backend={backend}")
    page.wait_for_function("() => document.body.dataset.firstResultMs", timeout=600_000)
    first = float(page.evaluate("() => document.body.dataset.firstResultMs"))
    context.close()
    if chosen != backend:
        sys.exit(f"the page ran {chosen}, not {backend}")
    return {"fps": fps, "pipeline": pipeline, "bare": bare, "first": first}


def main() -> None:
    args = parse_args("browser_detect", __doc__, backends=("wasm", "litert-wasm"), seconds=20)
    model_id = "yolov5n"
    small_id = "yolov5n-320"  # the same weights at 320 px (converters yolov5n --imgsz 320)
    has_small = (args.models / small_id / "manifest.json").is_file()
    photo = letterbox_rgb(load_photo("bus.jpg"))
    with tempfile.TemporaryDirectory() as tmp:
        y4m = write_y4m(Path(tmp) / "bus.y4m", photo)
        with server_and_browser(args.models, fake_camera_flags(y4m)) as (url, browser):
            results, small_fps = {}, {}
            for b in args.backends:  # the two sizes back to back on each backend, same camera
                results[b] = measure(browser, url, model_id, b, args)
                if has_small:
                    small_fps[b] = live_fps(browser, url, small_id, b, args.seconds)
    print(f"{'backend':12s} {'live FPS':>9s} {'bare ms':>8s} {'pipeline ms':>12s} {'pipe/bare':>10s}  first result")
    for backend, r in results.items():
        print(f"{backend:12s} {r['fps']:9.2f} {r['bare']:8.1f} {r['pipeline']:12.1f} "
              f"{r['pipeline'] / r['bare']:10.3f}  {r['first']:.0f} ms")

    # The same letterboxed frame through native LiteRT at the browser's thread count.
    from modelcontract import manifest as manifest_io
    from modelcontract.geometry import prepare

    manifest = manifest_io.read(args.models / model_id)
    x, _ = prepare(photo, manifest["input"])
    native = native_litert_ms(args.models / model_id / manifest["server"]["model"], x, args.threads, args.frames)
    print(f"{'native LiteRT':12s} {'':9s} {native:8.1f}   ({args.threads} threads, ai-edge-litert)")
    ratios = {}
    if "wasm" in results and "litert-wasm" in results:
        ratios["live_fps_litert_wasm_over_wasm"] = results["litert-wasm"]["fps"] / results["wasm"]["fps"]
        print(f"live FPS litert-wasm / wasm: {ratios['live_fps_litert_wasm_over_wasm']:.2f}x (target >= 1.8)")
    if "litert-wasm" in results:
        ratios["bare_litert_wasm_over_native"] = results["litert-wasm"]["bare"] / native
        print(f"bare model litert-wasm / native LiteRT: {ratios['bare_litert_wasm_over_native']:.2f}x (target <= 3)")
    if not has_small:
        print(f"({small_id} is not installed in {args.models}: build it with "
              f".venv/bin/python -m converters yolov5n --imgsz 320 ... for the 320 vs 640 ratio)")
    for backend, fps in small_fps.items():
        print(f"live FPS {small_id} / {model_id} on {backend}: {fps:.2f} / {results[backend]['fps']:.2f} = "
              f"{fps / results[backend]['fps']:.2f}x (expect about 3x)")
        ratios[f"live_fps_320_over_640_{backend}"] = fps / results[backend]["fps"]
    write_results("browser_detect", args, {
        "model": model_id,
        "backends": {b: {"live_fps": r["fps"], "bare_ms": r["bare"], "pipeline_ms": r["pipeline"],
                         "pipeline_over_bare": r["pipeline"] / r["bare"], "first_result_ms": r["first"]}
                     for b, r in results.items()},
        "native_litert_ms": native,
        "small_model": {"model": small_id, "live_fps": small_fps} if has_small else None,
        "ratios": ratios}, chromium=True)


if __name__ == "__main__":
    main()
