"""MediaPipe Hands -> TF.js: parity with the original .tflite, the graph contract of
@tensorflow-models/hand-pose-detection 2.0.1, and the library itself on real hand photos."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from converters import handpose, parity
from converters.handpose import graphs, landmarks, library, palm
from converters.__main__ import main as cli
from converters.errors import ConverterError
from harness.paths import ROOT
from harness.photos import photo_rgb

LIBRARY = ROOT / "node_modules" / "@tensorflow-models" / "hand-pose-detection" / "dist"
MODELS = ("detector_full", "detector_lite", "landmark_full", "landmark_lite")


@pytest.fixture(scope="module")
def handpose_dir(built_model):
    return built_model("handpose")


@pytest.fixture(scope="module")
def manifest(handpose_dir):
    return json.loads((handpose_dir / "manifest.json").read_text())


# ---------------------------------------------------------------- parity

# TF.js output name -> the source .tflite's output name of the same meaning (landmark models).
LANDMARK_PAIRS = {"Identity_2": "Identity", "Identity_1": "Identity_1", "Identity": "Identity_2",
                  "Identity_3": "Identity_3"}


def test_fp32_graphs_equal_the_source_tflite_on_another_hand(handpose_dir, manifest):
    """Measured here, not read from the manifest the build gated: each installed TF.js graph
    (WASM, in Node) against the MediaPipe .tflite it was made from (LiteRT), on a hand photo
    the build's parity did not use (up_3.jpg; the build ran on up_1.jpg): the palm detectors
    on the letterboxed photo (scores and box/keypoint regressors apart, as their scales
    differ), the landmark models on the hand crop, every output within the fp32 target."""
    from modelcontract.geometry import prepare

    source = handpose.resolve_source(None)
    files = handpose.source_files(source)
    assert {key: manifest["source"]["files"][key]["sha256"] for key in MODELS} == \
        {key: source.extra["files"][key]["sha256"] for key in MODELS}  # the files this build was made from
    image = photo_rgb("up_3.jpg")
    x, transform = prepare(image, palm.DETECTOR_INPUT)
    relative, crop = {}, None
    for variant in ("full", "lite"):
        detector, landmark = f"detector_{variant}", f"landmark_{variant}"
        ref = graphs.tflite_reference(files[detector], x)
        expected = np.concatenate([ref["Identity_1"], ref["Identity"]], axis=-1)  # [score, 18 regressors]
        got = parity.run_tfjs(handpose_dir / manifest["tfjs"][detector], {"input_1": x})["outputs"]["Identity"]
        relative[f"{detector} scores"] = parity.compare(expected[..., :1], got[..., :1])["relative"]
        relative[f"{detector} boxes"] = parity.compare(expected[..., 1:], got[..., 1:])["relative"]
        if crop is None:  # the full detector's best palm gives the crop both landmark models see
            crop = landmarks.hand_crop(image, palm.best_palm(expected), transform)
        ref = graphs.tflite_reference(files[landmark], crop)
        got = parity.run_tfjs(handpose_dir / manifest["tfjs"][landmark], {"input_1": crop})["outputs"]
        for tfjs_name, tflite_name in LANDMARK_PAIRS.items():
            relative[f"{landmark} {tfjs_name}"] = parity.compare(ref[tflite_name], got[tfjs_name])["relative"]
    assert len(relative) == 12 and max(relative.values()) <= parity.TARGETS["none"], relative


def test_parity_inputs_are_a_real_hand(manifest):
    p = manifest["parity"]
    if p["photo"] != "up_1.jpg":
        pytest.skip(f"the build's parity ran on {p['photo']}: the hand fixtures were absent then")
    # The full palm detector (reference LiteRT) finds the palm; the crop shows a hand.
    assert p["palm_score"]["full"] > 0.5
    assert p["tfjs"]["models"]["landmark_full"]["hand_flag"] > 0.5


def test_recorded_parity_is_what_was_run(manifest):
    """The build records the TF.js backend the runs reported and, per model, the installed
    .tflite run through LiteRT against the original, output by output (not constants)."""
    p = manifest["parity"]
    assert p["tfjs"]["backend"] == manifest["end_to_end"]["full"]["backend"]
    server = p["server"]["models"]
    assert set(server) == set(MODELS) and p["server"]["same_file_as_reference"] is True
    assert set(server["detector_full"]["outputs"]) == {"Identity", "Identity_1"}
    assert set(server["landmark_full"]["outputs"]) == {"Identity", "Identity_1", "Identity_2", "Identity_3"}
    assert p["server"]["relative"] == max(m["relative"] for m in server.values())
    speed = manifest["speed"]
    assert set(speed["parts"]) == set(MODELS) and speed["threads"] == 2
    assert speed["ms"] == pytest.approx(speed["parts"]["detector_full"] + speed["parts"]["landmark_full"], abs=0.02)
    assert manifest["source"]["licence"]["name"] == "Apache-2.0"


def test_float16_parity(built_model):
    folder = built_model("handpose", quantize="float16")
    m = json.loads((folder / "manifest.json").read_text())
    assert m["quantization"] == "float16" and m["parity"]["target_relative"] == 1e-2
    for key, result in m["parity"]["tfjs"]["models"].items():
        assert result["relative"] <= 1e-2, (key, result)
    # fp16 weights are half the fp32 bytes
    fp32 = json.loads((folder.parent / "handpose" / "manifest.json").read_text())
    for key in MODELS:
        assert m["tfjs_bytes"][key] < 0.6 * fp32["tfjs_bytes"][key]


# ---------------------------------------------------------------- graph contract

def _library_landmark_request() -> list[str]:
    source = (LIBRARY / "tfjs" / "detector.js").read_text()
    match = re.search(r"landmarkModel\.execute\(imageValueShifted,\s*\[([^\]]*)\]", source)
    assert match, "hand-pose-detection changed how it calls the landmark model"
    return [s.split(":")[0] for s in re.findall(r"'([^']+)'", match.group(1))]


def test_model_json_matches_library_expectations(handpose_dir, manifest):
    from converters.tfjs import graph_signature

    request = _library_landmark_request()
    assert request == ["Identity_2", "Identity_1", "Identity", "Identity_3"]
    # The library reads them as [landmarks, hand flag, handedness, world landmarks].
    wanted_landmark = dict(zip(request, ([1, 63], [1, 1], [1, 1], [1, 63])))
    for variant in ("full", "lite"):
        det = json.loads((handpose_dir / manifest["tfjs"][f"detector_{variant}"]).read_text())
        sig = graph_signature(det)
        assert [(i["name"], i["shape"]) for i in sig["inputs"]] == [("input_1", [1, 192, 192, 3])]
        assert [(o["name"], o["shape"]) for o in sig["outputs"]] == [("Identity", [1, 2016, 19])]

        lm = json.loads((handpose_dir / manifest["tfjs"][f"landmark_{variant}"]).read_text())
        sig = graph_signature(lm)
        assert [(i["name"], i["shape"]) for i in sig["inputs"]] == [("input_1", [1, 224, 224, 3])]
        assert {o["name"]: o["shape"] for o in sig["outputs"]} == wanted_landmark
        nodes = {n["name"] for n in lm["modelTopology"]["node"]}
        assert set(request) <= nodes


def test_landmark_outputs_carry_the_right_meaning(handpose_dir, manifest):
    """Identity_2 must be the landmarks and Identity the handedness: compare each TF.js
    output with the named .tflite output on the same crop."""
    from modelcontract.geometry import prepare

    image = photo_rgb("up_1.jpg")
    x, transform = prepare(image, palm.DETECTOR_INPUT)
    ref_det = graphs.tflite_reference(handpose_dir / "tflite" / "palm_detection_full.tflite", x)
    best = palm.best_palm(np.concatenate([ref_det["Identity_1"], ref_det["Identity"]], axis=-1))
    crop = landmarks.hand_crop(image, best, transform)
    ref = graphs.tflite_reference(handpose_dir / "tflite" / "hand_landmark_full.tflite", crop)
    got = parity.run_tfjs(handpose_dir / manifest["tfjs"]["landmark_full"], {"input_1": crop})["outputs"]
    pairs = {"Identity_2": "Identity", "Identity_1": "Identity_1", "Identity": "Identity_2", "Identity_3": "Identity_3"}
    for tfjs_name, tflite_name in pairs.items():
        assert parity.compare(ref[tflite_name], got[tfjs_name])["relative"] <= 1e-4, tfjs_name
    # landmarks in 224-px crop units, hand present
    assert 0 < np.median(got["Identity_2"].reshape(21, 3)[:, :2]) < 224
    assert got["Identity_1"].item() > 0.5


def test_anchor_decode_matches_library(manifest):
    """The manifest's anchors/decode constants and the Python anchor generator agree with the library."""
    script = (
        "const c=require('@tensorflow-models/hand-pose-detection/dist/tfjs/constants.js');"
        "const a=require('@tensorflow-models/hand-pose-detection/dist/shared/calculators/create_ssd_anchors.js');"
        "const anchors=a.createSsdAnchors(c.MPHANDS_DETECTOR_ANCHOR_CONFIGURATION);"
        "console.log(JSON.stringify({anchors: c.MPHANDS_DETECTOR_ANCHOR_CONFIGURATION,"
        " decode: c.MPHANDS_TENSORS_TO_DETECTION_CONFIGURATION,"
        " centres: anchors.map(x=>[x.xCenter,x.yCenter]), sizes: anchors.map(x=>[x.width,x.height])}))")
    out = subprocess.run(["node", "-e", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lib = json.loads(out)
    assert manifest["anchors"] == lib["anchors"]
    assert manifest["decode"] == lib["decode"]
    np.testing.assert_allclose(palm.anchor_centres(), np.array(lib["centres"]), atol=1e-9)
    assert np.all(np.array(lib["sizes"]) == 1.0)  # fixedAnchorSize: the decode relies on it


# ---------------------------------------------------------------- the library, end to end

def test_library_finds_the_hand_like_mediapipe(handpose_dir):
    """hand-pose-detection (runtime 'tfjs', WASM) on the converted files vs MediaPipe's own
    Python solution (model_complexity=1) on the same real photo."""
    pytest.importorskip("mediapipe", reason="MediaPipe's own runtime (the reference) is not installed: "
                        "mediapipe 0.10.21 has wheels for CPython 3.9-3.12 only")
    image = photo_rgb("up_1.jpg")
    found = library.run_library(handpose_dir, "full", {"up_1.jpg": image})
    hands = found["up_1.jpg"]["hands"]
    reference = library.mediapipe_hands(image, "full")
    assert len(reference) == 1 and len(hands) == 1
    assert len(hands[0]["keypoints"]) == 21 and hands[0]["names"] == landmarks.KEYPOINT_NAMES
    result = library.compare_hands(reference, hands)["pairs"][0]
    assert result["mean_px"] < library.KEYPOINT_TOLERANCE_PX, result
    assert result["handedness"] == result["reference_handedness"]
    assert 0.5 < hands[0]["score"] <= 1.0


def test_end_to_end_recorded_for_both_variants(manifest):
    e2e = manifest["end_to_end"]
    if "skipped" in e2e["full"]:  # built where mediapipe does not import (Python 3.13)
        pytest.skip(e2e["full"]["skipped"])
    full = e2e["full"]["photos"]
    lite = e2e["lite"]["photos"]
    if "up_1.jpg" not in full:
        pytest.skip("hand fixtures were absent at build time")
    assert full["up_1.jpg"]["hands"] == 1 and full["up_1.jpg"]["pairs"][0]["mean_px"] < 12
    # MediaPipe's lite models miss up_1 (measured); up_3 is found by both.
    assert lite["up_3.jpg"]["reference_hands"] == 1 and lite["up_3.jpg"]["hands"] == 1
    assert lite["up_3.jpg"]["pairs"][0]["mean_px"] < 12


def test_manifest_shape(handpose_dir, manifest):
    assert manifest["task"] == "handpose" and manifest["labels"] == ["Left", "Right"]
    assert manifest["input"]["range"] == [0.0, 1.0] and manifest["input"]["resize"] == "letterbox"
    assert manifest["landmark_input"]["shape"] == [1, 224, 224, 3]
    assert "mirrored" in manifest["handedness"]["note"]
    for key in MODELS:
        assert (handpose_dir / manifest["tfjs"][key]).is_file()
        assert (handpose_dir / manifest["server"]["models"][key]).is_file()
    # the server artifact is the source file itself
    src = manifest["source"]["files"]
    for key, rel in manifest["server"]["models"].items():
        from modelcontract.manifest import sha256_file

        assert sha256_file(handpose_dir / rel) == src[key]["sha256"]
    assert not list(handpose_dir.rglob("saved_model.pb"))


# ---------------------------------------------------------------- source / CLI errors

def test_weights_none_is_a_clear_error(capsys, tmp_path):
    assert cli(["handpose", "--weights", "none", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: random weights are not meaningful for handpose")
    assert err[1].lstrip().startswith("fix:") and len(err) == 2


def test_weights_must_be_a_folder_with_the_four_files(capsys, tmp_path):
    assert cli(["handpose", "--weights", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2
    assert "must be a folder" in capsys.readouterr().err
    (tmp_path / "w").mkdir()
    assert cli(["handpose", "--weights", str(tmp_path / "w"), "--out", str(tmp_path)]) == 2
    assert "lacks palm_detection_full.tflite" in capsys.readouterr().err
    (tmp_path / "w" / "palm_detection_full.tflite").write_bytes(b"not a model at all")
    for name in ("palm_detection_lite.tflite", "hand_landmark_full.tflite", "hand_landmark_lite.tflite"):
        (tmp_path / "w" / name).write_bytes(b"x" * 16)
    assert cli(["handpose", "--weights", str(tmp_path / "w"), "--out", str(tmp_path)]) == 2
    assert "is not a TFLite flatbuffer" in capsys.readouterr().err


def test_weights_folder_of_the_same_files_is_the_same_source(tmp_path):
    default = handpose.resolve_source(None)
    for info in default.extra["files"].values():
        shutil.copy(info["path"], tmp_path)
    given = handpose.resolve_source(str(tmp_path))
    assert given.sha256 == default.sha256 and given.kind == "tflite-folder"


def test_unknown_tflite_operator_fails_clearly(tmp_path):
    import tensorflow as tf

    from converters.tflite_to_tf import TFLiteGraph

    @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
    def f(x):
        return tf.nn.softmax(x)

    converter = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    path = tmp_path / "softmax.tflite"
    path.write_bytes(converter.convert())
    with pytest.raises(ConverterError, match="unsupported TFLite operator.*SOFTMAX"):
        TFLiteGraph(path)
