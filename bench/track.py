"""Detector + tracker on a MOTChallenge-layout sequence: MOTA, IDF1 and ID switches by the
`motmetrics` package, line counts against the ground truth's, and the time per frame of the
detector (the server's LiteRT runner) and of the tracker (modelcontract/track.py, and its JS
twin at 50 objects in Node), side by side. Writes bench/results/track.json.

    .venv/bin/python -m bench.track --mot DIR [--model models/yolov5n]
    .venv/bin/python -m bench.track --make-sequence DIR      # a synthetic sequence to run it on

DIR holds img1/*.jpg (or img/*.jpg) and gt/gt.txt (frame, id, x, y, w, h, ...; 1-based
frames). Only ground-truth rows with a nonzero 7th column ("consider") count, as in MOT17.
The synthetic sequence: people cut out of bus.jpg walking across a grey frame in three lanes,
two of them passing each other (one hides the other), boxes known exactly.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

from bench._results import add_out_option, write_results
from modelcontract.track import LineCounter, Tracker

PERSON_CROP = (48, 399, 244, 902)   # a person in bus.jpg standing clear of the others


# ------------------------------------------------------------------- the synthetic sequence

def walker_boxes(frames: int, width: int) -> list[tuple[int, np.ndarray]]:
    """(height, boxes [frames, 4]) per walker: lanes, sizes and speeds chosen so that two walkers
    share a lane and pass each other, and everyone crosses the middle of the frame."""
    lanes = [  # (top, height, x at frame 0, px per frame)
        (10, 110, 20, 3.0), (10, 110, width - 20 - 43, -3.5),
        (140, 90, 60, 4.0),
        (250, 100, width - 100, -2.5),
    ]
    out = []
    for top, h, x0, v in lanes:
        w = round(h * (PERSON_CROP[2] - PERSON_CROP[0]) / (PERSON_CROP[3] - PERSON_CROP[1]))
        x = np.clip(x0 + v * np.arange(frames), 0, width - w)
        out.append((h, np.stack([x, np.full(frames, top), x + w, np.full(frames, top + h)], 1)))
    return out


def make_sequence(folder: Path, frames: int = 150, size=(640, 360)) -> Path:
    from PIL import Image

    from converters.sources import photo_path

    width, height = size
    photo = Image.open(photo_path("bus.jpg")).convert("RGB").crop(PERSON_CROP)
    (folder / "img1").mkdir(parents=True, exist_ok=True)
    (folder / "gt").mkdir(exist_ok=True)
    walkers = walker_boxes(frames, width)
    rows = []
    for f in range(frames):
        canvas = Image.new("RGB", size, (114, 114, 114))
        for k, (_, boxes) in enumerate(walkers):
            x1, y1, x2, y2 = (int(round(v)) for v in boxes[f])
            crop = photo.resize((x2 - x1, y2 - y1), Image.BILINEAR)
            canvas.paste(crop.transpose(Image.FLIP_LEFT_RIGHT) if k % 2 else crop, (x1, y1))
            rows.append(f"{f + 1},{k + 1},{x1},{y1},{x2 - x1},{y2 - y1},1,1,1")
        canvas.save(folder / "img1" / f"{f + 1:06d}.jpg", quality=95)
    (folder / "gt" / "gt.txt").write_text("\n".join(rows) + "\n")
    return folder


# ------------------------------------------------------------------------- the evaluation

def read_gt(path: Path) -> dict[int, list[tuple[int, list[float]]]]:
    """frame -> [(id, [x, y, w, h])], the rows marked to be considered."""
    by_frame: dict[int, list] = {}
    for line in path.read_text().splitlines():
        parts = [float(v) for v in line.split(",")[:7]]
        if len(parts) >= 6 and (len(parts) < 7 or parts[6] != 0):
            by_frame.setdefault(int(parts[0]), []).append((int(parts[1]), parts[2:6]))
    return by_frame


def gt_line_counts(gt: dict, a, b) -> dict:
    """What the line counter gives on the ground truth's own tracks (the exact counts)."""
    line = LineCounter(a, b)
    for f in sorted(gt):
        line.update([{"id": i, "label": "person", "class_id": 0,
                      "trail": [[x + w / 2, y + h / 2]]} for i, (x, y, w, h) in gt[f]])
    return line.counts


def iou_distances(objs: list, hyps: list, max_iou: float = 0.5) -> np.ndarray:
    """motmetrics 1.4.0's distances.iou_matrix without its np.asfarray, which NumPy 2 (the numpy
    of Python 3.13) removed: 1 - IoU of (x, y, w, h) boxes, NaN past ``max_iou`` (never paired)."""
    from motmetrics.distances import boxiou

    if np.size(objs) == 0 or np.size(hyps) == 0:
        return np.empty((0, 0))
    o, h = np.asarray(objs, dtype=float), np.asarray(hyps, dtype=float)
    d = 1 - boxiou(o[:, None], h[None, :])
    return np.where(d > max_iou, np.nan, d)


def evaluate(folder: Path, model: Path, classes=(0,)) -> dict:
    import motmetrics as mm
    from PIL import Image

    from server.inference.detect import DetectRunner

    images = sorted((folder / "img1").glob("*.jpg")) or sorted((folder / "img").glob("*.jpg"))
    if not images:
        raise SystemExit(f"no images in {folder}/img1 or {folder}/img")
    gt = read_gt(folder / "gt" / "gt.txt")
    runner = DetectRunner(json.loads((model / "manifest.json").read_text()), model)
    opts = runner.options(None, None, None, frozenset(classes))
    tracker, acc = Tracker(), mm.MOTAccumulator(auto_id=True)
    width = Image.open(images[0]).size[0]
    height = Image.open(images[0]).size[1]
    line = LineCounter([width / 2, 0], [width / 2, height])
    detect_s = track_s = 0.0
    for f, path in enumerate(images, start=1):
        image = np.asarray(Image.open(path).convert("RGB"))
        t0 = time.perf_counter()
        detections = runner(image, opts)["detections"]
        t1 = time.perf_counter()
        tracks = tracker.update(detections)
        track_s += time.perf_counter() - t1
        detect_s += t1 - t0
        line.update(tracks)
        truth = gt.get(f, [])
        hyp = [[t["box"][0], t["box"][1], t["box"][2] - t["box"][0], t["box"][3] - t["box"][1]] for t in tracks]
        acc.update([i for i, _ in truth], [t["id"] for t in tracks],
                   iou_distances([b for _, b in truth], hyp, max_iou=0.5))
    summary = mm.metrics.create().compute(acc, metrics=["mota", "idf1", "num_switches", "num_false_positives",
                                                        "num_misses", "num_frames"], name="seq")
    row = summary.loc["seq"]
    frames = len(images)
    return {
        "sequence": str(folder), "model": runner.id, "frames": frames,
        "mota": round(float(row["mota"]), 4), "idf1": round(float(row["idf1"]), 4),
        "id_switches": int(row["num_switches"]), "false_positives": int(row["num_false_positives"]),
        "misses": int(row["num_misses"]), "tracks": tracker.next_id - 1, "gt_objects": len({i for r in gt.values()
                                                                                            for i, _ in r}),
        "line_counts": line.counts, "gt_line_counts": gt_line_counts(gt, line.a, line.b),
        "detector_ms_per_frame": round(detect_s * 1e3 / frames, 3),
        "tracker_ms_per_frame": round(track_s * 1e3 / frames, 3),
        "fps": round(frames / (detect_s + track_s), 2),
    }


# --------------------------------------------------------------- the tracker's cost alone

# Steady state, as in a page that tracks frame after frame: one whole pass warms the JIT,
# then the median of 5 timed passes.
JS_COST = """
const {Tracker} = await import(%s);
const req = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const tracker = new Tracker();
const pass = () => {
  tracker.reset();
  const t0 = performance.now();
  for (const dets of req.frames) tracker.update(dets);
  return (performance.now() - t0) / req.frames.length;
};
pass();
const ms = [0, 1, 2, 3, 4].map(pass).sort((a, b) => a - b);
console.log(JSON.stringify({ms: ms[2]}));
"""


def tracker_cost(objects: int = 50, frames: int = 200) -> dict:
    """ms a frame of the Python tracker (median of 3 passes) and of the JS twin (Node, median
    of 5 after a warm-up pass) on the same scene: 50 objects moving and jittering, some missed
    or weak, with clutter, in 1920x1080."""
    from harness.track_scenes import scene

    dets = scene(0, frames=frames, objects=objects, size=(1920, 1080), clutter=2.0)
    passes = []
    for _ in range(3):
        t0 = time.perf_counter()
        tracker = Tracker()
        for frame in dets:
            tracker.update(frame)
        passes.append((time.perf_counter() - t0) * 1e3 / frames)
    python_ms = sorted(passes)[1]
    script = "import {createRequire} from 'node:module'; const require = createRequire(import.meta.url);\n" + \
        JS_COST % json.dumps((ROOT / "static" / "js" / "contract" / "track.js").as_uri())
    proc = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps({"frames": dets}),
                          capture_output=True, text=True, check=True, cwd=ROOT)
    return {"objects": objects, "frames": frames, "python_ms_per_frame": round(python_ms, 3),
            "js_ms_per_frame": round(json.loads(proc.stdout)["ms"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mot", type=Path, help="a MOTChallenge-layout sequence folder")
    parser.add_argument("--make-sequence", type=Path, help="write the synthetic sequence here and stop")
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "yolov5n", help="an installed detector")
    add_out_option(parser, "track")
    args = parser.parse_args()
    if args.make_sequence:
        print(make_sequence(args.make_sequence))
        return
    if not args.mot:
        parser.error("--mot DIR or --make-sequence DIR")
    result = {"mot": evaluate(args.mot, args.model), "tracker_cost": tracker_cost()}
    m, c = result["mot"], result["tracker_cost"]
    print(f"{m['sequence']}: {m['frames']} frames, {m['gt_objects']} objects, {m['tracks']} tracks")
    print(f"MOTA {m['mota']:.3f}  IDF1 {m['idf1']:.3f}  ID switches {m['id_switches']}  "
          f"FP {m['false_positives']}  misses {m['misses']}")
    print(f"line counts {m['line_counts']}  (ground truth {m['gt_line_counts']})")
    print(f"detector {m['detector_ms_per_frame']:.1f} ms/frame, tracker {m['tracker_ms_per_frame']:.3f} ms/frame "
          f"(tracker/detector {m['tracker_ms_per_frame'] / m['detector_ms_per_frame']:.4f}), {m['fps']:.1f} FPS")
    print(f"tracker alone at {c['objects']} objects: JS {c['js_ms_per_frame']:.3f} ms/frame, "
          f"Python {c['python_ms_per_frame']:.3f} ms/frame")
    result["ratios"] = {"tracker_over_detector": round(m["tracker_ms_per_frame"] / m["detector_ms_per_frame"], 4),
                        "python_over_js_tracker": round(c["python_ms_per_frame"] / c["js_ms_per_frame"], 2)}
    write_results("track", args, result)


if __name__ == "__main__":
    main()
