"""The model contract (modelcontract/) without HTTP: output decoding, NMS, resize and gesture rules
against their references (static/js/contract/decode.js and gesture.js in Node, torchvision, the plain
float32 formula), and how an upload becomes RGB. The same answers through the API:
tests/convert/test_api_http.py."""
from __future__ import annotations

import numpy as np
import pytest

from modelcontract.boxes import non_max_suppression
from modelcontract.decode import DetectOptions, decode_raw
from modelcontract.geometry import Transform, prepare, resize_bilinear
from modelcontract.gesture import GESTURES, classify_gesture, hand_features
from server import create_app
from tests.hand_poses import FROM_PALM
from harness.models import need
from harness.node import detector_js_decode, js_url, run_node
from harness.paths import JS
from harness.photos import decoded, encode, photo_bytes


def synthetic_yolo_head(seed: int = 3, anchors: int = 900, nc: int = 80) -> np.ndarray:
    """A [1, 4+nc, anchors] raw head: 50 objects, 12 jittered, overlapping anchors each, over
    low background scores."""
    rng = np.random.default_rng(seed)
    raw = np.zeros((1, 4 + nc, anchors), np.float32)
    raw[0, 4:] = rng.uniform(0, 0.2, (nc, anchors))
    for start in range(0, 600, 12):
        cx, cy, w, h = rng.uniform(40, 600), rng.uniform(40, 600), rng.uniform(10, 200), rng.uniform(10, 200)
        cls = int(rng.integers(nc))
        for j in range(start, start + 12):
            raw[0, 0:4, j] = [cx + rng.normal(0, 4), cy + rng.normal(0, 4), w * rng.uniform(0.8, 1.2),
                              h * rng.uniform(0.8, 1.2)]
            raw[0, 4 + cls, j] = rng.uniform(0.2, 0.95)
    return raw


@pytest.mark.parametrize("agnostic", [True, False], ids=["class-agnostic", "per-class"])
def test_yolo_raw_decode_equals_detector_js(agnostic):
    """The "yolo-raw" format (ultralytics export; no such model is built here offline): the
    contract's decode vs static/js/contract/decode.js's decodeRaw in TF.js (Node, CPU backend) on
    synthetic heads with clustered, overlapping boxes; class-agnostic NMS (no "nms" in the
    manifest) and per-class NMS (the ultralytics default)."""
    raw = synthetic_yolo_head()
    labels = [f"class{i}" for i in range(raw.shape[1] - 4)]
    transform = Transform(0.75, 0.75, 0.0, 80.0)
    width, height = 853, 640
    option_sets = [(0.25, 0.45, 100), (0.5, 0.7, 5), (0.1, 0.3, 50), (0.3, 0.9, 300)]
    manifest = {"outputs": {"format": "yolo-raw", "tensors": [{"name": "Identity", "shape": list(raw.shape)}]},
                "labels": labels, "input": {"shape": [1, 640, 640, 3]}}
    if not agnostic:
        manifest["nms"] = {"agnostic": False}
    expected_all = detector_js_decode(manifest, [
        {"outputs": [raw], "transform": transform, "width": width, "height": height,
         "options": {"score": s, "iou": i, "maxDet": m}} for s, i, m in option_sets])
    for (score, iou, max_det), expected in zip(option_sets, expected_all):
        got = decode_raw(raw, labels, transform, width, height, DetectOptions(score, iou, max_det), agnostic)
        assert len(expected) > 3
        assert [d["class_id"] for d in got] == [d["class_id"] for d in expected], (score, iou, max_det)
        for g, e in zip(got, expected):
            assert g["label"] == e["label"] and abs(g["score"] - e["score"]) < 1e-7
            assert np.allclose(g["box"], e["box"], atol=1e-4)


def test_nms_matches_torchvision_without_ties():
    import torch
    import torchvision

    rng = np.random.default_rng(5)
    for _ in range(20):
        xy = rng.uniform(0, 500, (300, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(5, 120, (300, 2))], 1).astype(np.float32)
        scores = rng.permutation(300).astype(np.float32) / 300  # distinct
        for iou in (0.3, 0.5, 0.7):
            ours = non_max_suppression(boxes[:, [1, 0, 3, 2]], scores, 1000, iou)
            ref = torchvision.ops.nms(torch.from_numpy(boxes).double(), torch.from_numpy(scores).double(), iou)
            assert ours.tolist() == ref.tolist()


def plain_resize(image, height, width):
    """Bilinear resize as the plain float32 formula: cast the image, gather, lerp."""
    src = np.asarray(image, dtype=np.float32)
    in_h, in_w = src.shape[:2]
    if (in_h, in_w) == (height, width):
        return src.copy()

    def axis(out_size, in_size):
        pos = np.clip((np.arange(out_size, dtype=np.float64) + 0.5) * (in_size / out_size) - 0.5, 0, None)
        lo = np.minimum(np.floor(pos).astype(np.int64), in_size - 1)
        return lo, np.minimum(lo + 1, in_size - 1), (pos - lo).astype(np.float32)

    y0, y1, fy = axis(height, in_h)
    x0, x1, fx = axis(width, in_w)
    top = src[y0][:, x0] * (1 - fx)[None, :, None] + src[y0][:, x1] * fx[None, :, None]
    bottom = src[y1][:, x0] * (1 - fx)[None, :, None] + src[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bottom * fy[:, None, None]


def test_resize_bilinear_is_the_plain_formula():
    """resize_bilinear gathers before casting and works in place; it must stay bit-identical
    to the plain float32 formula."""
    rng = np.random.default_rng(0)
    images = [decoded(photo_bytes("bus.jpg")), rng.integers(0, 256, (37, 1000, 3), dtype=np.uint8),
              rng.random((50, 70, 3)) * 255, rng.integers(0, 256, (3, 2, 3), dtype=np.uint8)]
    for image in images:
        for size in ((640, 480), (5, 7), (224, 300), image.shape[:2]):
            ours, ref = resize_bilinear(image, *size), plain_resize(image, *size)
            assert ours.dtype == ref.dtype == np.float32 and np.array_equal(ours, ref)


@pytest.mark.parametrize("extra", [{}, {"mean": [127.0, 127.0, 127.0], "std": [128.0, 128.0, 128.0], "scale": 1.0},
                                   {"mean": [0.0, 0.5, 0.0], "std": [1.0, 1.0, 0.25]}])
def test_prepare_normalises_as_the_formula(extra):
    """prepare's normalisation, in place and skipping exact no-ops: (pixel * scale - mean) / std."""
    image = decoded(photo_bytes("bus.jpg"))
    spec = {"shape": [1, 64, 48, 3], "resize": "stretch", "scale": 1 / 255, **extra}
    ours, _ = prepare(image, spec)
    ref = (plain_resize(image, 64, 48) * np.float32(spec["scale"]) - np.float32(spec.get("mean", [0.0] * 3))) \
        / np.asarray(spec.get("std", [1.0] * 3), np.float32)
    assert np.array_equal(ours[0], ref.astype(np.float32))


def test_transparent_pixels_read_as_black():
    from server.images import decode

    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., :3] = 200
    rgba[:2, :, 3] = 255  # top half opaque, bottom half fully transparent
    rgb = decode(encode(rgba, "PNG"), 10**6).rgb
    assert (rgb[:2] == 200).all() and (rgb[2:] == 0).all()


# Reads [{id, points, world, hold}]; prints {id: classifyGesture's answer}.
GESTURE_RUNNER = """
import {classifyGesture} from %s;
const out = {};
for (const c of req) out[c.id] = classifyGesture(c.points, {world: c.world, hold: c.hold});
process.stdout.write(JSON.stringify(out));
""" % js_url(JS / "contract/gesture.js")


def test_gesture_twin_equals_gesture_js(api_models):
    """modelcontract/gesture.py vs static/js/contract/gesture.js on the same landmarks: the hand
    photos' (image keypoints + world landmarks from the server runner) and the open palm's
    fingers folded into the other gestures, rotated, mirrored, scaled and jittered, with and
    without world landmarks, every hold state."""
    from server.inference import registry

    folder = need(api_models, "handpose")
    runner = registry(create_app({"MODELS_DIR": folder.parent, "TESTING": True})).get("handpose")
    rng = np.random.default_rng(7)
    cases = []
    for name in ("up_1.jpg", "up_3.jpg", "down_1.jpg", "down_3.jpg", "none_2.jpg"):
        hands = runner.estimate(decoded(photo_bytes(name)))[0]
        poses = [(name, h["keypoints"], h["world"]) for h in hands]
        if name == "none_2.jpg":
            poses += [(f"{name}>{pose}", make(h["keypoints"]), make(h["world"]))
                      for h in hands for pose, make in FROM_PALM.items()]
        for name, base_points, base_world in poses:
            for k in range(24):
                angle = rng.uniform(-np.pi, np.pi) if k else 0.0
                rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
                points = base_points @ rot.T * rng.uniform(0.5, 2.0) + rng.normal(0, 2.0 * (k > 0), base_points.shape)
                world = base_world.copy()
                world[:, :2] = world[:, :2] @ rot.T
                if k % 3 == 1:
                    points[:, 0] *= -1
                    world[:, 0] *= -1
                for hold in GESTURES:
                    cases.append({"id": f"{name}/{k}/{hold}/w", "points": points.tolist(), "world": world.tolist(),
                                  "hold": hold})
                    cases.append({"id": f"{name}/{k}/{hold}/2d", "points": points.tolist(), "world": None,
                                  "hold": hold})
    expected = run_node(GESTURE_RUNNER, cases, timeout=120)
    seen = set()
    for case in cases:
        js = expected[case["id"]]
        assert classify_gesture(case["points"], case["world"], case["hold"]) == js["gesture"], case["id"]
        seen.add(js["gesture"])
        ours = hand_features(case["points"], case["world"])
        for key, value in js["features"].items():
            assert np.allclose(ours[key], value, rtol=1e-12, atol=1e-12), (case["id"], key)
    assert seen == set(GESTURES)
