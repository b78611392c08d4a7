"""The YOLO task formats ("yolo-seg", "yolo-pose", "yolo-obb"): static/js/tensor/decode.js
(TF.js in Node, with static/js/contract/decode.js) against modelcontract/decode.py on the same
synthetic heads, and the pieces on their own: masks.js against masks.py on the same logits
(exactly the same pixels and outlines), outlines that fill back to their mask, the rotated-box
rules. Agreement with
Ultralytics' own predict() on trained weights is tests/convert/test_yolo_tasks.py's."""
from __future__ import annotations

import math

import numpy as np
import pytest

from harness.node import JS, detector_js_decode, js_url, run_node
from harness.ultralytics_reference import polygons_mask
from modelcontract import masks, rotated
from modelcontract.decode import DetectOptions, decode_detections
from modelcontract.geometry import Transform

TRANSFORM = Transform(0.75, 0.75, 0.0, 80.0)
WIDTH, HEIGHT = 853, 640
INPUT = {"shape": [1, 640, 640, 3]}
OPTIONS = [{"score": 0.25, "iou": 0.7, "maxDet": 100, "classes": []},
           {"score": 0.4, "iou": 0.5, "maxDet": 5, "classes": [1]}]


def smooth_field(rng, shape, cells=6) -> np.ndarray:
    """Random blobs: a coarse random grid resized up (logits that make real-looking masks)."""
    import cv2

    coarse = rng.normal(0, 1, (cells, cells, shape[2])).astype(np.float32)
    return np.stack([cv2.resize(coarse[:, :, k], shape[1::-1], interpolation=cv2.INTER_CUBIC)
                     for k in range(shape[2])], -1)


def head(rng, nc: int, extra: np.ndarray, objects: int = 12, anchors: int = 300) -> np.ndarray:
    """[1, 4+nc+extra, A]: objects each seen by a few jittered anchors, plus low-score noise;
    ``extra`` gives the rows after the scores per object ([objects, e])."""
    raw = np.zeros((1, 4 + nc + extra.shape[1], anchors), np.float32)
    raw[0, :4] = rng.uniform(40, 600, (4, anchors))
    raw[0, 4:4 + nc] = rng.uniform(0, 0.1, (nc, anchors))
    raw[0, 4 + nc:] = rng.normal(0, 0.5, (extra.shape[1], anchors))
    j = 0
    for k in range(objects):
        cx, cy = rng.uniform(100, 540, 2)
        w, h = rng.uniform(40, 200, 2)
        cls, score = rng.integers(nc), rng.uniform(0.3, 0.95)
        for _ in range(3):
            raw[0, :4, j] = [cx + rng.normal(0, 3), cy + rng.normal(0, 3), w * rng.uniform(0.9, 1.1), h * rng.uniform(0.9, 1.1)]
            raw[0, 4 + cls, j] = score * rng.uniform(0.9, 1.0)
            raw[0, 4 + nc:, j] = extra[k] + rng.normal(0, 0.01, extra.shape[1])
            j += 1
    return raw


def both(manifest: dict, outputs: list[np.ndarray]):
    js = detector_js_decode(manifest, [{"outputs": outputs, "transform": TRANSFORM, "width": WIDTH, "height": HEIGHT,
                                        "options": case} for case in OPTIONS])
    py = [decode_detections(manifest["outputs"]["format"], dict(enumerate(outputs)), manifest, TRANSFORM, WIDTH, HEIGHT,
                            DetectOptions(c["score"], c["iou"], c["maxDet"], frozenset(c["classes"])))
          for c in OPTIONS]
    return js, py


def assert_rows_agree(js: list[dict], py: list[dict]):
    assert [r["class_id"] for r in js] == [r["class_id"] for r in py]
    for a, b in zip(js, py):
        assert abs(a["score"] - b["score"]) < 1e-6 and np.allclose(a["box"], b["box"], atol=1e-3)


def test_segment_twins_agree_and_outline_their_masks():
    rng = np.random.default_rng(0)
    nc, nm = 3, 32
    raw = head(rng, nc, rng.normal(0, 1, (12, nm)).astype(np.float32))
    protos = smooth_field(rng, (160, 160, nm))[None]
    manifest = {"outputs": {"format": "yolo-seg"}, "labels": ["a", "b", "c"], "input": INPUT, "nms": {"agnostic": False}}
    js, py = both(manifest, [raw, protos])
    assert len(py[0]) >= 5
    for j, p in zip(js, py):
        assert_rows_agree(j, p)
        for a, b in zip(j, p):
            # TF.js's matMul sums in another order than numpy's: a pixel whose logit is ~0 may
            # differ; outlines then differ by that pixel.
            ja, pa = polygons_mask(a["polygons"], WIDTH, HEIGHT), polygons_mask(b["polygons"], WIDTH, HEIGHT)
            assert (ja != pa).sum() <= 0.002 * max(pa.sum(), 1)
            # every polygon point lies in the image and inside the (clamped) box, give or take the
            # prototype pixel the upsampling reaches past the crop
            points = np.concatenate([np.asarray(loop) for loop in b["polygons"]])
            x1, y1, x2, y2 = b["box"]
            assert (points[:, 0] >= x1 - 6).all() and (points[:, 0] <= x2 + 6).all()
            assert (points[:, 1] >= y1 - 6).all() and (points[:, 1] <= y2 + 6).all()


MASKS_JS = """
const {instanceMask, outlines, cropWindow, maskRegion, wholeLogits} = await import(%s);
const out = req.cases.map((c) => {
  const m = instanceMask(wholeLogits(Float32Array.from(c.logits), c.mw), maskRegion(c.mh, c.mw, c.box, c.input));
  return {mask: Array.from(m.mask), rows: m.rows, cols: m.cols, left: m.left, top: m.top,
          loops: outlines(m.mask, m.rows, m.cols, [m.left, m.top]), crop: cropWindow(c.box, c.input)};
});
process.stdout.write(JSON.stringify({out}));
""" % js_url(JS / "contract/masks.js")


def test_masks_js_gives_masks_py_pixels_and_outlines_exactly():
    rng = np.random.default_rng(1)
    cases = []
    for k in range(12):
        mh, mw = (40, 40) if k % 2 else (160, 120)
        logits = smooth_field(rng, (mh, mw, 1), cells=int(rng.integers(3, 9)))[:, :, 0] - rng.uniform(0, 0.5)
        in_w, in_h = mw * 4, mh * 4
        x1, y1 = rng.uniform(-10, in_w * 0.6), rng.uniform(-10, in_h * 0.6)
        box = [float(x1), float(y1), float(x1 + rng.uniform(4, in_w * 0.5)), float(y1 + rng.uniform(4, in_h * 0.5))]
        if k == 0:
            box = [10.0, 10.0, 14.0, 18.5]  # whole-pixel edges: x < 14 keeps column 13, not 14
        cases.append({"logits": logits.ravel().tolist(), "mh": mh, "mw": mw, "box": box, "input": [in_w, in_h]})
    got = run_node(MASKS_JS, {"cases": cases})
    for case, js in zip(cases, got["out"]):
        logits = np.asarray(case["logits"], np.float32).reshape(case["mh"], case["mw"])
        mask, (left, top) = masks.instance_mask(logits, case["box"], tuple(case["input"]))
        assert list(masks.crop_window(case["box"], tuple(case["input"]))) == js["crop"]
        assert (js["rows"], js["cols"], js["left"], js["top"]) == (*mask.shape, left, top)
        assert np.array_equal(np.asarray(js["mask"], bool).reshape(mask.shape), mask)
        assert js["loops"] == masks.outlines(mask, (left, top))
    assert got["out"][0]["crop"] == [10, 10, 14, 19]


def test_outlines_fill_back_to_the_mask():
    rng = np.random.default_rng(2)
    for _ in range(200):
        rows, cols = rng.integers(1, 25, 2)
        mask = rng.random((rows, cols)) < rng.uniform(0.1, 0.9)
        loops = masks.outlines(mask)
        filled = polygons_mask(loops, cols, rows) if loops else np.zeros_like(mask)
        # every pixel of the mask is inside; what else is inside are holes of the parts
        assert (filled | ~mask).all()
        for loop in loops:  # corners only: no three points on one line
            pts = np.asarray(loop + loop[:2])
            turns = np.cross(pts[1:-1] - pts[:-2], pts[2:] - pts[1:-1])
            assert (turns != 0).all()
    ring = np.ones((5, 5), bool)
    ring[2, 2] = False
    assert masks.outlines(ring) == [[[0, 0], [5, 0], [5, 5], [0, 5]]]
    diagonal = np.eye(3, dtype=bool)  # touching at corners only: three parts
    assert len(masks.outlines(diagonal)) == 3


def test_pose_twins_agree_and_keypoints_land_in_source_pixels():
    rng = np.random.default_rng(3)
    k, d = 5, 3
    points = np.concatenate([rng.uniform(0, 640, (12, k, 2)), rng.uniform(0, 1, (12, k, 1))], -1).reshape(12, k * d)
    raw = head(rng, 2, points.astype(np.float32))
    manifest = {"outputs": {"format": "yolo-pose"}, "labels": ["a", "b"], "input": INPUT, "kpt_shape": [k, d]}
    js, py = both(manifest, [raw])
    assert len(py[0]) >= 5
    for j, p in zip(js, py):
        assert_rows_agree(j, p)
        for a, b in zip(j, p):
            assert np.allclose(a["keypoints"], b["keypoints"], atol=1e-3)
            kp = np.asarray(b["keypoints"])
            assert kp.shape == (k, 3) and (kp[:, 0] >= 0).all() and (kp[:, 0] <= WIDTH).all()
            assert (kp[:, 1] >= 0).all() and (kp[:, 1] <= HEIGHT).all()


def test_obb_twins_agree_and_rotated_rules_hold():
    rng = np.random.default_rng(4)
    angles = rng.uniform(-math.pi, 2 * math.pi, (12, 1)).astype(np.float32)
    raw = head(rng, 3, angles)
    manifest = {"outputs": {"format": "yolo-obb"}, "labels": ["a", "b", "c"], "input": INPUT}
    js, py = both(manifest, [raw])
    assert len(py[0]) >= 5
    for j, p in zip(js, py):
        assert_rows_agree(j, p)
        for a, b in zip(j, p):
            assert np.allclose(a["corners"], b["corners"], atol=1e-3) and abs(a["angle"] - b["angle"]) < 1e-6
            assert 0 <= b["angle"] < math.pi / 2
    # a box is the same rectangle after regularising: same corners as a set
    box = [50.0, 40.0, 30.0, 10.0, 2.0]
    same = sorted(map(tuple, np.round(rotated.corners(box), 6)))
    assert sorted(map(tuple, np.round(rotated.corners(rotated.regularize(box)), 6))) == same
    # probiou: 1 with itself, symmetric, small apart; fast NMS drops what a higher box overlaps
    boxes = np.array([[0, 0, 40, 10, 0.3], [1, 0, 40, 10, 0.35], [200, 0, 40, 10, 0], [201, 1, 40, 10, 0.1]])
    iou = rotated.probiou(boxes)
    assert np.allclose(np.diag(iou), 1, atol=1e-3) and np.allclose(iou, iou.T) and iou[0, 2] < 1e-3
    assert rotated.fast_nms(boxes, np.array([0.9, 0.8, 0.7, 0.95], np.float32), 0.7).tolist() == [3, 0]


@pytest.mark.parametrize("fmt", ["yolo-seg", "yolo-pose", "yolo-obb"])
def test_no_candidates_give_no_rows(fmt):
    nc = 2
    extra = {"yolo-seg": 32, "yolo-pose": 6, "yolo-obb": 1}[fmt]
    raw = np.zeros((1, 4 + nc + extra, 50), np.float32)
    outputs = [raw] + ([np.zeros((1, 40, 40, 32), np.float32)] if fmt == "yolo-seg" else [])
    manifest = {"outputs": {"format": fmt}, "labels": ["a", "b"], "input": INPUT, "kpt_shape": [2, 3]}
    js, py = both(manifest, outputs)
    assert js == [[], []] and py == [[], []]
