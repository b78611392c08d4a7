"""MediaPipe Hands (palm detector + hand landmarks, full and lite) -> TF.js graph models
that @tensorflow-models/hand-pose-detection 2.0.1 (runtime 'tfjs') loads through its
``detectorModelUrl`` / ``landmarkModelUrl`` options.

Source: the four .tflite files shipped in the mediapipe wheel (or a folder holding them).
Route: .tflite -> TF function (converters.tflite_to_tf) -> SavedModel -> TF.js.

What the library expects (read from its dist/tfjs/*.js, not guessed):
  detector  predict([1,192,192,3] in [0,1], letterboxed, zero border) -> ONE tensor
            [1,2016,19]: channel 0 = score logit, 1..18 = box cx,cy,w,h + 7 keypoints
            (x,y), in 192-px units relative to the anchor (splitDetectionResult slices
            [..., 0:1] as logits and [..., 1:] as boxes). The .tflite has two outputs
            (Identity [1,2016,18] regressors, Identity_1 [1,2016,1] classificators);
            the graph concatenates them [classificators, regressors].
  landmark  execute([1,224,224,3] in [0,1], rotated hand ROI), names
            ['Identity_2:0', 'Identity_1:0', 'Identity:0', 'Identity_3:0'] read as
            [landmarks 63, hand flag, handedness, world landmarks 63]. So in TF.js:
            Identity = handedness, Identity_1 = hand flag, Identity_2 = landmarks
            (x,y,z in 224-px units), Identity_3 = world landmarks (metres). The .tflite
            names them differently (Identity = landmarks, Identity_2 = handedness);
            the SavedModel signature keys are chosen so that tensorflowjs' sorted
            Identity_N numbering lands on the library's names.
  Both .tflite models take float input in [0,1] — the same range the library feeds.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import types
from importlib import metadata
from pathlib import Path

import numpy as np

from . import manifest as manifest_io
from . import parity, sources, stages
from .errors import ConverterError
from .sources import Source, load_photo

NAME = "handpose"
TASK = "handpose"
SUMMARY = "MediaPipe Hands palm detector + 21-keypoint landmarks (full & lite), for hand-pose-detection 'tfjs'"

VARIANTS = ("full", "lite")
TFLITE_FILES = {
    "detector_full": "palm_detection_full.tflite",
    "detector_lite": "palm_detection_lite.tflite",
    "landmark_full": "hand_landmark_full.tflite",
    "landmark_lite": "hand_landmark_lite.tflite",
}
LABELS = ["Left", "Right"]
LICENCE = sources.licence("Apache-2.0", "https://github.com/google-ai-edge/mediapipe/blob/master/LICENSE")
KEYPOINT_NAMES = [
    "wrist", "thumb_cmc", "thumb_mcp", "thumb_ip", "thumb_tip",
    "index_finger_mcp", "index_finger_pip", "index_finger_dip", "index_finger_tip",
    "middle_finger_mcp", "middle_finger_pip", "middle_finger_dip", "middle_finger_tip",
    "ring_finger_mcp", "ring_finger_pip", "ring_finger_dip", "ring_finger_tip",
    "pinky_finger_mcp", "pinky_finger_pip", "pinky_finger_dip", "pinky_finger_tip",
]

# The library's own constants (dist/tfjs/constants.js), recorded so a non-library consumer
# (the server runner) decodes exactly the same way. Tests compare them with the library.
ANCHORS = {
    "reduceBoxesInLowestLayer": False, "interpolatedScaleAspectRatio": 1.0,
    "featureMapHeight": [], "featureMapWidth": [], "numLayers": 4,
    "minScale": 0.1484375, "maxScale": 0.75, "inputSizeHeight": 192, "inputSizeWidth": 192,
    "anchorOffsetX": 0.5, "anchorOffsetY": 0.5, "strides": [8, 16, 16, 16],
    "aspectRatios": [1.0], "fixedAnchorSize": True,
}
DECODE = {
    "applyExponentialOnBoxSize": False, "flipVertically": False, "ignoreClasses": [],
    "numClasses": 1, "numBoxes": 2016, "numCoords": 18, "boxCoordOffset": 0,
    "keypointCoordOffset": 4, "numKeypoints": 7, "numValuesPerKeypoint": 2,
    "sigmoidScore": True, "scoreClippingThresh": 100.0, "reverseOutputOrder": True,
    "xScale": 192.0, "yScale": 192.0, "hScale": 192.0, "wScale": 192.0, "minScoreThresh": 0.5,
}
PIPELINE = {
    "nms": {"minSuppressionThreshold": 0.3, "overlapType": "intersection-over-union"},
    "palm_to_roi": {"rotationVectorStartKeypointIndex": 0, "rotationVectorEndKeypointIndex": 2,
                    "rotationVectorTargetAngleDegree": 90,
                    "shiftX": 0, "shiftY": -0.5, "scaleX": 2.6, "scaleY": 2.6, "squareLong": True},
    "landmarks_to_roi": {"shiftX": 0, "shiftY": -0.1, "scaleX": 2.0, "scaleY": 2.0, "squareLong": True},
    "hand_presence_threshold": 0.5,
    "min_similarity_threshold": 0.5,
    "landmarks": {"numLandmarks": 21, "inputImageWidth": 224, "inputImageHeight": 224, "normalizeZ": 0.4},
}

DETECTOR_INPUT = {
    "name": "input_1", "shape": [1, 192, 192, 3], "layout": "NHWC", "dtype": "float32", "color": "RGB",
    "range": [0.0, 1.0], "resize": "letterbox", "pad_value": 0,
    "scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
}
LANDMARK_INPUT = {
    "name": "input_1", "shape": [1, 224, 224, 3], "layout": "NHWC", "dtype": "float32", "color": "RGB",
    "range": [0.0, 1.0], "resize": "rotated-roi", "pad_value": 0,
    "scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
    "note": "a square hand ROI (from the palm detection, or the previous frame's landmarks), rotated so "
            "wrist -> middle-finger MCP points up, warped bilinearly to 224x224 with a zero border",
}

# TF.js output contract per model kind: (name, shape, meaning); signature keys sort into this order.
DETECTOR_OUTPUTS = [("Identity", [1, 2016, 19],
                     "per anchor: [score logit, cx, cy, w, h, 7 x (kx, ky)], offsets in 192-px units "
                     "from the anchor centre (anchors: see 'anchors'; decode: see 'decode')")]
LANDMARK_OUTPUTS = [
    ("Identity", [1, 1], "handedness: sigmoid score, >= 0.5 -> 'Left' (mirrored-image convention)"),
    ("Identity_1", [1, 1], "hand presence score (sigmoid); the library drops the hand below 0.5"),
    ("Identity_2", [1, 63], "21 landmarks x (x, y, z) in 224-px crop units (z relative, same scale as x)"),
    ("Identity_3", [1, 63], "21 world landmarks x (x, y, z) in metres, origin at the hand's centre"),
]
# signature key -> tflite output name; sorted keys give Identity, Identity_1, Identity_2, Identity_3.
LANDMARK_KEYS = {"handedness": "Identity_2", "handflag": "Identity_1",
                 "landmarks": "Identity", "world_landmarks": "Identity_3"}

ROOT = Path(__file__).resolve().parent.parent
CHECK_SCRIPT = Path(__file__).resolve().parent / "handpose_check.mjs"
KEYPOINT_TOLERANCE_PX = 12.0


# ---------------------------------------------------------------------------- source

def _mediapipe_models_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("mediapipe")
    if spec is None or spec.origin is None:
        raise ConverterError("the mediapipe package (which ships the MediaPipe Hands .tflite files) is not installed",
                             "pip install -r requirements.txt, or pass --weights FOLDER holding "
                             + ", ".join(TFLITE_FILES.values()))
    return Path(spec.origin).parent / "modules"


def _find_files(folder: Path) -> dict[str, Path]:
    found, missing = {}, []
    for key, filename in TFLITE_FILES.items():
        direct = folder / filename
        matches = [direct] if direct.is_file() else sorted(folder.rglob(filename))
        if not matches:
            missing.append(filename)
            continue
        path = matches[0]
        with open(path, "rb") as f:
            head = f.read(8)
        if head[4:8] != b"TFL3":
            raise ConverterError(f"{path} is not a TFLite flatbuffer", "pass the MediaPipe Hands .tflite files")
        found[key] = path.resolve()
    if missing:
        raise ConverterError(f"{folder} lacks {', '.join(missing)}",
                             "pass --weights FOLDER holding " + ", ".join(TFLITE_FILES.values()))
    return found


def resolve_source(weights: str | None) -> Source:
    """Default: the mediapipe wheel's files. A path: a folder with the four .tflite files."""
    if weights == "none":
        raise ConverterError("random weights are not meaningful for handpose: the graphs are rebuilt from "
                             "the trained .tflite files themselves",
                             "omit --weights (uses the mediapipe wheel's models) or pass --weights FOLDER "
                             "holding " + ", ".join(TFLITE_FILES.values()))
    if weights is None:
        folder = _mediapipe_models_dir()
        kind = "mediapipe-wheel"
        licence = LICENCE
    else:
        folder = Path(weights).expanduser()
        if not folder.is_dir():
            raise ConverterError(f"--weights for handpose must be a folder, got {folder}",
                                 "pass --weights FOLDER holding " + ", ".join(TFLITE_FILES.values()))
        kind = "tflite-folder"
        licence = sources.user_licence("MediaPipe Hands .tflite files")
    files = _find_files(folder)
    from .manifest import sha256_file

    digests = {key: sha256_file(path) for key, path in files.items()}
    # One sha256 over the four files' digests: changes when any model changes.
    combined = hashlib.sha256("".join(f"{k}:{digests[k]}\n" for k in sorted(digests)).encode()).hexdigest()
    extra = {"files": {key: {"path": str(files[key]), "sha256": digests[key]} for key in files}}
    try:
        extra["mediapipe"] = metadata.version("mediapipe")
    except metadata.PackageNotFoundError:
        pass
    return Source(kind=kind, path=folder.resolve(), sha256=combined, extra=extra, licence=licence)


# ---------------------------------------------------------------------------- photo

def hand_photo() -> tuple[str, np.ndarray]:
    """The real hand photo parity runs on: the shared fixture up_1.jpg when present (a
    test-only image, never shipped), else zidane.jpg from the ultralytics wheel."""
    from PIL import Image

    shared = Path(os.environ.get("DATARAILROAD_SHARED", ROOT.parent / "shared"))
    path = shared / "fixtures" / "hands" / "up_1.jpg"
    if path.is_file():
        with Image.open(path) as im:
            return "up_1.jpg", np.asarray(im.convert("RGB"))
    return "zidane.jpg", load_photo("zidane.jpg")


# ---------------------------------------------------------------------------- detector decode

def anchor_centres(config: dict = ANCHORS) -> np.ndarray:
    """[N, 2] anchor centres (x, y), normalised (modelcontract.anchors; with fixedAnchorSize
    every anchor is 1x1, so only the centres matter)."""
    from modelcontract.anchors import ssd_anchors

    return ssd_anchors(config)[:, :2]


def best_palm(raw: np.ndarray) -> dict:
    """The highest-scoring palm of a [1,2016,19] detector output (library layout), decoded as
    the library does (modelcontract.hands, no score cut): score, box and 7 keypoints as
    fractions of the 192 input."""
    from modelcontract.anchors import ssd_anchors
    from modelcontract.hands import decode_palms

    raw = np.asarray(raw, dtype=np.float32)[0]
    no_padding = {"top": 0.0, "left": 0.0, "right": 0.0, "bottom": 0.0}
    palms = decode_palms(raw[:, 1:], raw[:, 0], ssd_anchors(ANCHORS).astype(np.float32), DECODE, no_padding, 1,
                         PIPELINE["nms"]["minSuppressionThreshold"], detect_score=0.0)
    return palms[0]


def hand_crop(image: np.ndarray, palm: dict, transform) -> np.ndarray:
    """The landmark model's input for a palm found on the letterboxed 192 input (``transform``
    maps that input back to ``image``): the library's rotated hand ROI, 224x224 in [0, 1]
    (modelcontract.hands.hand_crop)."""
    from modelcontract.hands import hand_crop as library_hand_crop

    size192 = DETECTOR_INPUT["shape"][1]
    height, width = image.shape[:2]
    scale = np.array([size192, size192])
    fraction = np.array([width, height])

    def to_image(xy):  # 192-input fractions -> image fractions
        return transform.to_source(np.asarray(xy, dtype=np.float64) * scale) / fraction

    box = palm["box"]
    x_min, y_min = to_image([box["xMin"], box["yMin"]])
    x_max, y_max = to_image([box["xMin"] + box["width"], box["yMin"] + box["height"]])
    on_image = {"box": {"xMin": x_min, "yMin": y_min, "width": x_max - x_min, "height": y_max - y_min},
                "keypoints": [tuple(to_image(k)) for k in palm["keypoints"]]}
    size = LANDMARK_INPUT["shape"][1]
    return library_hand_crop(image, on_image, PIPELINE["palm_to_roi"], size, size)[0]


# ---------------------------------------------------------------------------- build

def _tflite_reference(path: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    from .tflite import interpreter

    interp = interpreter(path)
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return {d["name"]: np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()}


def _check_io(key: str, graph) -> None:
    """The .tflite must have the I/O the output mapping assumes; else fail before converting."""
    ins = [t.shape for t in graph.input_specs()]
    outs = {graph.tensors[i].name: graph.tensors[i].shape for i in graph.outputs}
    if key.startswith("detector"):
        want_in, want_out = [[1, 192, 192, 3]], {"Identity": [1, 2016, 18], "Identity_1": [1, 2016, 1]}
    else:
        want_in = [[1, 224, 224, 3]]
        want_out = {"Identity": [1, 63], "Identity_1": [1, 1], "Identity_2": [1, 1], "Identity_3": [1, 63]}
    if ins != want_in or outs != want_out:
        raise ConverterError(f"{graph.path.name}: inputs {ins} / outputs {outs} differ from the MediaPipe Hands "
                             f"models this converter maps ({want_in} / {want_out})",
                             "use the palm_detection/hand_landmark .tflite files of mediapipe 0.10.x")


def _library_outputs(key: str):
    """tflite outputs {name: tensor} -> the signature dict whose sorted keys number correctly."""
    import tensorflow as tf

    if key.startswith("detector"):
        return lambda o: {"detections": tf.concat([o["Identity_1"], o["Identity"]], axis=-1)}
    return lambda o: {k: o[v] for k, v in LANDMARK_KEYS.items()}


def _check_model_json(key: str, model_json: dict) -> None:
    """The produced graph must expose exactly the names/shapes the library asks for."""
    from .tfjs import graph_signature

    sig = graph_signature(model_json)
    want = DETECTOR_OUTPUTS if key.startswith("detector") else LANDMARK_OUTPUTS
    got = sorted((o["name"], o["shape"]) for o in sig["outputs"])
    if got != sorted((n, s) for n, s, _ in want):
        raise ConverterError(f"TF.js {key} outputs are {got}, the library needs {[(n, s) for n, s, _ in want]}",
                             "this is a converter bug; please report it")
    nodes = {n["name"] for n in model_json["modelTopology"]["node"]}
    if not {n for n, _, _ in want} <= nodes:
        raise ConverterError(f"TF.js {key} graph lacks nodes {sorted({n for n, _, _ in want} - nodes)}",
                             "this is a converter bug; please report it")


def _parity_detector(ref: dict, got: np.ndarray) -> dict:
    expected = np.concatenate([ref["Identity_1"], ref["Identity"]], axis=-1)
    parts = {"logits": parity.compare(expected[..., :1], got[..., :1]),
             "boxes": parity.compare(expected[..., 1:], got[..., 1:])}
    worst = max(parts.values(), key=lambda p: p["relative"])
    return {"max_abs": worst["max_abs"], "relative": worst["relative"], "outputs": parts}


def _parity_landmark(ref: dict, got: dict) -> dict:
    parts = {}
    for (name, _, _), key in zip(LANDMARK_OUTPUTS, sorted(LANDMARK_KEYS)):
        parts[f"{name} ({key})"] = parity.compare(ref[LANDMARK_KEYS[key]], got[name])
    worst = max(parts.values(), key=lambda p: p["relative"])
    return {"max_abs": worst["max_abs"], "relative": worst["relative"], "outputs": parts}


# ---------------------------------------------------------------------------- stages

def build(ctx) -> dict:
    return stages.run(ctx, load, export, verify, describe)


def source_files(source: Source) -> dict[str, Path]:
    return {key: Path(info["path"]) for key, info in source.extra["files"].items()}


def load(ctx) -> dict:
    """The four .tflite graphs, their I/O checked; the files themselves are the server's."""
    from .tflite_to_tf import TFLiteGraph

    files = source_files(ctx.source)
    graphs = {key: TFLiteGraph(path) for key, path in files.items()}
    for key, graph in graphs.items():
        _check_io(key, graph)
    (ctx.workdir / "tflite").mkdir()
    for key, path in files.items():
        shutil.copy2(path, ctx.workdir / "tflite" / TFLITE_FILES[key])
    return graphs


def export(ctx, graphs: dict) -> dict[str, int]:
    """Each graph -> TF function -> SavedModel -> tfjs/<key>/; returns {key: TF.js bytes}."""
    from . import tfjs
    from .tflite_to_tf import to_saved_model

    sizes = {}
    with tempfile.TemporaryDirectory(prefix="handpose-sm-") as tmp:
        for key, graph in graphs.items():
            saved = to_saved_model(graph, Path(tmp) / key, _library_outputs(key))
            out_dir = ctx.workdir / "tfjs" / key
            _check_model_json(key, tfjs.convert_saved_model(saved, out_dir, ctx.quantize))
            sizes[key] = sum(p.stat().st_size for p in out_dir.iterdir())
            ctx.log(f"{key}: {sizes[key] / 1e6:.2f} MB")
    return sizes


def _tfjs_path(key: str) -> str:
    return f"tfjs/{key}/model.json"


def _same_names(ref: dict, got: dict) -> dict:
    """Every output of the installed .tflite against the original's, by name."""
    parts = {name: parity.compare(ref[name], got[name]) for name in ref}
    worst = max(parts.values(), key=lambda p: p["relative"])
    return {"max_abs": worst["max_abs"], "relative": worst["relative"], "outputs": parts}


def _check_model(ctx, key: str, x: np.ndarray, reference: dict, tfjs_parity) -> stages.Checked:
    """One model: its TF.js graph and the installed .tflite against the original .tflite."""
    def compare(tfjs_out: dict, litert_out: dict) -> stages.Comparison:
        server = _same_names(reference, litert_out)
        return stages.Comparison(tfjs=tfjs_parity(reference, tfjs_out), server=server,
                                 server_ok=server["relative"] <= parity.TARGETS["none"])

    return stages.check(ctx, tfjs_model=_tfjs_path(key), tflite_model=f"tflite/{TFLITE_FILES[key]}",
                        inputs={"input_1": x}, litert_inputs=[x], compare=compare, label=key)


def verify(ctx, graphs: dict, sizes: dict) -> types.SimpleNamespace:
    """Each TF.js graph and each installed .tflite against the original .tflite (LiteRT) on a
    real hand photo, then the whole library in Node against MediaPipe's own Python solution."""
    from modelcontract.geometry import prepare

    files = source_files(ctx.source)
    photo, image = hand_photo()
    x, transform = prepare(image, DETECTOR_INPUT)
    checked, palms, crop = {}, {}, None
    for variant in VARIANTS:  # full first: its palm gives the hand crop both landmark models see
        det, lm = f"detector_{variant}", f"landmark_{variant}"
        ref = _tflite_reference(files[det], x)
        checked[det] = _check_model(ctx, det, x, ref, lambda r, out: _parity_detector(r, out["Identity"]))
        palm = best_palm(np.concatenate([ref["Identity_1"], ref["Identity"]], axis=-1))
        palms[variant] = palm["score"]
        if crop is None:
            crop = hand_crop(image, palm, transform)
        ref_lm = _tflite_reference(files[lm], crop)
        checked[lm] = _check_model(ctx, lm, crop, ref_lm, _parity_landmark)
        checked[lm].tfjs["hand_flag"] = float(ref_lm["Identity_1"].ravel()[0])
    end_to_end = {}
    for variant in VARIANTS:
        end_to_end[variant] = library_vs_mediapipe(ctx.workdir, variant)
        ctx.log(f"{variant} end to end: {json.dumps(end_to_end[variant].get('photos'))[:300]}")
    same_files = all(manifest_io.sha256_file(ctx.workdir / "tflite" / TFLITE_FILES[key]) ==
                     ctx.source.extra["files"][key]["sha256"] for key in files)
    return types.SimpleNamespace(photo=photo, checked=checked, palms=palms, same_files=same_files,
                                 end_to_end=end_to_end, answer=answer_record(ctx, files))


# The pipeline's roles of each model's outputs: the original .tflite's names, and the TF.js
# graph's (its detector joins the logit and the 18 box values per anchor, as splitDetections
# in handpipeline.js takes them apart).
TFLITE_ROLES = {"detector": {"logits": "Identity_1", "boxes": "Identity"}, "landmark": LANDMARK_KEYS}
TFJS_LANDMARK_ROLES = {"landmarks": "Identity_2:0", "handflag": "Identity_1:0", "handedness": "Identity:0",
                       "world_landmarks": "Identity_3:0"}


def _tfjs_roles(kind: str, out: dict) -> dict:
    if kind == "detector":
        joined = out["Identity"]
        return {"logits": joined[..., :1], "boxes": joined[..., 1:]}
    return {role: out[name] for role, name in TFJS_LANDMARK_ROLES.items()}


def answer_record(ctx, files: dict) -> dict:
    """The manifest's answer_check: each original .tflite on the pattern at its input size."""
    from modelcontract import answers

    parts = {}
    for key in TFLITE_FILES:
        kind = key.split("_")[0]
        x = answers.part_input(DETECTOR_INPUT if kind == "detector" else LANDMARK_INPUT)
        ref = _tflite_reference(files[key], x)
        parts[key] = stages.AnswerPart(
            reference={role: ref[name] for role, name in TFLITE_ROLES[kind].items()}, tfjs_model=_tfjs_path(key),
            inputs={"input_1": x}, tfjs_outputs=["Identity"] if kind == "detector" else list(TFJS_LANDMARK_ROLES.values()),
            roles=functools.partial(_tfjs_roles, kind))
    return stages.answer_check(ctx, parts, f"LiteRT {_version('ai-edge-litert')} (the original .tflite files)")


_MODEL_INPUTS = {"detector": "letterboxed 192x192 of the photo",
                 "landmark": "224x224 hand crop around detector_full's best palm"}


def parity_record(verified) -> dict:
    """The manifest's parity: per model, TF.js and the installed .tflite against the original."""
    checked = verified.checked
    models = {key: {**{k: v for k, v in c.tfjs.items() if k not in ("backend", "version", "ms")},
                    "tfjs_ms": c.tfjs["ms"], "input": _MODEL_INPUTS[key.split("_")[0]]}
              for key, c in checked.items()}
    worst = max(models.values(), key=lambda r: r["relative"])
    server = {key: {k: c.server[k] for k in ("max_abs", "relative", "outputs")} for key, c in checked.items()}
    worst_server = max(server.values(), key=lambda r: r["relative"])
    first = next(iter(checked.values()))
    return {
        "photo": verified.photo,
        "reference": {"runtime": "litert", "version": _version("ai-edge-litert"),
                      "model": "the original .tflite files"},
        "tfjs": {"backend": "/".join(sorted({c.tfjs["backend"] for c in checked.values()})),
                 "version": first.tfjs["version"], "max_abs": worst["max_abs"], "relative": worst["relative"],
                 "models": models},
        "server": {"runtime": "litert", "same_file_as_reference": verified.same_files,
                   "max_abs": worst_server["max_abs"], "relative": worst_server["relative"], "models": server},
        "palm_score": verified.palms,
        "target_relative": first.target,
        "passed": all(c.passed for c in checked.values()),
    }


def speed_record(checked: dict) -> dict:
    """One frame that detects: the full palm detector plus the full landmark model."""
    parts = {key: c.speed["ms"] for key, c in checked.items()}
    first = checked["detector_full"].speed
    return {**first, "ms": round(parts["detector_full"] + parts["landmark_full"], 2),
            "what": "detector_full + landmark_full (a frame that runs the palm detector)", "parts": parts}


def describe(ctx, graphs: dict, sizes: dict, verified) -> dict:
    tensors = [{"model": "detector", **dict(zip(("name", "shape", "meaning"), o))} for o in DETECTOR_OUTPUTS]
    tensors += [{"model": "landmark", **dict(zip(("name", "shape", "meaning"), o))} for o in LANDMARK_OUTPUTS]
    return {
        "title": "MediaPipe Hands (palm detector + hand landmarks, full & lite)",
        "input": dict(DETECTOR_INPUT),
        "landmark_input": dict(LANDMARK_INPUT),
        "outputs": {"format": "mediapipe-hands", "tensors": tensors,
                    "library_landmark_request": ["Identity_2:0", "Identity_1:0", "Identity:0", "Identity_3:0"]},
        "labels": LABELS,
        "handedness": {
            "rule": "landmark Identity >= 0.5 -> 'Left', else 'Right' (as the library does)",
            "note": "MediaPipe's handedness assumes a mirrored (selfie) image: on a non-mirrored photo or a "
                    "rear camera, 'Left' usually means the person's right hand; swap the label (or flip "
                    "the image) when the input is not mirrored",
        },
        "keypoints": KEYPOINT_NAMES,
        "anchors": ANCHORS,
        "decode": DECODE,
        "pipeline": PIPELINE,
        "library": {
            "package": "@tensorflow-models/hand-pose-detection", "version": _npm_version(),
            "usage": "createDetector(SupportedModels.MediaPipeHands, {runtime: 'tfjs', modelType: 'full'|'lite', "
                     "detectorModelUrl: <model folder>/tfjs/detector_<type>/model.json, "
                     "landmarkModelUrl: <model folder>/tfjs/landmark_<type>/model.json})",
        },
        "tfjs": {key: _tfjs_path(key) for key in sizes},
        "tfjs_bytes": sizes,
        "server": {
            "runtime": "litert",
            "models": {key: f"tflite/{name}" for key, name in TFLITE_FILES.items()},
            # The .tflite output names per role (the pages' LiteRT.js path reads them from here).
            "outputs": {"detector": {"boxes": "Identity", "logits": "Identity_1"}, "landmark": dict(LANDMARK_KEYS)},
            "note": "the original MediaPipe .tflite files (fp16 weights, fp32 compute). Their output names "
                    "differ from the TF.js ones: detector Identity = [1,2016,18] regressors, Identity_1 = "
                    "[1,2016,1] logits; landmark Identity = landmarks, Identity_1 = hand flag, Identity_2 = "
                    "handedness, Identity_3 = world landmarks",
        },
        "parity": parity_record(verified),
        "speed": speed_record(verified.checked),
        "end_to_end": verified.end_to_end,
        "answer_check": verified.answer,
    }


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _npm_version() -> str | None:
    package = ROOT / "node_modules" / "@tensorflow-models" / "hand-pose-detection" / "package.json"
    try:
        return json.loads(package.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


# ---------------------------------------------------------------------------- end to end

def run_library(model_dir: Path, variant: str, images: dict[str, np.ndarray], timeout: float = 300) -> dict:
    """Run @tensorflow-models/hand-pose-detection (runtime 'tfjs', WASM) in Node on the
    converted files of ``model_dir``; returns {photo: {"hands": [...], "ms"}, "constants": {...}}."""
    node = shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@tensorflow-models" / "hand-pose-detection").is_dir():
        raise ConverterError("node or the hand-pose-detection package is missing", "run `npm ci` in the project root")
    out = {}
    with tempfile.TemporaryDirectory(prefix="handpose-e2e-") as tmp:
        for name, image in images.items():
            raw = Path(tmp) / f"{name}.rgb"
            raw.write_bytes(np.ascontiguousarray(image, dtype=np.uint8).tobytes())
            request = {"model_dir": str(Path(model_dir).resolve()), "model_type": variant, "backend": "wasm",
                       "detector": f"tfjs/detector_{variant}/model.json",
                       "landmark": f"tfjs/landmark_{variant}/model.json",
                       "image": {"file": str(raw), "width": int(image.shape[1]), "height": int(image.shape[0])},
                       "out": str(Path(tmp) / f"{name}.json")}
            (Path(tmp) / "request.json").write_text(json.dumps(request))
            proc = subprocess.run([node, str(CHECK_SCRIPT), str(Path(tmp) / "request.json")], cwd=ROOT,
                                  capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"hand-pose-detection failed on {name}:\n{proc.stderr[-4000:]}")
            result = json.loads(Path(request["out"]).read_text())
            out["constants"] = result.pop("constants")
            out[name] = result
    return out


def mediapipe_hands(image: np.ndarray, variant: str) -> list[dict]:
    """MediaPipe's own Python solution (static image mode) on ``image``: the reference the
    library run is compared with. model_complexity 1 = full models, 0 = lite."""
    import mediapipe as mp

    h, w = image.shape[:2]
    with mp.solutions.hands.Hands(static_image_mode=True, max_num_hands=2,
                                  model_complexity=1 if variant == "full" else 0) as hands:
        result = hands.process(np.ascontiguousarray(image))
    out = []
    for landmarks, handedness in zip(result.multi_hand_landmarks or [], result.multi_handedness or []):
        out.append({"handedness": handedness.classification[0].label,
                    "score": float(handedness.classification[0].score),
                    "keypoints": [[p.x * w, p.y * h] for p in landmarks.landmark]})
    return out


def compare_hands(reference: list[dict], candidate: list[dict]) -> dict:
    """Pair each reference hand with the closest candidate hand; mean/max keypoint distance in px."""
    pairs = []
    for ref in reference:
        best = None
        for cand in candidate:
            d = np.linalg.norm(np.asarray(ref["keypoints"]) - np.asarray(cand["keypoints"]), axis=1)
            if best is None or d.mean() < best[0].mean():
                best = (d, cand)
        if best is not None:
            pairs.append({"mean_px": float(best[0].mean()), "max_px": float(best[0].max()),
                          "handedness": best[1]["handedness"], "reference_handedness": ref["handedness"]})
    return {"reference_hands": len(reference), "hands": len(candidate), "pairs": pairs}


def end_to_end_photos() -> dict[str, np.ndarray]:
    """Photos for the library check: the shared hand fixtures when present, else zidane.jpg."""
    from PIL import Image

    shared = Path(os.environ.get("DATARAILROAD_SHARED", ROOT.parent / "shared")) / "fixtures" / "hands"
    photos = {}
    for name in ("up_1.jpg", "up_3.jpg"):
        if (shared / name).is_file():
            with Image.open(shared / name) as im:
                photos[name] = np.asarray(im.convert("RGB"))
    return photos or {"zidane.jpg": load_photo("zidane.jpg")}


def library_vs_mediapipe(model_dir: Path, variant: str) -> dict:
    photos = end_to_end_photos()
    started = time.perf_counter()
    library = run_library(model_dir, variant, photos)
    report = {"backend": "/".join(sorted({library[name]["backend"] for name in photos})),  # as the runs report it
              "reference": f"mediapipe {_version('mediapipe')} solutions.hands "
              f"(static_image_mode, model_complexity={1 if variant == 'full' else 0})",
              "tolerance_mean_px": KEYPOINT_TOLERANCE_PX, "photos": {}}
    for name, image in photos.items():
        ref = mediapipe_hands(image, variant)
        report["photos"][name] = {**compare_hands(ref, library[name]["hands"]), "ms": round(library[name]["ms"], 1)}
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report
