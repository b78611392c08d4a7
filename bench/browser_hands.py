"""Hand pose page speed in headless Chromium: the page's hand pipeline (static/js/tensor/hands.js,
hand-pose-detection's 'tfjs' steps) per backend and model size — TF.js WASM on the converted
graphs and LiteRT.js WASM on the same .tflite files the server runs, side by side in one run —
against the library's 'mediapipe' runtime (MediaPipe's own WASM + WebGL solution, served
locally from @mediapipe/hands) on the same camera frames (up_3.jpg letterboxed into a
640x480 fake camera).

Per configuration: FPS of the live page (one frame in flight), median ms per page stage
(grab the frame, estimate = the whole pipeline, gesture, draw), and the bare models on the
same backend (palm detector on [1,192,192,3], landmark model on [1,224,224,3]: predict and
read back) so the pipeline's own overhead shows; native LiteRT (ai-edge-litert) at
--threads threads times the same .tflite files as the limit. Prints litert-wasm / wasm FPS
ratios (target: >= 1.6x) and tfjs / mediapipe ratios. The mediapipe runtime needs WebGL
(SwiftShader here: slow); it gets --peer-frames frames and at most --peer-seconds.
--rounds N measures every backend N times, interleaved, and keeps each one's median FPS
(other load on the machine then hits both alike).

    .venv/bin/python -m bench.browser_hands [--models DIR] [--backends wasm litert-wasm] [--frames 40] [--no-peer]
                                            [--out bench/results/browser_hands.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench._browser import ROOT, median, server_and_browser
from bench._results import add_out_option, write_results
from harness.browser import fake_camera_flags
from harness.clips import write_y4m
from harness.photos import letterbox_rgb

STAGES = ("grab", "estimate", "gesture", "draw")

# Per-frame timings (data-timing) of the next n frames, with their arrival times; stops at the deadline.
FRAMES = """async ([n, seconds]) => {
  const list = document.getElementById('results');
  const seen = [];
  let last = +list.dataset.frame;
  const deadline = performance.now() + seconds * 1000;
  while (seen.length < n && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 5));
    if (+list.dataset.frame !== last) {
      last = +list.dataset.frame;
      seen.push({at: performance.now(), timing: JSON.parse(list.dataset.timing), hands: +list.dataset.count});
    }
  }
  return seen;
}"""

# The two models bare on the page's backend (a TF.js graph, or the .tflite on LiteRT.js):
# median ms of predict + read back of every output.
BARE = """async ([models, n, litert]) => {
  const {loadTflite} = await import('/static/js/runtime/litert.js');
  const out = {};
  for (const [key, graphUrl, tfliteUrl, shape] of models) {
    const model = litert ? await loadTflite(tfliteUrl, 'wasm') : await tf.loadGraphModel(graphUrl);
    const x = tf.zeros(shape);
    const once = async () => {
      const t0 = performance.now();
      let y = litert ? await model.predict(x) : model.execute(x);
      y = Array.isArray(y) ? y : [y];
      await Promise.all(y.map((t) => t.data()));
      tf.dispose(y);
      return performance.now() - t0;
    };
    await once();
    const times = [];
    for (let i = 0; i < n; i++) times.push(await once());
    times.sort((a, b) => a - b);
    out[key] = times[Math.floor(times.length / 2)];
    x.dispose();
    model.dispose();
  }
  return out;
}"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=ROOT / "models", help="models folder (default ./models)")
    parser.add_argument("--model-id", default="handpose")
    parser.add_argument("--backends", nargs="+", default=["wasm", "litert-wasm"], help="also: webgl, litert-webgpu")
    parser.add_argument("--variants", nargs="+", default=["full", "lite"])
    parser.add_argument("--frames", type=int, default=40, help="frames measured per configuration")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds per backend (median FPS)")
    parser.add_argument("--threads", type=int, default=2, help="native LiteRT threads (the limit)")
    parser.add_argument("--hands", type=int, default=2, choices=(1, 2), help="maxHands (page default 2)")
    parser.add_argument("--peer-frames", type=int, default=6)
    parser.add_argument("--peer-seconds", type=float, default=60)
    parser.add_argument("--no-peer", action="store_true", help="skip the mediapipe runtime")
    add_out_option(parser, "browser_hands")
    return parser.parse_args()


def camera_frame():
    from PIL import Image

    shared = ROOT.parent / "shared" / "fixtures" / "hands" / "up_3.jpg"
    if shared.is_file():
        with Image.open(shared) as im:
            import numpy as np

            return "up_3.jpg", letterbox_rgb(np.asarray(im.convert("RGB")))
    from converters.sources import load_photo

    return "zidane.jpg", letterbox_rgb(load_photo("zidane.jpg"))


def bare_ms(browser, url, bare, n, litert):
    """The bare models on a page of their own (TF.js on WASM, no camera): LiteRT.js hangs
    deleting the newest of three or more compiled models, so none of the page's are alive."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{url}/hands?backend=wasm&camera=0")
    try:
        page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
        return page.evaluate(BARE, [bare, n, litert])
    finally:
        context.close()


def measure(browser, url, query, frames, seconds, bare=None, litert=False):
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{url}/hands?{query}")
    try:
        page.wait_for_selector("#model-status[data-state='ready']", timeout=int(seconds * 1000) + 120_000)
        page.wait_for_function("() => +(document.getElementById('results').dataset.frame || 0) >= 2",
                               timeout=int(seconds * 1000) + 60_000)
        seen = page.evaluate(FRAMES, [frames, seconds])
    finally:
        context.close()
    row = {"frames": len(seen), "hands": median([s["hands"] for s in seen])}
    row["fps"] = (len(seen) - 1) / ((seen[-1]["at"] - seen[0]["at"]) / 1000) if len(seen) > 1 else float("nan")
    for stage in STAGES:
        row[stage] = median([s["timing"].get(stage, float("nan")) for s in seen])
    row["bare"] = bare_ms(browser, url, bare, max(5, frames // 2), litert) if bare else None
    return row


def native_ms(models: Path, model_id: str, variant: str, threads: int, n: int) -> dict:
    """Native LiteRT (ai-edge-litert) on the same .tflite files, zeros in: median ms per invoke."""
    import numpy as np

    from converters.tflite import interpreter

    files = json.loads((models / model_id / "manifest.json").read_text())["server"]["models"]
    out = {}
    for key in ("detector", "landmark"):
        interp = interpreter(models / model_id / files[f"{key}_{variant}"], threads=threads)
        detail = interp.get_input_details()[0]
        interp.set_tensor(detail["index"], np.zeros(detail["shape"], dtype=detail["dtype"]))
        interp.invoke()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            interp.invoke()
            times.append((time.perf_counter() - t0) * 1e3)
        out[key] = median(times)
    return out


def main() -> None:
    args = parse_args()
    if not (args.models / args.model_id / "manifest.json").is_file():
        sys.exit(f"no {args.model_id} model in {args.models}: run `python -m converters handpose --out {args.models}`")
    results = {}
    native = {}
    with tempfile.TemporaryDirectory() as tmp:
        photo, rgb = camera_frame()
        y4m = write_y4m(Path(tmp) / "hand.y4m", rgb)
        print(f"camera: {photo} letterboxed to 640x480; maxHands {args.hands}; {args.rounds} round(s)")
        with server_and_browser(args.models, fake_camera_flags(y4m)) as (url, browser):
            for variant in args.variants:
                native[variant] = native_ms(args.models, args.model_id, variant, args.threads, max(5, args.frames // 2))
                print(f"native LiteRT {args.threads} threads {variant}: "
                      + ", ".join(f"{k} {v:.1f} ms" for k, v in native[variant].items()), flush=True)
                root = f"/models/{args.model_id}"
                files = json.loads((args.models / args.model_id / "manifest.json").read_text())["server"]["models"]
                bare = [[key, f"{root}/tfjs/{key}_{variant}/model.json", f"{root}/{files[f'{key}_{variant}']}", shape]
                        for key, shape in (("detector", [1, 192, 192, 3]), ("landmark", [1, 224, 224, 3]))]
                rows: dict = {}
                for _ in range(args.rounds):
                    for backend in args.backends:
                        query = f"backend={backend}&variant={variant}&hands={args.hands}"
                        row = measure(browser, url, query, args.frames, 300, bare, litert=backend.startswith("litert"))
                        rows.setdefault(backend, []).append(row)
                        print_row(("page", backend, variant), row)
                for backend, runs in rows.items():
                    runs.sort(key=lambda r: r["fps"])
                    results[("page", backend, variant)] = runs[len(runs) // 2]
                if not args.no_peer:
                    query = f"runtime=mediapipe&variant={variant}&hands={args.hands}"
                    try:
                        row = measure(browser, url, query, args.peer_frames, args.peer_seconds)
                    except Exception as err:  # a peer that does not start is reported, not fatal
                        print(f"mediapipe {variant}: failed: {str(err).splitlines()[0]}")
                        continue
                    results[("mediapipe", "webgl", variant)] = row
                    print_row(("mediapipe", "webgl", variant), row)
    print()
    ratios: dict = {}
    for variant in args.variants:
        tfjs, lite = results.get(("page", "wasm", variant)), results.get(("page", "litert-wasm", variant))
        if tfjs and lite:
            ratios[f"{variant}_fps_litert_wasm_over_wasm"] = lite["fps"] / tfjs["fps"]
            print(f"{variant}: litert-wasm {lite['fps']:.2f} FPS vs TF.js wasm {tfjs['fps']:.2f} FPS -> "
                  f"{lite['fps'] / tfjs['fps']:.2f}x the FPS (target >= 1.6x); estimate {lite['estimate']:.0f} vs "
                  f"{tfjs['estimate']:.0f} ms")
            for key in ("detector", "landmark"):
                if lite["bare"] and tfjs["bare"]:
                    print(f"  bare {key}: litert-wasm {lite['bare'][key]:.1f} ms, TF.js wasm {tfjs['bare'][key]:.1f} ms "
                          f"({tfjs['bare'][key] / lite['bare'][key]:.2f}x), native LiteRT {args.threads} threads "
                          f"{native[variant][key]:.1f} ms (litert-wasm {lite['bare'][key] / native[variant][key]:.2f}x native)")
        peer = results.get(("mediapipe", "webgl", variant))
        ours = {k[1]: v for k, v in results.items() if k[0] == "page" and k[2] == variant}
        if not peer or not ours:
            continue
        best = max(ours, key=lambda b: ours[b]["fps"])
        r = ours[best]
        ratios[f"{variant}_fps_page_{best}_over_mediapipe"] = r["fps"] / peer["fps"]
        print(f"{variant}: page on {best} {r['fps']:.2f} FPS vs mediapipe runtime {peer['fps']:.2f} FPS -> "
              f"{r['fps'] / peer['fps']:.1f}x the FPS; estimate {r['estimate']:.0f} vs {peer['estimate']:.0f} ms "
              f"-> {peer['estimate'] / r['estimate']:.1f}x faster")
    write_results("browser_hands", args, {
        "camera": photo, "model": args.model_id,
        "runs": [{"runtime": runtime, "backend": backend, "variant": variant, **row}
                 for (runtime, backend, variant), row in results.items()],
        "native_litert_ms": native, "ratios": ratios}, chromium=True)


def print_row(key, row):
    runtime, backend, variant = key
    stages = "  ".join(f"{s} {row[s]:7.1f}" for s in STAGES)
    bare = ""
    if row["bare"]:
        bare = "  bare: " + ", ".join(f"{k} {v:.1f} ms" for k, v in row["bare"].items())
    print(f"{runtime:9s} {backend:11s} {variant:4s}  {row['fps']:6.2f} FPS  ({row['frames']} frames, "
          f"{row['hands']:.0f} hand)  ms: {stages}{bare}", flush=True)


if __name__ == "__main__":
    main()
