"""/detect on the official Ultralytics builds that make models installs (yolo11n, yolo11n-seg,
yolo11n-pose, yolo26n, yolo26n-obb), side by side in one run, on each backend in turn (LiteRT.js
WASM and TF.js WASM by default):

  - the first result of a visit: /detect's ms from the navigation's start to its first drawn
    result on bus.jpg, picked as soon as the page has its file input, on a server that has
    answered before; a first visit with an empty browser cache, then the next visit in the same
    browser (its HTTP cache and its remembered backend);
  - live, each model picked by its id, the fake camera showing bus.jpg and zidane.jpg
    (letterboxed to 640x480, 4 frames each): live FPS (the camera gives 30 at most) and the
    page's median ms a frame, whose inverse each task is compared by with the detector of its
    own family in the same run (yolo11n for segment and pose, yolo26n for OBB), and the median
    ms of each stage of a frame;
  - each model's .tflite alone in native LiteRT (as many threads as cores).

    .venv/bin/python -m bench.browser_official [--models DIR] [--backends litert-wasm wasm]
                                               [--seconds 10] [--rounds 2] [--tasks detect pose ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench._browser import native_litert_ms, server_and_browser
from bench._results import add_out_option, write_results
from bench.browser_tasks import STAGES, live_fps
from harness.browser import fake_camera_flags
from harness.clips import write_y4m

ROOT = Path(__file__).resolve().parent.parent
# task -> the official build that runs it; each task's family detector
INSTALLED = {"detect": "yolo11n", "segment": "yolo11n-seg", "pose": "yolo11n-pose", "detect26": "yolo26n",
             "obb": "yolo26n-obb"}
FAMILY_DETECTOR = {"detect": "detect", "segment": "detect", "pose": "detect", "detect26": "detect26",
                   "obb": "detect26"}


def real_clip(path: Path, frames: int = 32) -> Path:
    """A y4m of bus.jpg and zidane.jpg letterboxed to 640x480, alternating every 4 frames."""
    from converters import sources
    from harness.photos import letterbox_rgb

    photos = [letterbox_rgb(sources.load_photo(name)) for name in ("bus.jpg", "zidane.jpg")]
    return write_y4m(path, np.stack([photos[(i // 4) % 2] for i in range(frames)]))


def first_results(browser, url: str, backend: str, photo: Path, visits: int = 2) -> list[float]:
    """/detect's ms from navigation start to its first drawn result (body data-first-result-ms),
    a photo picked as soon as its input exists: a first visit with an empty cache, then
    ``visits - 1`` more in the same browser context (its HTTP cache and stored backend choice)."""
    import urllib.request

    for path in ("/detect", "/api/v1/models"):  # a served app, not its first request (template compiles)
        urllib.request.urlopen(url + path, timeout=60).read()
    context = browser.new_context()
    seen = []
    for _ in range(visits):
        page = context.new_page()
        page.goto(f"{url}/detect?camera=0&backend={backend}", wait_until="commit")
        page.wait_for_selector("#image-file", state="attached", timeout=60_000)
        page.set_input_files("#image-file", str(photo))
        page.wait_for_function("() => document.body.dataset.firstResultMs", timeout=300_000)
        seen.append(float(page.get_attribute("body", "data-first-result-ms")))
        page.close()
    context.close()
    return seen




def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=ROOT / "models", help="models folder (default ./models)")
    parser.add_argument("--backends", nargs="+", default=["litert-wasm", "wasm"],
                        help="each timed in turn in the same run (default: LiteRT.js WASM, TF.js WASM)")
    parser.add_argument("--seconds", type=float, default=10, help="live window per model and round")
    parser.add_argument("--rounds", type=int, default=2, help="turns each model takes, alternating")
    parser.add_argument("--frames", type=int, default=20,
                        help="frames timed by stage per model and round (yolo26n-obb at 1024 px takes seconds each on TF.js)")
    parser.add_argument("--tasks", nargs="+", default=list(INSTALLED), choices=list(INSTALLED),
                        help="detect26 is YOLO26's detector, OBB's family reference")
    add_out_option(parser, "browser_official")
    args = parser.parse_args()
    from converters import sources

    tasks = args.tasks
    missing = [INSTALLED[t] for t in tasks if not (args.models / INSTALLED[t] / "manifest.json").is_file()]
    if missing:
        print(f"not installed in {args.models}: {', '.join(missing)} (make models builds them)", file=sys.stderr)
        return 2
    results = {"backends": {}, "seconds": args.seconds, "rounds": args.rounds, "tasks": tasks,
               "models": {t: INSTALLED[t] for t in tasks}}
    with tempfile.TemporaryDirectory() as tmp:
        camera = real_clip(Path(tmp) / "photos.y4m")
        photo = Path(tmp) / "bus.jpg"
        photo.write_bytes(sources.photo_path("bus.jpg").read_bytes())
        with server_and_browser(args.models, fake_camera_flags(camera)) as (url, browser):
            for backend in args.backends:
                results["backends"][backend] = {
                    "first_result_ms": first_results(browser, url, backend, photo),
                    "live": live_fps(browser, url, backend, args.seconds, tasks, {t: INSTALLED[t] for t in tasks},
                                     args.rounds, frames=args.frames)}
    native = {t: round(native_litert_ms(args.models / INSTALLED[t] / "model.tflite", None, os.cpu_count() or 1, 50), 2)
              for t in tasks}
    results["native_litert_ms"] = native
    print(f"the .tflite alone, native LiteRT ({os.cpu_count()} threads), median ms: "
          + ", ".join(f"{INSTALLED[t]} {ms:.1f}" for t, ms in native.items()))
    for backend, measured in results["backends"].items():
        first = measured["first_result_ms"]
        print(f"{backend}: /detect's first result on bus.jpg picked at once: first visit {first[0]:.0f} ms, "
              f"next visit {first[1]:.0f} ms")
        print("  live, real photos on the fake camera (30 FPS at most); rate = 1000 / median ms a frame:")
        for task, live in measured["live"].items():
            family = FAMILY_DETECTOR[task]
            base = measured["live"].get(family)
            live["vs_family_detector"] = round(live["uncapped_fps"] / base["uncapped_fps"], 3) if base else None
            vs = f"{live['vs_family_detector']:.2f}x {INSTALLED[family]}" if base else "(its family's detector not run)"
            print(f"  {INSTALLED[task]:13s} {live['frame_ms']:7.2f} ms a frame = {live['uncapped_fps']:5.1f} FPS, {vs}; "
                  f"live {live['fps']:.1f} FPS; " + ", ".join(f"{s} {live['stages_ms'][s]:.1f}" for s in STAGES))
    write_results("browser_official", args, results, chromium=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
