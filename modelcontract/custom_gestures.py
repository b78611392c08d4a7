"""Python twin of static/js/custom-gestures.js: your own hand gestures as recorded examples
(21 keypoints normalised to 40 numbers), matched by k nearest neighbours, and the file
they are kept in. The hands page records and exports the file; POST /api/v1/hands takes it
as its ``custom`` part and answers the same names (tests/test_custom_gestures.py runs both on
the same hands and the same bad files). custom-gestures.js's header explains the rules.
"""
from __future__ import annotations

import json
import math

FORMAT = "datarailroad-hand-gestures"
VERSION = 1
LIMITS = {"gestures": 20, "examples": 300, "name": 40}
MATCH = {"k": 5, "maxDistance": 0.3}
SIZE = 40

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "required": ["format", "version", "gestures"],
    "properties": {
        "format": {"const": FORMAT}, "version": {"const": VERSION},
        "gestures": {"type": "array", "maxItems": LIMITS["gestures"], "items": {
            "type": "object", "required": ["name", "examples"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": LIMITS["name"], "pattern": r"^\S(.*\S)?$"},
                "examples": {"type": "array", "minItems": 1, "maxItems": LIMITS["examples"],
                             "items": {"type": "array", "minItems": SIZE, "maxItems": SIZE,
                                       "items": {"type": "number"}}}}}},
    },
}


class GestureFileError(ValueError):
    """The file is not a valid gesture set; the message says why."""


def normalise_hand(points, handedness: str) -> list[float]:
    if points is None or len(points) != 21:
        raise ValueError(f"need 21 landmarks, got {0 if points is None else len(points)}")
    pts = [(float(p[0]), float(p[1])) for p in points]
    wx, wy = pts[0]
    mx, my = pts[9][0] - wx, pts[9][1] - wy
    scale = math.hypot(mx, my) or 1
    ux, uy = mx / scale, my / scale
    flip = -1 if handedness == "Left" else 1
    out = []
    for x, y in pts[1:]:
        x, y = x - wx, y - wy
        out += [flip * (-uy * x + ux * y) / scale, (-ux * x - uy * y) / scale]
    return out


def hand_distance(a, b) -> float:
    total = 0.0
    for i in range(0, SIZE, 2):
        total += math.hypot(a[i] - b[i], a[i + 1] - b[i + 1])
    return total / (SIZE / 2)


def match_hand(vector, gesture_set: dict) -> dict | None:
    near = [(d, order, g["name"]) for order, g in enumerate(gesture_set["gestures"]) for e in g["examples"]
            if (d := hand_distance(vector, e)) <= MATCH["maxDistance"]]
    if not near:
        return None
    near.sort(key=lambda n: (n[0], n[1]))
    k = min(MATCH["k"], len(near))
    tally: dict[str, list] = {}   # name -> [votes, nearest]
    for d, _, name in near[:k]:
        tally.setdefault(name, [0, d])[0] += 1
    best = None
    for name, (votes, nearest) in tally.items():
        if best is None or votes > best[1] or (votes == best[1] and nearest < best[2]):
            best = (name, votes, nearest)
    name, votes, nearest = best
    return {"name": name, "distance": nearest, "confidence": votes / k,
            "votes": {n: v / k for n, (v, _) in tally.items()}}


def _validator():
    from jsonschema import Draft202012Validator

    return Draft202012Validator(SCHEMA)


def validate_set(data) -> dict:
    """Parsed JSON -> the set; GestureFileError with the first problem otherwise."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "the file"
        raise GestureFileError(f"not a gesture file: {where}: {errors[0].message[:200]}")
    names = [g["name"] for g in data["gestures"]]
    if len(set(names)) != len(names):
        raise GestureFileError("not a gesture file: a gesture name appears twice")
    if not all(math.isfinite(v) for g in data["gestures"] for e in g["examples"] for v in e):
        raise GestureFileError("not a gesture file: an example holds a number that is not finite")
    return {"format": FORMAT, "version": VERSION,
            "gestures": [{"name": g["name"], "examples": g["examples"]} for g in data["gestures"]]}


def parse_set(data: bytes) -> dict:
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise GestureFileError("not a gesture file: it is not UTF-8 JSON") from None
    return validate_set(parsed)
