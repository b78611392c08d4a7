"""The answer check's twins and records: modelcontract/answers.py + geometry.check_pattern against
static/js/contract/answers.js + geometry.js checkPattern and static/js/tensor/answers.js's inputs
(Node, TF.js CPU backend) on the same cases, and what the converters record: every build's
answer_check holds the source framework's answers, which its own .tflite (LiteRT, Python) and
TF.js graph (Node, at build) reproduce within far less than the tolerance, and which a wrong
answer misses."""
from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from converters import tflite
from modelcontract import answers
from modelcontract.geometry import check_pattern
from harness.models import read_manifest
from harness.node import TFJS_PRELUDE, js_url, run_node
from harness.paths import JS, YOLOV5N_WEIGHTS

SIZES = [(640, 640), (320, 320), (224, 224), (192, 192), (480, 640), (7, 5), (1, 1)]

RUNNER = TFJS_PRELUDE + """
import {createHash} from 'node:crypto';
const geometry = await import(%s);
const answers = await import(%s);
const inputs = await import(%s);
const out = {pattern: req.sizes.map(([h, w]) => createHash('sha256').update(geometry.checkPattern(h, w)).digest('hex')),
             indices: req.indexSizes.map((n) => answers.sampleIndices(n)),
             errors: req.errors.map((c) => {
               const outputs = Object.fromEntries(Object.entries(c.outputs).map(([k, v]) =>
                 [k, Float32Array.from(v, (x) => (x === null ? NaN : x))]));
               const e = answers.answerError(c.recorded, outputs);
               return Number.isFinite(e) ? e : 'inf';
             }),
             inputs: req.specs.map((spec) => {
               const before = tf.memory().numTensors;
               const x = spec.part ? inputs.partInput(spec) : inputs.modelInput(spec);
               const values = Array.from(x.dataSync());
               x.dispose();
               return {values, leaked: tf.memory().numTensors - before};
             })};
process.stdout.write(JSON.stringify(out));
""" % (js_url(JS / "contract/geometry.js"), js_url(JS / "contract/answers.js"), js_url(JS / "tensor/answers.js"))

SPECS = [
    {"shape": [1, 224, 224, 3], "resize": "center-crop", "crop_fraction": 0.875,
     "mean": [127.0, 127.0, 127.0], "std": [128.0, 128.0, 128.0]},
    {"shape": [1, 64, 64, 3], "resize": "letterbox", "pad_value": 114, "scale": 1 / 255},
    {"shape": [1, 48, 40, 3], "resize": "stretch", "scale": 1 / 255},
    {"shape": [1, 32, 32, 3], "scale": 1 / 255, "part": True},
]


def error_cases() -> list[dict]:
    rng = np.random.default_rng(5)
    ref = {"a": rng.normal(size=1000).astype(np.float32), "b": np.zeros(100, np.float32),
           "c": rng.uniform(size=3).astype(np.float32)}
    recorded = answers.reference(ref)
    moved = {**ref, "a": ref["a"] + 0.01 * rng.normal(size=1000).astype(np.float32)}
    nan = {**ref, "c": np.array([0.5, np.nan, 0.1], np.float32)}
    cases = [ref, moved, {**ref, "b": ref["b"] + 1e-4}, {k: v for k, v in ref.items() if k != "a"},
             {**ref, "a": ref["a"][:999]}, nan]
    return [{"recorded": recorded, "outputs": c} for c in cases]


def test_js_twin_gives_the_same_pattern_samples_errors_and_inputs():
    cases = error_cases()
    index_sizes = [0, 1, 255, 256, 257, 1000, 705600]
    got = run_node(RUNNER, {
        "sizes": SIZES, "indexSizes": index_sizes, "specs": SPECS,
        "errors": [{"recorded": c["recorded"],
                    "outputs": {k: [None if math.isnan(x) else float(x) for x in v] for k, v in c["outputs"].items()}}
                   for c in cases]})
    assert got["pattern"] == [hashlib.sha256(check_pattern(h, w).tobytes()).hexdigest() for h, w in SIZES]
    assert got["indices"] == [answers.sample_indices(n) for n in index_sizes]
    want = [answers.error(c["recorded"], c["outputs"]) for c in cases]
    assert [math.inf if e == "inf" else e for e in got["errors"]] == pytest.approx(want, rel=1e-6, abs=1e-9)
    # The cases mean what they say: exact (but for the record's 7 digits), noise of 1% of the
    # range, a zero reference moved by 1e-4, a missing output, a wrong size, a NaN.
    assert want[0] < 1e-6 and 0.005 < want[1] < 0.1 and want[2] == pytest.approx(0.1, rel=1e-3)
    assert want[3:] == [math.inf] * 3
    for spec, result in zip(SPECS, got["inputs"]):
        expected = answers.part_input(spec) if spec.get("part") else answers.model_input(spec)
        assert np.abs(np.asarray(result["values"], np.float32) - expected.ravel()).max() <= 1e-5, spec
        assert result["leaked"] == 0


def test_pattern_is_a_scene_not_noise():
    image = check_pattern(320, 320)
    # the ramp's corners, a disc's colour ring and its dark core, the other disc
    assert image[0, 0].tolist() == [96, 128, 96] and image[319, 319].tolist() == [159, 128, 159]
    assert image[80, 80].tolist() == [20, 20, 20] and image[80, 30].tolist() == [230, 40, 40]
    assert image[240, 290].tolist() == [250, 250, 250]


def test_tolerance_follows_the_quantisation_and_the_measured_error():
    parts = {"model": {"out": np.ones(4)}}
    assert answers.record(parts, "src", "none", 1e-6)["tolerance"] == answers.TOLERANCE["none"]
    assert answers.record(parts, "src", "uint8", 0.3)["tolerance"] == pytest.approx(0.6)
    assert answers.record(parts, "src", "float16", None)["tfjs_wasm_error"] is None


def litert_roles(folder, manifest: dict, part: str) -> dict:
    """One part's .tflite (LiteRT, Python) on the pattern, in the record's roles."""
    check = manifest["answer_check"]
    if part == "model":
        x = answers.model_input(manifest["input"])
        out = tflite.run_tflite(folder / manifest["litert"]["model"]["path"], [x])
        tensors = manifest["outputs"]["tensors"]
        if len(tensors) == 1:
            return {tensors[0].get("key", tensors[0]["name"]): next(iter(out.values()))}
        return {t["key"]: out[t["key"]] for t in tensors}
    spec = manifest["input"] if part.startswith("detector") else manifest["landmark_input"]
    out = tflite.run_tflite(folder / manifest["litert"][part]["path"], [answers.part_input(spec)])
    names = manifest["server"]["outputs"]["detector" if part.startswith("detector") else "landmark"]
    return {role: out[names[role]] for role in check["parts"][part]}


def assert_record_holds(folder):
    manifest = read_manifest(folder)
    check = manifest["answer_check"]
    assert check["pattern"] == "discs-v1" and check["tolerance"] >= answers.TOLERANCE[manifest["quantization"]]
    # The build's TF.js graph on Node's WASM backend reproduced the source's answers.
    assert check["tfjs_wasm_error"] < 1e-4
    for part, recorded in check["parts"].items():
        got = litert_roles(folder, manifest, part)
        assert answers.error(recorded, got) < 1e-4, part
        # A backend whose every output is shifted by a fifth of its range is caught.
        shifted = {role: v + 0.2 * max(np.abs(v).max(), answers.SCALE_FLOOR) for role, v in got.items()}
        assert answers.error(recorded, shifted) > check["tolerance"], part
    return manifest


def test_classifier_and_hands_records(built_model):
    lite0 = assert_record_holds(built_model("efficientnet-lite0"))
    # Roles by key where the tensors have keys (the pooled features beside the probabilities).
    assert list(lite0["answer_check"]["parts"]["model"]) == [t.get("key", t["name"]) for t in lite0["outputs"]["tensors"]]
    assert [t.get("key") for t in lite0["outputs"]["tensors"]] == ["probabilities", "features"]
    hands = assert_record_holds(built_model("handpose"))
    assert sorted(hands["answer_check"]["parts"]) == ["detector_full", "detector_lite", "landmark_full", "landmark_lite"]
    assert sorted(hands["answer_check"]["parts"]["detector_full"]) == ["boxes", "logits"]


@pytest.mark.skipif(not YOLOV5N_WEIGHTS.is_file(), reason="shared yolov5n.pt is absent")
@pytest.mark.parametrize("imgsz", [640, 320])
def test_detector_record_has_real_boxes(built_model, imgsz):
    """The pattern is worth checking a detector on: YOLOv5n finds objects in it at both sizes,
    so a backend that finds nothing, or moves the boxes, fails."""
    folder = built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS), imgsz=None if imgsz == 640 else imgsz)
    manifest = assert_record_holds(folder)
    recorded = manifest["answer_check"]["parts"]["model"]
    count = int(recorded["valid_detections"]["values"][0])
    assert count >= 1
    scores = recorded["scores"]["values"][:count]
    # well above the graph's score floor, so float rounding can't add or drop one
    assert min(scores) > manifest["nms"]["score"] + 0.05, scores
    empty = {role: np.zeros(r["size"]) for role, r in recorded.items()}
    assert answers.error(recorded, empty) >= 1
