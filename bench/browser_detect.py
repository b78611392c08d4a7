"""/detect in headless Chromium, per backend, side by side in one run: live FPS on the fake
camera, the full per-frame pipeline vs the bare model, first result with a warm cache; then
the same .tflite in native LiteRT at the browser's thread count.

Prints, for the default backends (TF.js WASM and LiteRT.js WASM):
  - live FPS litert-wasm / wasm          (target >= 1.8)
  - bare model litert-wasm / native LiteRT (target <= 3)
  - pipeline / bare per backend
  - live FPS yolov5n-320 / yolov5n per backend, when the 320-px build is installed
    (expect about 3x: 4x fewer pixels, less fixed cost per frame)
  - LiteRT.js WASM / native LiteRT per thread count (1 and 2), the model's run alone, and
    the input and output copies around it: where the browser's model time goes
  - live FPS of the page / a bare seed-style loop on TF.js backends (target > 1): the loop of
    the original single-file demo, on the same camera and graph, with the page paused:
    pixels -> stretch resize -> /255 -> executeAsync -> dataSync -> draw, one frame per
    animation frame; no letterbox, no results list, no tracking.

    .venv/bin/python -m bench.browser_detect [--models DIR] [--backends wasm litert-wasm webgl]
                                             [--frames 20] [--seconds 20] [--threads 2]
                                             [--out bench/results/browser_detect.json]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench._browser import BARE_MODEL_TIMES, FRAME_STAGES, LIVE_FPS, median, native_litert_ms, parse_args, server_and_browser
from bench._results import write_results
from converters.sources import load_photo
from modelcontract import manifest as manifest_io
from modelcontract.geometry import prepare
from harness.browser import fake_camera_flags
from harness.clips import write_y4m
from harness.photos import letterbox_rgb


# The seed demo's per-frame work, as a bare loop on the page's video for `seconds`
# (-> frames per second). Written for this bench: what the seed page did, without its page.
SEED_LOOP_FPS = """async ([modelUrl, seconds]) => {
  const model = await tf.loadGraphModel(modelUrl);
  const video = document.getElementById('video');
  const [height, width] = model.inputs[0].shape.slice(1, 3);
  const canvas = Object.assign(document.createElement('canvas'), {width: video.videoWidth, height: video.videoHeight});
  const ctx = canvas.getContext('2d');
  const once = async () => {
    const input = tf.tidy(() => tf.image.resizeBilinear(tf.browser.fromPixels(video), [height, width])
      .div(255).expandDims(0));
    const outputs = await model.executeAsync(input);
    const [boxes, , , valid] = outputs.map((t) => t.dataSync());
    ctx.drawImage(video, 0, 0);
    for (let i = 0; i < valid[0]; i++) {
      const [x1, y1, x2, y2] = boxes.subarray(i * 4, i * 4 + 4);
      ctx.strokeRect(x1 * canvas.width, y1 * canvas.height, (x2 - x1) * canvas.width, (y2 - y1) * canvas.height);
    }
    tf.dispose([input, ...outputs]);
  };
  await once();
  let frames = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < seconds * 1000) {
    await once();
    frames += 1;
    await new Promise((resolve) => requestAnimationFrame(resolve));
  }
  const fps = frames * 1000 / (performance.now() - t0);
  model.dispose();
  return fps;
}"""


# LiteRT.js alone on the .tflite at each thread count: the median ms of compiled.run, and of
# the copies around it (the input into the WASM heap, the outputs out of it).
LITERT_THREADS = """async ([url, threadCounts, n]) => {
  const {loadRuntime} = await import('/static/js/runtime/litert.js');
  const runtime = await loadRuntime('wasm');
  const core = await import('/vendor/litertjs/core/index.js');
  const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
  const median = (a) => a.sort((p, q) => p - q)[a.length >> 1];
  const out = {threadsBuild: runtime.threads, relaxedSimd: runtime.relaxedSimd,
               hardwareConcurrency: navigator.hardwareConcurrency, byThreads: {}};
  for (const numThreads of threadCounts) {
    const model = await core.loadAndCompile(bytes, {accelerator: 'wasm', cpuOptions: {numThreads}});
    const [input] = model.getInputDetails();
    const values = new Float32Array(input.shape.reduce((a, b) => a * b, 1)).fill(0.5);
    const run = [], copies = [];
    for (let i = 0; i <= n; i++) {
      const t0 = performance.now();
      const x = new core.Tensor(values, Array.from(input.shape));
      const t1 = performance.now();
      const result = await model.run([x]);
      const t2 = performance.now();
      for (const t of Object.values(result)) { t.toTypedArray(); t.delete(); }
      x.delete();
      if (i) { run.push(t2 - t1); copies.push(t1 - t0 + performance.now() - t2); }
    }
    model.delete();
    out.byThreads[numThreads] = {run_ms: median(run), copies_ms: median(copies)};
  }
  return out;
}"""


def open_live(context, url, model_id, backend):
    """/detect on the fake camera, past its first frames; returns (page, backend it chose)."""
    page = context.new_page()
    page.goto(f"{url}/detect?model={model_id}&backend={backend}")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=600_000)
    # Steady state: past the warm-up frames and the one-off server round trip the page makes
    # at frame 10 to offer the server when it would be faster (detect.js maybeOfferServer).
    page.wait_for_function("() => +document.getElementById('results').dataset.frame >= 12", timeout=600_000)
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
    pipeline = median([f["total"] for f in page.evaluate(FRAME_STAGES, args.frames)])
    page.click("#pause-button")
    bare = median(page.evaluate(BARE_MODEL_TIMES, [model_id, backend, "view", args.frames]))
    # The seed's loop runs on the TF.js graph: on a TF.js backend only (the page is paused).
    seed = None if backend.startswith("litert") else page.evaluate(
        SEED_LOOP_FPS, [f"/models/{model_id}/tfjs/model.json", args.seconds])
    # Warm cache: same context (HTTP cache + remembered backend), fresh navigation.
    page.goto(f"{url}/detect?model={model_id}&backend={backend}")
    page.wait_for_function("() => document.body.dataset.firstResultMs", timeout=600_000)
    first = float(page.evaluate("() => document.body.dataset.firstResultMs"))
    context.close()
    if chosen != backend:
        sys.exit(f"the page ran {chosen}, not {backend}")
    return {"fps": fps, "pipeline": pipeline, "bare": bare, "first": first, "seed_fps": seed}


def main() -> None:
    args = parse_args("browser_detect", __doc__, backends=("wasm", "litert-wasm"), seconds=20)
    model_id = "yolov5n"
    small_id = "yolov5n-320"  # the same weights at 320 px (converters yolov5n --imgsz 320)
    has_small = (args.models / small_id / "manifest.json").is_file()
    photo = letterbox_rgb(load_photo("bus.jpg"))
    manifest = manifest_io.read(args.models / model_id)
    with tempfile.TemporaryDirectory() as tmp:
        y4m = write_y4m(Path(tmp) / "bus.y4m", photo)
        with server_and_browser(args.models, fake_camera_flags(y4m)) as (url, browser):
            results, small_fps, litert_threads = {}, {}, {}
            if "litert-wasm" in args.backends:
                context = browser.new_context()
                page = context.new_page()
                page.goto(f"{url}/detect?model={model_id}&backend=wasm&camera=0")
                page.wait_for_selector("#model-status[data-state='ready']", timeout=600_000)
                probe = page.evaluate(LITERT_THREADS, [f"/models/{model_id}/{manifest['server']['model']}", [1, 2], args.frames])
                context.close()
                litert_threads = probe.pop("byThreads")
                print(f"LiteRT.js build: {probe}")
            for b in args.backends:  # the two sizes back to back on each backend, same camera
                results[b] = measure(browser, url, model_id, b, args)
                if has_small:
                    small_fps[b] = live_fps(browser, url, small_id, b, args.seconds)
    print(f"{'backend':12s} {'live FPS':>9s} {'bare ms':>8s} {'pipeline ms':>12s} {'pipe/bare':>10s}  first result")
    for backend, r in results.items():
        print(f"{backend:12s} {r['fps']:9.2f} {r['bare']:8.1f} {r['pipeline']:12.1f} "
              f"{r['pipeline'] / r['bare']:10.3f}  {r['first']:.0f} ms")

    # The same letterboxed frame through native LiteRT at the browser's thread count.
    x, _ = prepare(photo, manifest["input"])
    tflite = args.models / model_id / manifest["server"]["model"]
    native = native_litert_ms(tflite, x, args.threads, args.frames)
    print(f"{'native LiteRT':12s} {'':9s} {native:8.1f}   ({args.threads} threads, ai-edge-litert)")
    per_thread = {}
    if "litert-wasm" in results:
        for threads, browser_ms in litert_threads.items():
            per_thread[threads] = {"litert_js_run_ms": browser_ms["run_ms"], "copies_ms": browser_ms["copies_ms"],
                                   "native_ms": native_litert_ms(tflite, x, int(threads), args.frames)}
            per_thread[threads]["ratio"] = per_thread[threads]["litert_js_run_ms"] / per_thread[threads]["native_ms"]
            print(f"LiteRT.js run alone at {threads} thread(s): {browser_ms['run_ms']:.1f} ms "
                  f"(+{browser_ms['copies_ms']:.1f} ms copies) vs native {per_thread[threads]['native_ms']:.1f} ms: "
                  f"{per_thread[threads]['ratio']:.2f}x")
    ratios = {}
    for backend, r in results.items():
        ratios[f"pipeline_over_bare_{backend}"] = r["pipeline"] / r["bare"]
        print(f"pipeline / bare model on {backend}: {r['pipeline'] / r['bare']:.3f} (target <= 1.10)")
        if r["seed_fps"]:
            ratios[f"live_fps_page_over_seed_{backend}"] = r["fps"] / r["seed_fps"]
            print(f"live FPS page / seed loop on {backend}: {r['fps']:.2f} / {r['seed_fps']:.2f} = "
                  f"{r['fps'] / r['seed_fps']:.2f}x (target > 1)")
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
                         "pipeline_over_bare": r["pipeline"] / r["bare"], "first_result_ms": r["first"],
                         "seed_loop_fps": r["seed_fps"]}
                     for b, r in results.items()},
        "native_litert_ms": native,
        "litert_js_by_threads": per_thread,
        "small_model": {"model": small_id, "live_fps": small_fps} if has_small else None,
        "ratios": ratios}, chromium=True)


if __name__ == "__main__":
    main()
