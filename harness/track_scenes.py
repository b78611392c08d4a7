"""Synthetic detections for the tracker's tests: objects moving at constant velocity with
jitter, missed detections, weak scores and clutter, each detection tagged with the object it
came from (``truth``, None for clutter), so ID switches can be counted."""
from __future__ import annotations

import numpy as np

LABELS = ("person", "car", "dog")


def scene(seed: int, frames: int = 60, objects: int = 6, size=(640, 480), jitter: float = 1.5,
          miss: float = 0.1, weak: float = 0.15, clutter: float = 0.5) -> list[list[dict]]:
    rng = np.random.default_rng(seed)
    width, height = size
    wh = rng.uniform([30, 40], [120, 160], size=(objects, 2))
    start = rng.uniform([0, 0], [width - 120, height - 160], size=(objects, 2))
    velocity = rng.uniform(-6, 6, size=(objects, 2))
    classes = rng.integers(0, len(LABELS), size=objects)
    out = []
    for f in range(frames):
        dets = []
        for k in range(objects):
            if f > 0 and rng.random() < miss:
                continue
            x, y = start[k] + velocity[k] * f + rng.normal(0, jitter, 2)
            w, h = wh[k] * (1 + rng.normal(0, 0.02, 2))
            score = rng.uniform(0.15, 0.45) if rng.random() < weak else rng.uniform(0.65, 0.95)
            dets.append(detection([x, y, x + w, y + h], score, int(classes[k]), truth=k))
        for _ in range(rng.poisson(clutter)):
            x, y = rng.uniform([0, 0], [width - 40, height - 40])
            dets.append(detection([x, y, x + 40, y + 40], rng.uniform(0.1, 0.4), int(rng.integers(0, 3)), truth=None))
        order = rng.permutation(len(dets))   # a detector's order says nothing about identity
        out.append([dets[i] for i in order])
    return out


def detection(box, score: float, class_id: int, truth=None) -> dict:
    return {"box": [float(v) for v in box], "score": float(score), "class_id": class_id,
            "label": LABELS[class_id], "truth": truth}


def id_switches(frames: list[list[dict]], tracked: list[list[dict]]) -> tuple[int, int]:
    """(switches, matched): how often an object's track ID changed from the one it had last,
    matching each frame's tracks to its detections by identical box."""
    last: dict[int, int] = {}
    switches = matched = 0
    for dets, tracks in zip(frames, tracked):
        by_box = {tuple(d["box"]): d["truth"] for d in dets}
        for t in tracks:
            truth = by_box.get(tuple(t["box"]))
            if truth is None:
                continue
            matched += 1
            if truth in last and last[truth] != t["id"]:
                switches += 1
            last[truth] = t["id"]
    return switches, matched


# ------------------------------------------------------------------ a clip for the camera

# A person in bus.jpg (810 x 1080), standing clear of the others.
PERSON_CROP = (48, 399, 244, 902)


def ping_pong_clip(photo, size=(640, 360), frames: int = 150, lag: float = 0.25) -> tuple[np.ndarray, list[np.ndarray]]:
    """Two people (the same crop, one mirrored) on two rows, walking across the frame and back
    in opposite directions (slowing down to turn), ``lag`` of a loop apart (so they cross the
    middle at different times); the clip loops without a jump (the fake camera replays it), so
    each crosses the middle once each way per loop and one track can follow each for ever. With
    lag 0.25 the second starts on the middle; played once (a file), lag 0.125 has all four
    crossings inside the clip.
    -> (clip [N, H, W, 3] uint8, [boxes [N, 4]] per person)."""
    from PIL import Image

    width, height = size
    w, h = 62, 160
    person = np.asarray(Image.fromarray(photo).crop(PERSON_CROP).resize((w, h), Image.BILINEAR))
    u = np.arange(frames) / frames

    def there_and_back(t):       # 0 -> 1 -> 0 over one loop, periodic, slowing to turn as people do
        return (1 - np.cos(2 * np.pi * t)) / 2

    travel = width - 40 - w
    walkers = [(person, 20 + there_and_back(u) * travel, 10),
               (person[:, ::-1], 20 + travel - there_and_back(u + lag) * travel, height - 10 - h)]
    clip = np.full((frames, height, width, 3), 114, np.uint8)
    truth = []
    for crop, xs, top in walkers:
        boxes = []
        for f, x in enumerate(np.round(xs).astype(int)):
            clip[f, top:top + h, x:x + w] = crop
            boxes.append([x, top, x + w, top + h])
        truth.append(np.asarray(boxes, float))
    return clip, truth


def object_spans(task: str, truth: list) -> list[tuple[float, float, float]]:
    """(left, centre, right) x of each object a synthetic scene drew (converters/scenes)."""
    if task == "segment":
        points = [np.asarray(o["polygon"]) for o in truth]
    elif task == "obb":
        points = [np.asarray(o["corners"]) for o in truth]
    else:
        points = [np.asarray(o["box"]).reshape(2, 2) for o in truth]
    return [(float(p[:, 0].min()), float(p[:, 0].mean()), float(p[:, 0].max())) for p in points]


def sliding_scene(task: str, seed: int, frames: int = 40) -> tuple[np.ndarray, list[int], list]:
    """A synthetic scene of ``task`` slid sideways as far as its objects allow (all stay whole in
    the frame), then back, easing in and out of the turn as a thing that moves does (a sudden
    reversal outruns a track's prediction): (RGB clip [frames, S, S, 3], each frame's shift in
    px, the truth)."""
    import cv2

    from converters.scenes import dataset, train

    size = train.SCENE_SIZE[task]
    image, truth = dataset.scene(task, seed, size)
    spans = object_spans(task, truth)
    low, high = -int(min(s[0] for s in spans)) + 4, int(size - max(s[2] for s in spans)) - 4
    phase = 2 * np.pi * np.arange(frames) / frames
    shifts = (low + (high - low) * (1 - np.cos(phase)) / 2).round().astype(int).tolist()
    clip = np.stack([cv2.warpAffine(image, np.float32([[1, 0, dx], [0, 1, 0]]), (size, size),
                                    flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_REPLICATE) for dx in shifts])
    return clip, shifts, truth


def crossings(detections: list[dict], shifts: list[int], line_x: float) -> dict[str, int]:
    """Per label: the objects detected on a sliding scene's first frame (API rows: box, label)
    whose centre crosses x = line_x as the scene slides."""
    out: dict[str, int] = {}
    for d in detections:
        centre = (d["box"][0] + d["box"][2]) / 2 - shifts[0]
        if min(shifts) + centre < line_x - 1 and max(shifts) + centre > line_x + 1:
            out[d["label"]] = out.get(d["label"], 0) + 1
    return out


def crossing_seed(task: str, seeds, line_x: float) -> int:
    """The first of ``seeds`` whose sliding scene takes a drawn object across x = line_x."""
    for seed in seeds:
        _, shifts, truth = sliding_scene(task, seed)
        if any(min(shifts) + c < line_x - 8 and max(shifts) + c > line_x + 8 for _, c, _ in object_spans(task, truth)):
            return seed
    raise ValueError(f"no {task} scene among the seeds crosses x = {line_x}")
