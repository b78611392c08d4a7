"""Python twin of static/js/contract/gesture.js ``classifyGesture(points, {world, hold})``: MediaPipe
Gesture Recognizer's seven gestures (thumbs_up, thumbs_down, victory, open_palm,
closed_fist, pointing_up, iloveyou) or none, from MediaPipe's 21 hand landmarks. Same rules,
thresholds and arithmetic (doubles) as gesture.js, so the API's gesture is the one the hands
page shows for a still image. tests/convert/test_contract.py runs both on the same landmark sets;
gesture.js's header explains the rules.

points: 21 x [x, y] or [x, y, z] image keypoints (y down); world: 21 x [x, y, z] world
landmarks (metres) or None. The hand's shape is read from ``world`` when given, directions
in the picture (thumb and index up or down) always from the image points.
"""
from __future__ import annotations

import math

from .twins import TWINS

WRIST = 0
THUMB = (1, 2, 3, 4)
FINGERS = ((5, 6, 7, 8), (9, 10, 11, 12), (13, 14, 15, 16), (17, 18, 19, 20))
# The gesture table {name: {label, emoji}}, "none" last; [enter, hold] per rule; finger states
# per gesture (index to pinky: E extended, F folded); the gestures whose thumb sticks out: all
# from twins.json, as gesture.js reads them.
TABLE: dict[str, dict] = TWINS["gesture"]["gestures"]
GESTURES = tuple(TABLE)
THRESHOLDS = {rule: tuple(pair) for rule, pair in TWINS["gesture"]["thresholds"].items()}
THUMB_OUT = tuple(TWINS["gesture"]["thumb_out"])
SHAPES: dict[str, str] = TWINS["gesture"]["shapes"]


def _or1(value: float) -> float:
    """JavaScript's ``value || 1`` for numbers (0 and NaN are falsy)."""
    return value if value and not math.isnan(value) else 1


def _points(points) -> list[tuple[float, float, float]]:
    if points is None or len(points) != 21:
        raise ValueError(f"need 21 landmarks, got {0 if points is None else len(points)}")
    out = []
    for p in points:
        p = [float(v) for v in p]
        out.append((p[0], p[1], p[2] if len(p) > 2 else 0.0))
    return out


def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _norm(v) -> float:
    return math.hypot(v[0], v[1], v[2])


def _dist(a, b) -> float:
    return _norm(_sub(a, b))


def _cosine(a, b) -> float:
    return (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]) / _or1(_norm(a) * _norm(b))


def _straightness(pts, chain) -> float:
    length = sum(_dist(pts[chain[i]], pts[chain[i - 1]]) for i in range(1, len(chain)))
    return _dist(pts[chain[-1]], pts[chain[0]]) / length if length > 0 else 0.0


def _palm_length(pts) -> float:
    w = pts[WRIST]
    return _or1(max(_dist(w, pts[5]), _dist(w, pts[9]), _dist(w, pts[17]), _dist(pts[5], pts[17])))


def _angle_from_up(a, b) -> float:
    """Degrees of a -> b in the picture from straight up (0) to straight down (180)."""
    v = _sub(b, a)
    return math.atan2(abs(v[0]), -v[1]) * 180 / math.pi


def hand_features(points, world=None) -> dict:
    img = _points(points)
    shape = _points(world) if world is not None else img
    scale = _palm_length(shape)
    finger_fold = [_cosine(_sub(shape[mcp], shape[WRIST]), _sub(shape[tip], shape[pip]))
                   for mcp, pip, _, tip in FINGERS]
    thumb_straight = _straightness(shape, THUMB[1:])
    joints = [shape[j] for f in FINGERS for j in (f[1], f[2])]
    tip = shape[THUMB[3]]
    thumb_out = min(_dist(tip, j) for j in joints) / scale
    axis = _sub(tip, shape[THUMB[1]])
    length = _or1(_norm(axis))
    unit = (axis[0] / length, axis[1] / length, axis[2] / length)

    def along(p):
        return p[0] * unit[0] + p[1] * unit[1] + p[2] * unit[2]

    others = [along(shape[i]) for f in FINGERS for i in f] + [along(shape[WRIST])]
    thumb_reach = (along(tip) - max(others)) / scale
    return {"fingerFold": finger_fold, "thumbStraight": thumb_straight, "thumbOut": thumb_out,
            "thumbReach": thumb_reach, "thumbAngle": _angle_from_up(img[THUMB[1]], img[THUMB[3]]),
            "indexAngle": _angle_from_up(img[FINGERS[0][0]], img[FINGERS[0][3]])}


def _pick(rule: str, holding: bool) -> float:
    return THRESHOLDS[rule][1 if holding else 0]


def _finger_states(fold, hold: str) -> str:
    held = SHAPES.get(hold, "----")
    out = ""
    for cos, was in zip(fold, held):
        if cos < _pick("fingerFold", was == "F"):
            out += "F"
        elif cos > _pick("fingerExtend", was == "E"):
            out += "E"
        else:
            out += "-"
    return out


def classify_gesture(points, world=None, hold: str = "none") -> str:
    f = hand_features(points, world)
    holding = hold in THUMB_OUT      # the thumb's looser thresholds keep a thumb that is out
    fingers = _finger_states(f["fingerFold"], hold)
    thumb_straight = f["thumbStraight"] > _pick("thumbStraight", holding)
    thumb_extended = thumb_straight and f["thumbOut"] > _pick("thumbOut", holding)
    thumb_out = thumb_extended and f["thumbReach"] > _pick("thumbReach", holding)
    if fingers == "FFFF":
        if not thumb_out:
            return "closed_fist"
        if f["thumbAngle"] < _pick("thumbCone", hold == "thumbs_up"):
            return "thumbs_up"
        if 180 - f["thumbAngle"] < _pick("thumbCone", hold == "thumbs_down"):
            return "thumbs_down"
        return "none"
    if fingers == "EFFF":
        return "pointing_up" if f["indexAngle"] < _pick("indexCone", hold == "pointing_up") else "none"
    if fingers == "EEFF":
        return "victory"
    if fingers == "EFFE":
        return "iloveyou" if thumb_extended else "none"
    if fingers == "EEEE":
        return "open_palm" if thumb_straight else "none"
    return "none"
