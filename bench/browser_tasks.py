"""/detect on a model of each Ultralytics task, side by side in one run: the .tflite files of
tests/fixtures/ultralytics-litert (Ultralytics 8.4.190's own LiteRT export of YOLOv8 at half
the n scale's width, 160 px: one family and size), each picked on the page as a visitor's
own model and run live on the fake camera on one backend (LiteRT.js WASM by default).

Prints, per task:
  - on a clip of segmentation scenes (several objects a frame): live FPS, which the fake
    camera caps at 30, and the page's median time a frame (model, decode, drawing), whose
    inverse each task is compared by: task / detect (target: segment >= 0.8x detect), and
    the median ms of each stage of a frame (preprocess, model, postprocess, draw: /detect's
    data-*-ms), with the model stage's own ratio to detect's;
  - the same .tflite files alone in native LiteRT (ai-edge-litert, as many threads as cores):
    the share of a task's extra cost that is its graph's;
  - over --memory-frames live frames of the task's own scenes (after 20 to warm up): TF.js
    tensors, LiteRT.js's live tensors and models, and its WASM heap, first and last, and
    whether each stayed flat (equal at every frame).

    .venv/bin/python -m bench.browser_tasks [--models DIR] [--backend litert-wasm]
                                            [--seconds 10] [--rounds 3] [--memory-frames 300]
                                            [--fixtures DIR] [--tasks detect segment ...]

bench/browser_official.py runs the same on the official models make models installs.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench._browser import FRAME_STAGES, LIVE_FPS, median, native_litert_ms, server_and_browser
from bench._results import add_out_option, write_results
from converters.scenes import dataset, train
from harness.browser import RECORD_FRAMES, fake_camera_flags, wait_frames
from harness.clips import write_y4m

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = ROOT / "tests" / "fixtures" / "ultralytics-litert"
TASKS = ("detect", "segment", "pose", "obb")
SCENES = {"detect": "segment", "segment": "segment", "pose": "pose", "obb": "obb"}
WARM_UP = 20
TARGET_SEGMENT = 0.8
STAGES = ("preprocess", "model", "postprocess", "draw")


def clip(scenes: str, path: Path, frames: int = 30) -> Path:
    """A y4m of `frames` held-out scenes, each shown for 4 frames (the camera loops it)."""
    size = train.SCENE_SIZE[scenes]
    images = [dataset.scene(scenes, 800_000 + i, size)[0] for i in range(frames // 4 + 1)]
    return write_y4m(path, np.repeat(np.stack(images), 4, axis=0)[:frames])


def open_with(browser, url: str, backend: str, task: str, fixtures: Path | dict = FIXTURES):
    """/detect with the task's model picked (fixtures/<task>.tflite; where fixtures is a dict,
    the file fixtures[task] if a Path, else the installed model of that id), the camera
    running. -> (context, page)"""
    context = browser.new_context()
    page = context.new_page()
    picked = fixtures[task] if isinstance(fixtures, dict) else fixtures / f"{task}.tflite"
    if isinstance(picked, str):
        page.goto(f"{url}/detect?camera=0&backend={backend}&model={picked}")
        page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
        page.click("#camera-button")
        wait_frames(page, 3, timeout=120_000)
        return context, page
    page.goto(f"{url}/detect?camera=0&backend={backend}")
    # an installed model ready, or none installed: either way the page takes one picked
    page.wait_for_selector("#model-status[data-state='ready'], #model-status[data-state='missing']", timeout=300_000)
    page.set_input_files("#model-file", str(picked))
    page.wait_for_function("() => document.getElementById('model-message').dataset.state === 'ok'", timeout=120_000)
    page.wait_for_selector("#model-status[data-state='ready']", timeout=120_000)
    page.click("#camera-button")
    wait_frames(page, 3, timeout=120_000)
    return context, page


def live_fps(browser, url: str, backend: str, seconds: float, tasks, fixtures: Path, rounds: int,
             frames: int = 60) -> dict:
    """Per task: live FPS (at most the camera's 30), and the page's median time a frame, whose
    inverse is the rate without that cap; the tasks take turns for `rounds` rounds, so a busy
    spell of the machine falls on all of them."""
    times = {task: [] for task in tasks}
    fps = {task: [] for task in tasks}
    out = {}
    for _ in range(rounds):
        for task in tasks:
            context, page = open_with(browser, url, backend, task, fixtures)
            fps[task].append(page.evaluate(LIVE_FPS, seconds))
            times[task] += page.evaluate(FRAME_STAGES, frames)
            out[task] = {"backend": page.get_attribute("body", "data-backend"),
                         "detections_last_frame": page.evaluate("() => +document.getElementById('results').dataset.count")}
            context.close()
    for task in tasks:
        frame_ms = median([f["total"] for f in times[task]])
        stages = {stage: round(median([f[stage] for f in times[task]]), 2) for stage in STAGES}
        out[task].update(fps=round(median(fps[task]), 2), frame_ms=round(frame_ms, 2), stages_ms=stages,
                         uncapped_fps=round(1000 / frame_ms, 2), frames_timed=len(times[task]))
    return out


def memory(browser, url: str, backend: str, task: str, frames: int, fixtures: Path) -> dict:
    context, page = open_with(browser, url, backend, task, fixtures)
    page.evaluate(RECORD_FRAMES)
    start = page.evaluate("() => +document.getElementById('results').dataset.frame")
    wait_frames(page, start + WARM_UP + frames, timeout=1_800_000)
    seen = page.evaluate("() => window.__frames")
    context.close()
    kept = [f for f in seen if f["frame"] > start + WARM_UP][:frames]
    flat = {key: len({f[key] for f in kept}) == 1 for key in ("tfTensors", "tensors", "models", "heapBytes")}
    return {"frames": len(kept), "flat": flat,
            **{key: [kept[0][key], kept[-1][key]] for key in ("tfTensors", "tensors", "models", "heapBytes")}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=ROOT / "models",
                        help="models folder the server installs (default ./models; it may be empty)")
    parser.add_argument("--backend", default="litert-wasm")
    parser.add_argument("--seconds", type=float, default=10, help="live window per task and round")
    parser.add_argument("--rounds", type=int, default=3, help="turns each task takes, alternating")
    parser.add_argument("--memory-frames", type=int, default=300, help="0: no memory runs")
    parser.add_argument("--fixtures", type=Path, default=FIXTURES,
                        help="a folder of <task>.tflite from Ultralytics' LiteRT export (default: the tests')")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    add_out_option(parser, "browser_tasks")
    args = parser.parse_args()
    backend, frames = args.backend, args.memory_frames
    where = args.fixtures.resolve()
    results = {"backend": backend, "seconds": args.seconds, "rounds": args.rounds, "tasks": args.tasks,
               "model": str(where.relative_to(ROOT)) if where.is_relative_to(ROOT) else str(where)}
    with tempfile.TemporaryDirectory() as tmp:
        clips = {s: clip(s, Path(tmp) / f"{s}.y4m") for s in set(SCENES.values())}
        with server_and_browser(args.models, fake_camera_flags(clips["segment"])) as (url, browser):
            results["live"] = live_fps(browser, url, backend, args.seconds, args.tasks, args.fixtures, args.rounds)
        results["memory"] = {}
        for task in args.tasks if frames else ():
            with server_and_browser(args.models, fake_camera_flags(clips[SCENES[task]])) as (url, browser):
                results["memory"][task] = memory(browser, url, backend, task, frames, args.fixtures)
    # The graphs alone, in native LiteRT on this machine's cores: how much of a task's cost
    # over detect's is its model's, which no page can take off.
    results["native_litert_ms"] = {}
    for task in args.tasks:
        ms = native_litert_ms(args.fixtures / f"{task}.tflite", None, os.cpu_count() or 1, 200)
        results["native_litert_ms"][task] = round(ms, 3)
    detect = results["live"]["detect"]["uncapped_fps"]
    print(f"/detect live on {backend}, your own models ({results['model']}); the fake camera gives 30 FPS,")
    print("so the rate compared is 1000 / the page's median ms a frame:")
    for task, live in results["live"].items():
        ratio = live["uncapped_fps"] / detect
        live["vs_detect"] = round(ratio, 3)
        target = f" (target >= {TARGET_SEGMENT})" if task == "segment" else ""
        print(f"  {task:8s} {live['frame_ms']:6.2f} ms a frame = {live['uncapped_fps']:6.1f} FPS, {ratio:.2f}x detect{target}; "
              f"live {live['fps']:.1f} FPS ({live['detections_last_frame']} detections on the last frame)")
        print("           median ms: " + ", ".join(f"{s} {live['stages_ms'][s]:.2f}" for s in STAGES)
              + f"; the model alone {results['live']['detect']['stages_ms']['model'] / live['stages_ms']['model']:.2f}x detect's")
    native = results["native_litert_ms"]
    print(f"the graphs alone in native LiteRT ({os.cpu_count()} threads), median ms: "
          + ", ".join(f"{t} {ms:.2f} ({native['detect'] / ms:.2f}x detect's rate)" for t, ms in native.items()))
    if results["memory"]:
        print(f"over {frames} live frames after {WARM_UP} to warm up (first -> last; flat = the same at every frame):")
    for task, m in results["memory"].items():
        print(f"  {task:8s} TF.js tensors {m['tfTensors'][0]} -> {m['tfTensors'][1]}, LiteRT tensors "
              f"{m['tensors'][0]} -> {m['tensors'][1]}, models {m['models'][1]}, heap {m['heapBytes'][0]} -> "
              f"{m['heapBytes'][1]} bytes; flat: {all(m['flat'].values())}")
    results["segment_vs_detect"] = results["live"].get("segment", {}).get("vs_detect")
    results["target_segment_vs_detect"] = TARGET_SEGMENT
    write_results("browser_tasks", args, results, chromium=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
