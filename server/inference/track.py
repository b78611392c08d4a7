"""Tracking a video on the server (POST /api/v1/track): the detect page's tracking, frame by
frame, with the page's own algorithm and defaults.

Each (stride-th) frame: the detector's detections -> Tracker -> LineCounter
(modelcontract/track.py, the twin of the page's track.js: the same IDs and counts as the page
given the same detections). Frames are decoded one at a time (server/video.py), so memory is
one frame, not the video. The answer: the page's CSV rows (``tracks``, MOT columns, frames
numbered in the video from 1) and its counts.json record (``counts``). A segmentation, pose or
OBB model's answer also has ``shapes``, one per row of ``tracks``: what the detection the track
matched on that frame adds to its box (mask outline, keypoints, rotated corners and angle).
"""
from __future__ import annotations

import time

from modelcontract import track as tracking

from .. import video

STAGES = ("preprocess", "model", "postprocess")
# A detection's fields beyond its box, per Ultralytics task (modelcontract/decode.py).
SHAPES = {"yolo-seg": ("polygons",), "yolo-pose": ("keypoints",), "yolo-obb": ("corners", "angle")}


def shapes_of(tracks: list[dict], detections: list[dict], fields: tuple[str, ...]) -> list[dict]:
    """For each track (as tracking.mot_rows lists them), the extras of the detection it matched
    on this frame: the tracker keeps that detection's box as the track's box."""
    by_box = {tuple(d["box"]): d for d in detections}
    return [{k: by_box[tuple(t["box"])][k] for k in fields if k in by_box.get(tuple(t["box"]), {})}
            for t in tracks]


def track_video(runner, opts, data: bytes, *, line=None, stride: int = 1, max_pixels: int,
          max_frames: int) -> tuple[dict, float]:
    """``runner(rgb, opts)`` on the video ``data``'s frames -> (the answer, without its decode
    and total times; the milliseconds spent decoding). ``line``: the counting line's two points,
    or None (no counts). Past ``max_pixels`` a frame or ``max_frames`` frames: a Problem (413)."""
    tracker = tracking.Tracker()
    counter = tracking.LineCounter(*line) if line else None
    fields = SHAPES.get((runner.manifest.get("outputs") or {}).get("format"))
    rows, classes, shapes = [], {}, []
    timing = {stage: 0.0 for stage in (*STAGES, "track")}
    t0 = time.perf_counter()
    with video.open_video(data, max_pixels, max_frames) as clip:
        decode_ms = (time.perf_counter() - t0) * 1e3
        frames = clip.frames(stride)
        while True:
            t0 = time.perf_counter()
            item = next(frames, None)
            decode_ms += (time.perf_counter() - t0) * 1e3
            if item is None:
                break
            number, rgb = item
            result = runner(rgb, opts)
            t0 = time.perf_counter()
            tracks = tracker.update(result["detections"])
            rows += tracking.mot_rows(number, tracks)
            if fields:
                shapes += shapes_of(tracks, result["detections"], fields)
            if counter:
                counter.update(tracks)
            classes.update((tracking.class_name(t), t["class_id"]) for t in tracks)
            timing["track"] += (time.perf_counter() - t0) * 1e3
            for stage in STAGES:
                timing[stage] += result["timing_ms"][stage]
    answer = {"model": runner.id,
              "video": {"width": clip.width, "height": clip.height, "frames": clip.count, "fps": clip.fps},
              "tracks": rows,
              "counts": {"line": {"from": counter.a, "to": counter.b} if counter else None,
                         "counts": counter.counts if counter else {}, "frames": tracker.frame,
                         "tracks": tracker.next_id - 1, "classes": classes},
              **({"shapes": shapes} if fields else {}),
              "timing_ms": {stage: round(ms, 3) for stage, ms in timing.items()}}
    return answer, decode_ms
