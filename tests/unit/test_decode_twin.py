"""static/js/tensor/decode.js decode (TF.js in Node, CPU backend; its plain steps are
static/js/contract/decode.js) against modelcontract/decode.py on the same synthetic outputs,
with and without the class filter, so the page, the page's server backend and the API show the
same boxes; and the rule itself: a box of an unwanted class is no candidate (dropped before NMS
and the max_det cut). The data both sides keep is twins.json (tests/unit/test_twins.py)."""
from __future__ import annotations

import numpy as np
import pytest

from modelcontract.decode import DetectOptions, decode_nms, decode_raw
from modelcontract.geometry import Transform
from harness.node import detector_js_decode

TRANSFORM = (0.75, 0.75, 0.0, 80.0)
WIDTH, HEIGHT = 853, 640
NC = 12
PERSON, BIKE, DOG = 0, 1, 7


def run_js(manifest: dict, outputs: list[np.ndarray], cases: list[dict]) -> list[list[dict]]:
    """decode.js decode of the same outputs under each case's options."""
    return detector_js_decode(manifest, [{"outputs": outputs, "transform": Transform(*TRANSFORM), "width": WIDTH,
                                          "height": HEIGHT, "options": case} for case in cases])


def assert_same(got: list[dict], expected: list[dict], case) -> None:
    assert [d["class_id"] for d in got] == [d["class_id"] for d in expected], case
    for g, e in zip(got, expected):
        assert g["label"] == e["label"] and abs(g["score"] - e["score"]) < 1e-7, case
        assert np.allclose(g["box"], e["box"], atol=1e-4), case


def crowded_head(seed: int = 4) -> np.ndarray:
    """[1, 4+NC, A]: 60 bicycles (each with a few jittered anchors) that score above the
    people, a person under each of the first 20 bicycles (IoU ~0.8: suppressed by a
    class-agnostic NMS), 30 people on their own, a few dogs, and low-score noise."""
    rng = np.random.default_rng(seed)
    objects = []
    for k in range(60):
        cx, cy, w, h = rng.uniform(60, 580, 2).tolist() + rng.uniform(30, 90, 2).tolist()
        objects.append((BIKE, (cx, cy, w, h), rng.uniform(0.7, 0.95), 3))
        if k < 20:
            objects.append((PERSON, (cx + 4, cy + 3, w * 0.95, h), rng.uniform(0.4, 0.65), 2))
    objects += [(PERSON, tuple(rng.uniform(60, 580, 2).tolist() + rng.uniform(20, 60, 2).tolist()),
                 rng.uniform(0.3, 0.6), 2) for _ in range(30)]
    objects += [(DOG, tuple(rng.uniform(60, 580, 2).tolist() + rng.uniform(20, 60, 2).tolist()),
                 rng.uniform(0.3, 0.9), 2) for _ in range(5)]
    anchors = sum(n for *_, n in objects) + 100
    raw = np.zeros((1, 4 + NC, anchors), np.float32)
    raw[0, 4:] = rng.uniform(0, 0.1, (NC, anchors))
    raw[0, :4] = rng.uniform(50, 600, (4, anchors))
    j = 0
    for cls, (cx, cy, w, h), score, n in objects:
        for _ in range(n):
            raw[0, 0:4, j] = [cx + rng.normal(0, 2), cy + rng.normal(0, 2), w * rng.uniform(0.9, 1.1),
                              h * rng.uniform(0.9, 1.1)]
            raw[0, 4 + cls, j] = score * rng.uniform(0.9, 1.0)
            j += 1
    return raw


def raw_manifest(raw: np.ndarray, agnostic: bool) -> dict:
    manifest = {"outputs": {"format": "yolo-raw", "tensors": [{"name": "Identity", "shape": list(raw.shape)}]},
                "labels": [f"class{i}" for i in range(NC)], "input": {"shape": [1, 640, 640, 3]}}
    if not agnostic:
        manifest["nms"] = {"agnostic": False}
    return manifest


RAW_CASES = [
    {"score": 0.25, "iou": 0.45, "maxDet": 100, "classes": []},
    {"score": 0.25, "iou": 0.45, "maxDet": 100, "classes": [PERSON]},
    {"score": 0.25, "iou": 0.45, "maxDet": 10, "classes": [PERSON]},   # unfiltered, bicycles fill the top 40
    {"score": 0.3, "iou": 0.6, "maxDet": 15, "classes": [PERSON, DOG]},
    {"score": 0.25, "iou": 0.45, "maxDet": 100, "classes": [5, 99]},   # ids no box has
    {"score": 0.25, "iou": 1.0, "maxDet": 30, "classes": []},   # no suppression: NMS ran in the model
]


def options(case: dict) -> DetectOptions:
    return DetectOptions(case["score"], case["iou"], case["maxDet"], frozenset(case["classes"]) or None)


@pytest.mark.parametrize("agnostic", [True, False])
def test_yolo_raw_class_filter_is_one_rule_in_both_languages(agnostic):
    raw = crowded_head()
    expected_all = run_js(raw_manifest(raw, agnostic), [raw], RAW_CASES)
    for case, expected in zip(RAW_CASES, expected_all):
        got = decode_raw(raw, [f"class{i}" for i in range(NC)], Transform(*TRANSFORM), WIDTH, HEIGHT,
                         options(case), agnostic)
        assert_same(got, expected, case)
        wanted = set(case["classes"]) or set(range(NC))
        assert {d["class_id"] for d in got} <= wanted and len(got) <= case["maxDet"]
    assert len(expected_all[0]) > 40 and expected_all[-2] == []
    # IoU 1: the top maxDet above the score, overlapping as they may (NMS at 0.45 drops some)
    from modelcontract.boxes import box_iou

    kept = expected_all[-1]
    overlap = np.triu(box_iou(np.array([d["box"] for d in kept]), np.array([d["box"] for d in kept])), 1)
    assert len(kept) == 30 and overlap.max() > 0.45 and [d["score"] for d in kept] == sorted((d["score"] for d in kept), reverse=True)


@pytest.mark.parametrize("agnostic", [True, False])
def test_class_filter_drops_unwanted_anchors_before_nms(agnostic):
    """The filter equals decoding a head without the anchors whose best class is unwanted;
    it is not the unfiltered result filtered afterwards (bicycles would suppress the people
    under them when class-agnostic, and take the max_det places)."""
    raw = crowded_head()
    labels = [f"class{i}" for i in range(NC)]
    transform = Transform(*TRANSFORM)
    best_class = raw[0, 4:].argmax(0)
    for case in RAW_CASES[1:4]:
        opts = options(case)
        filtered = decode_raw(raw, labels, transform, WIDTH, HEIGHT, opts, agnostic)
        without = raw[:, :, np.isin(best_class, list(opts.classes))]
        assert filtered == decode_raw(without, labels, transform, WIDTH, HEIGHT,
                                      DetectOptions(opts.score, opts.iou, opts.max_det), agnostic), case
    opts = options(RAW_CASES[2])  # people only, 10 places
    everything = decode_raw(raw, labels, transform, WIDTH, HEIGHT, DetectOptions(opts.score, opts.iou, 1000),
                            agnostic)
    after = [d for d in everything if d["class_id"] in opts.classes][:opts.max_det]
    before = decode_raw(raw, labels, transform, WIDTH, HEIGHT, opts, agnostic)
    assert len(before) == opts.max_det
    if agnostic:  # the people under the bicycles come back only when bicycles are no candidates
        assert len(after) == opts.max_det and before != after


def test_nms_format_class_filter_is_one_rule_in_both_languages():
    """In-graph NMS ("nms"): rows of unwanted classes are skipped before the max_det cut."""
    rng = np.random.default_rng(9)
    rows, valid = 100, 70
    xy = rng.uniform(0, 0.8, (rows, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(0.02, 0.2, (rows, 2))], 1).astype(np.float32)[None]
    scores = np.sort(rng.uniform(0.2, 0.95, rows))[::-1].astype(np.float32)[None]
    classes = rng.choice([PERSON, BIKE, DOG], rows).astype(np.float32)[None]
    scores[0, valid:], boxes[0, valid:], classes[0, valid:] = 0, 0, 0
    outputs = {"boxes": boxes, "scores": scores, "classes": classes,
               "valid_detections": np.array([valid], np.float32)}
    manifest = {"outputs": {"format": "nms", "tensors": [{"name": f"Identity_{i}", "key": k}
                                                         for i, k in enumerate(outputs)]},
                "labels": [f"class{i}" for i in range(NC)], "input": {"shape": [1, 640, 640, 3]}}
    cases = [{"score": 0.25, "iou": 0.45, "maxDet": 100, "classes": []},
             {"score": 0.25, "iou": 0.45, "maxDet": 5, "classes": [DOG]},
             {"score": 0.5, "iou": 0.45, "maxDet": 100, "classes": [PERSON, DOG]}]
    expected_all = run_js(manifest, list(outputs.values()), cases)
    for case, expected in zip(cases, expected_all):
        got = decode_nms(outputs, (640, 640), manifest["labels"], Transform(*TRANSFORM), WIDTH, HEIGHT,
                         options(case))
        assert_same(got, expected, case)
        assert got and {d["class_id"] for d in got} <= (set(case["classes"]) or {PERSON, BIKE, DOG})
    assert len(expected_all[1]) == 5
