"""Multi-object tracking: Python twin of static/js/contract/track.js (same rules, same arithmetic in
doubles, same defaults), so the server, the benches and the /detect page give one object the
same ID. tests/unit/test_track_twin.py runs both on the same detections.

The association is ByteTrack's (Zhang et al., 2022): every detection takes part, the confident
ones first, the weak ones only to keep tracks that already exist (an object in blur or half
hidden scores low, and dropping it is what breaks IDs). Each track carries a constant-velocity
Kalman filter on (centre x, centre y, aspect w/h, height), with the noise weights SORT-style
trackers use (1/20 of the height for position, 1/160 for velocity). Matching is by IoU of the
filter's predicted box with the detection's, within one class only, solved as an assignment
(scipy's linear_sum_assignment here, a Hungarian solver in the JS twin).

A frame, per ``Tracker.update(detections, steps)``:
  1. predict every track ``steps`` frames on (1, unless a live source skipped frames);
  2. confident detections (score >= ``high``) against confirmed and lost tracks, IoU >= ``match_iou``;
  3. weak detections (``low`` <= score < ``high``) against confirmed tracks still unmatched
     (not lost ones), IoU >= ``low_match_iou``; confirmed tracks left over become lost;
  4. confident detections left over against tentative tracks, IoU >= ``tentative_iou``;
     a tentative track left over is dropped;
  5. confident detections left over with score >= ``birth`` start tentative tracks;
  6. a lost track unseen for more than ``max_lost`` frames is dropped.
A tentative track is confirmed, and given the next ID, once it has been matched on
``confirm`` frames in a row (on the tracker's first frame at once: nothing can have been
missed before it). IDs count from 1 per tracker and are never reused.

Detections: dicts with "box" [x1, y1, x2, y2] (pixels), "score", "class_id" and optionally
"label" (what modelcontract.decode gives). Tracks out: the confirmed tracks matched on this
frame, by ID: {"id", "class_id", "label", "score", "box" (the detection's), "trail" (the
filter's last centres, oldest first)}.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from .twins import TWINS

# high (takes the first pass, may start a track), low (below it a detection is ignored), birth
# (a new track needs this score), match_iou (first pass: ByteTrack's match_thresh 0.8 as a cost),
# low_match_iou (second pass), tentative_iou, confirm (frames in a row before an ID), max_lost
# (frames a lost track waits: 1 s at 30 fps), trail (centres kept): twins.json, as track.js reads it.
DEFAULTS: dict = TWINS["track"]["defaults"]

# Kalman noise, in proportion to the box height (the scale the image moves at).
POSITION_WEIGHT = 1 / 20
VELOCITY_WEIGHT = 1 / 160
# Costs of gated-out pairs: large enough that the solver prefers any real pair, then dropped.
GATED = 1e6
TRACK_FIELDS = ("id", "class_id", "label", "score", "box", "trail")

_F = np.eye(8)
_F[:4, 4:] = np.eye(4)
_H = np.eye(4, 8)


def box_to_xyah(box) -> np.ndarray:
    x1, y1, x2, y2 = (float(v) for v in box)
    w, h = x2 - x1, y2 - y1
    return np.array([x1 + w / 2, y1 + h / 2, w / h if h > 0 else 0.0, h])


def xyah_to_box(m) -> list[float]:
    w = m[2] * m[3]
    return [m[0] - w / 2, m[1] - m[3] / 2, m[0] + w / 2, m[1] + m[3] / 2]


def iou(a, b) -> float:
    """IoU of two x1, y1, x2, y2 boxes (0 when the union is empty)."""
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


class KalmanBox:
    """Constant velocity on (cx, cy, aspect, height) and their rates, one frame a step."""

    def __init__(self, box):
        z = box_to_xyah(box)
        h = z[3]
        self.mean = np.concatenate([z, np.zeros(4)])
        std = [2 * POSITION_WEIGHT * h, 2 * POSITION_WEIGHT * h, 1e-2, 2 * POSITION_WEIGHT * h,
               10 * VELOCITY_WEIGHT * h, 10 * VELOCITY_WEIGHT * h, 1e-5, 10 * VELOCITY_WEIGHT * h]
        self.cov = np.diag(np.square(std))

    def predict(self, still_height: bool = False):
        if still_height:   # a lost track: its height stops changing
            self.mean[7] = 0.0
        h = self.mean[3]
        std = [POSITION_WEIGHT * h, POSITION_WEIGHT * h, 1e-2, POSITION_WEIGHT * h,
               VELOCITY_WEIGHT * h, VELOCITY_WEIGHT * h, 1e-5, VELOCITY_WEIGHT * h]
        self.mean = _F @ self.mean
        self.cov = _F @ self.cov @ _F.T + np.diag(np.square(std))

    def update(self, box):
        z = box_to_xyah(box)
        h = self.mean[3]
        std = [POSITION_WEIGHT * h, POSITION_WEIGHT * h, 1e-1, POSITION_WEIGHT * h]
        s = _H @ self.cov @ _H.T + np.diag(np.square(std))
        gain = np.linalg.solve(s, _H @ self.cov).T        # P H^T S^-1 (S, P symmetric)
        self.mean = self.mean + gain @ (z - _H @ self.mean)
        self.cov = self.cov - gain @ s @ gain.T

    def box(self) -> list[float]:
        return xyah_to_box(self.mean)

    def centre(self) -> list[float]:
        return [float(self.mean[0]), float(self.mean[1])]


class _Track:
    def __init__(self, det: dict, frame: int):
        self.filter = KalmanBox(det["box"])
        self.id = None           # given when confirmed
        self.state = "tentative"  # -> "tracked" <-> "lost"
        self.hits = 1
        self.last_frame = frame
        self.det = det
        self.trail = [self.filter.centre()]

    def see(self, det: dict, frame: int, keep: int):
        self.filter.update(det["box"])
        self.hits = self.hits + 1 if self.last_frame == frame - 1 else 1
        self.last_frame = frame
        self.det = det
        self.trail = (self.trail + [self.filter.centre()])[-keep:]


def assign(tracks: list, dets: list, min_iou: float) -> tuple[list, list, list]:
    """Pairs (track index, detection index) of one class with IoU >= min_iou, the assignment of
    least total cost 1 - IoU among those with most pairs; then the unmatched of each side."""
    if not tracks or not dets:
        return [], list(range(len(tracks))), list(range(len(dets)))
    cost = np.full((len(tracks), len(dets)), GATED)
    for i, t in enumerate(tracks):
        predicted = t.filter.box()
        for j, d in enumerate(dets):
            if d["class_id"] == t.det["class_id"]:
                overlap = iou(predicted, d["box"])
                if overlap >= min_iou:
                    cost[i, j] = 1.0 - overlap
    rows, cols = linear_sum_assignment(cost)
    pairs = [(int(i), int(j)) for i, j in zip(rows, cols) if cost[i, j] < GATED]
    matched_t, matched_d = {i for i, _ in pairs}, {j for _, j in pairs}
    return (pairs, [i for i in range(len(tracks)) if i not in matched_t],
            [j for j in range(len(dets)) if j not in matched_d])


class Tracker:
    def __init__(self, **options):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown tracker options: {sorted(unknown)}")
        self.options = {**DEFAULTS, **options}
        self.reset()

    def reset(self):
        self.frame = 0
        self.next_id = 1
        self.tracks: list[_Track] = []

    def update(self, detections: list[dict], steps: int = 1) -> list[dict]:
        """One frame's detections -> its tracks. ``steps``: how many frame intervals have passed
        since the last frame (a live source that fell behind skipped some): the filters
        predict that far, so a track is looked for where its object has got to."""
        o = self.options
        self.frame += 1
        frame = self.frame
        dets = [d for d in detections if d["score"] >= o["low"]]
        high = [d for d in dets if d["score"] >= o["high"]]
        weak = [d for d in dets if d["score"] < o["high"]]
        for t in self.tracks:
            for _ in range(steps):
                t.filter.predict(still_height=t.state == "lost")

        confirmed = [t for t in self.tracks if t.state != "tentative"]
        tentative = [t for t in self.tracks if t.state == "tentative"]

        pairs, left_t, left_d = assign(confirmed, high, o["match_iou"])
        for i, j in pairs:
            self._see(confirmed[i], high[j])
        high = [high[j] for j in left_d]
        still = [confirmed[i] for i in left_t if confirmed[i].state == "tracked"]
        pairs, left_t, _ = assign(still, weak, o["low_match_iou"])
        for i, j in pairs:
            self._see(still[i], weak[j])
        for i in left_t:
            still[i].state = "lost"

        pairs, left_t, left_d = assign(tentative, high, o["tentative_iou"])
        for i, j in pairs:
            self._see(tentative[i], high[j])
        dropped = {id(tentative[i]) for i in left_t}
        for j in left_d:
            if high[j]["score"] >= o["birth"]:
                track = _Track(high[j], frame)
                if frame == 1 or o["confirm"] <= 1:
                    self._confirm(track)
                self.tracks.append(track)
        self.tracks = [t for t in self.tracks if id(t) not in dropped
                       and not (t.state == "lost" and frame - t.last_frame > o["max_lost"])]
        return [self._out(t) for t in sorted((t for t in self.tracks if t.state == "tracked"
                                               and t.last_frame == frame), key=lambda t: t.id)]

    def _see(self, track: _Track, det: dict):
        track.see(det, self.frame, self.options["trail"])
        if track.state == "tentative":
            if track.hits >= self.options["confirm"]:
                self._confirm(track)
        else:
            track.state = "tracked"

    def _confirm(self, track: _Track):
        track.state = "tracked"
        track.id = self.next_id
        self.next_id += 1

    @staticmethod
    def _out(t: _Track) -> dict:
        d = t.det
        return {"id": t.id, "class_id": int(d["class_id"]), "label": d.get("label"), "score": float(d["score"]),
                "box": [float(v) for v in d["box"]], "trail": [list(p) for p in t.trail]}


# ------------------------------------------------------------------------- counting

def side(a, b, p) -> float:
    """> 0 when p is right of the line a -> b as seen on screen (y down), < 0 left, 0 on it."""
    return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])


def crosses(a, b, p, q) -> bool:
    """Whether the move p -> q crosses the segment a - b (touching counts)."""
    s1, s2 = side(a, b, p), side(a, b, q)
    s3, s4 = side(p, q, a), side(p, q, b)
    return s1 * s2 < 0 and s3 * s4 <= 0


class LineCounter:
    """Crossings of a drawn line a -> b, per class: "in" is a crossing to the line's right (as
    drawn, on screen), "out" to its left. A track's centre (its trail's last point) is followed
    from frame to frame; each track counts at most once per direction, so a box jittering on the
    line counts once. Tracks not seen on a frame keep their last centre."""

    def __init__(self, a, b):
        self.a, self.b = [float(v) for v in a], [float(v) for v in b]
        self.reset()

    def reset(self):
        self.last: dict[int, list[float]] = {}
        self.counted: set[tuple[int, str]] = set()
        self.counts: dict[str, dict[str, int]] = {}

    def update(self, tracks: list[dict]) -> dict[str, dict[str, int]]:
        for t in tracks:
            here = t["trail"][-1]
            before = self.last.get(t["id"])
            self.last[t["id"]] = here
            if before is None or not crosses(self.a, self.b, before, here):
                continue
            direction = "in" if side(self.a, self.b, here) > 0 else "out"
            if (t["id"], direction) in self.counted:
                continue
            self.counted.add((t["id"], direction))
            name = class_name(t)
            self.counts.setdefault(name, {"in": 0, "out": 0})[direction] += 1
        return self.counts


def class_name(track: dict) -> str:
    return track["label"] if track.get("label") is not None else str(track["class_id"])


def inside(polygon, p) -> bool:
    """Even-odd rule: whether point p is inside the polygon [[x, y], ...]."""
    hit = False
    n = len(polygon)
    for i in range(n):
        (x1, y1), (x2, y2) = polygon[i], polygon[(i + 1) % n]
        if (y1 > p[1]) != (y2 > p[1]) and p[0] < x1 + (p[1] - y1) * (x2 - x1) / (y2 - y1):
            hit = not hit
    return hit


def zone_counts(polygon, tracks: list[dict]) -> dict[str, int]:
    """Tracks whose centre is inside the zone now, per class."""
    counts: dict[str, int] = {}
    for t in tracks:
        if len(polygon) >= 3 and inside(polygon, t["trail"][-1]):
            counts[class_name(t)] = counts.get(class_name(t), 0) + 1
    return counts


def mot_rows(frame: int, tracks: list[dict]) -> list[list]:
    """MOTChallenge rows for one frame: frame, id, x, y, w, h, score, class (1-based frame)."""
    return [[frame, t["id"], t["box"][0], t["box"][1], t["box"][2] - t["box"][0], t["box"][3] - t["box"][1],
             t["score"], t["class_id"]] for t in tracks]

