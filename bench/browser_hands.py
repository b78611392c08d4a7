"""Hand pose page speed in headless Chromium: our converted graphs on hand-pose-detection's
'tfjs' runtime, per backend and model size, against the same library's 'mediapipe' runtime
(MediaPipe's own WASM + WebGL solution, served locally from @mediapipe/hands) on the same
camera frames (up_3.jpg letterboxed into a 640x480 fake camera).

Per configuration: FPS of the live page (one frame in flight), median ms per page stage
(grab the frame, estimate = the library's whole estimateHands, gesture, draw), and for the
tfjs runtime the bare graphs on the same backend (palm detector on [1,192,192,3], landmark
model on [1,224,224,3]) so the library's own overhead shows. Prints tfjs/mediapipe ratios.
The mediapipe runtime needs WebGL (SwiftShader here: slow); it gets --peer-frames frames and
at most --peer-seconds.

    .venv/bin/python bench/browser_hands.py [--models DIR] [--backends wasm webgl] [--frames 20]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _browser import ROOT, median, server_and_browser

from tests.browser import fake_camera_flags, letterbox_rgb, write_y4m

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

# The two graphs bare on the page's backend: median ms of predict + read back.
BARE = """async ([urls, n]) => {
  const out = {};
  for (const [key, url, shape] of urls) {
    const model = await tf.loadGraphModel(url);
    const x = tf.zeros(shape);
    const once = async () => {
      const t0 = performance.now();
      const y = model.execute(x);
      await (Array.isArray(y) ? y[0] : y).data();
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
    parser.add_argument("--backends", nargs="+", default=["wasm", "webgl"])
    parser.add_argument("--variants", nargs="+", default=["full", "lite"])
    parser.add_argument("--frames", type=int, default=20, help="frames measured per tfjs configuration")
    parser.add_argument("--hands", type=int, default=2, choices=(1, 2), help="maxHands (page default 2)")
    parser.add_argument("--peer-frames", type=int, default=6)
    parser.add_argument("--peer-seconds", type=float, default=60)
    parser.add_argument("--no-peer", action="store_true", help="skip the mediapipe runtime")
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


def measure(browser, url, query, frames, seconds, bare=None):
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{url}/hands?{query}")
    try:
        page.wait_for_selector("#model-status[data-state='ready']", timeout=int(seconds * 1000) + 120_000)
        page.wait_for_function("() => +(document.getElementById('results').dataset.frame || 0) >= 2",
                               timeout=int(seconds * 1000) + 60_000)
        seen = page.evaluate(FRAMES, [frames, seconds])
        bare_ms = None
        if bare:
            page.click("#pause-button")
            bare_ms = page.evaluate(BARE, [bare, max(5, frames // 2)])
    finally:
        context.close()
    row = {"frames": len(seen), "hands": median([s["hands"] for s in seen])}
    row["fps"] = (len(seen) - 1) / ((seen[-1]["at"] - seen[0]["at"]) / 1000) if len(seen) > 1 else float("nan")
    for stage in STAGES:
        row[stage] = median([s["timing"].get(stage, float("nan")) for s in seen])
    row["bare"] = bare_ms
    return row


def main() -> None:
    args = parse_args()
    if not (args.models / args.model_id / "manifest.json").is_file():
        sys.exit(f"no {args.model_id} model in {args.models}: run `python -m converters handpose --out {args.models}`")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        photo, rgb = camera_frame()
        y4m = write_y4m(Path(tmp) / "hand.y4m", rgb)
        print(f"camera: {photo} letterboxed to 640x480; maxHands {args.hands}")
        with server_and_browser(args.models, fake_camera_flags(y4m)) as (url, browser):
            for variant in args.variants:
                bare = [["detector", f"/models/{args.model_id}/tfjs/detector_{variant}/model.json", [1, 192, 192, 3]],
                        ["landmark", f"/models/{args.model_id}/tfjs/landmark_{variant}/model.json", [1, 224, 224, 3]]]
                for backend in args.backends:
                    query = f"backend={backend}&variant={variant}&hands={args.hands}"
                    results[("tfjs", backend, variant)] = measure(browser, url, query, args.frames, 300, bare)
                    print_row(("tfjs", backend, variant), results[("tfjs", backend, variant)])
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
    for variant in args.variants:
        peer = results.get(("mediapipe", "webgl", variant))
        ours = {k[1]: v for k, v in results.items() if k[0] == "tfjs" and k[2] == variant}
        if not peer or not ours:
            continue
        best = max(ours, key=lambda b: ours[b]["fps"])
        r = ours[best]
        print(f"{variant}: tfjs on {best} {r['fps']:.2f} FPS vs mediapipe runtime {peer['fps']:.2f} FPS -> "
              f"{r['fps'] / peer['fps']:.1f}x the FPS; estimate {r['estimate']:.0f} vs {peer['estimate']:.0f} ms "
              f"-> {peer['estimate'] / r['estimate']:.1f}x faster")


def print_row(key, row):
    runtime, backend, variant = key
    stages = "  ".join(f"{s} {row[s]:7.1f}" for s in STAGES)
    bare = ""
    if row["bare"]:
        bare = "  bare: " + ", ".join(f"{k} {v:.1f} ms" for k, v in row["bare"].items())
    print(f"{runtime:9s} {backend:6s} {variant:4s}  {row['fps']:6.2f} FPS  ({row['frames']} frames, "
          f"{row['hands']:.0f} hand)  ms: {stages}{bare}", flush=True)


if __name__ == "__main__":
    main()
