"""MediaPipe Hands (palm detector + hand landmarks, full and lite) -> TF.js graph models
that @tensorflow-models/hand-pose-detection 2.0.1 (runtime 'tfjs') loads through its
``detectorModelUrl`` / ``landmarkModelUrl`` options.

Source: the four .tflite files shipped in the mediapipe 0.10.21 wheel, read out of the wheel
fetched as a file where mediapipe is not installed (``wheel``), or a folder holding them.
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

Modules: ``palm`` (the detector's constants and decode), ``landmarks`` (the landmark model's
input crop and outputs), ``graphs`` (the .tflite files -> TF.js graphs, checked), ``library``
(the end-to-end check against MediaPipe); this one holds the family's stages.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modelcontract import manifest as manifest_io
from .. import parity, sources, stages
from ..errors import ConverterError
from ..sources import Source
from . import wheel
from .graphs import (TFLITE_FILES, TFLITE_ROLES, check_io, check_model_json, library_outputs, same_names,
                     tflite_reference, tfjs_path, tfjs_roles)
from .landmarks import (KEYPOINT_NAMES, LANDMARK_INPUT, LANDMARK_KEYS, LANDMARK_OUTPUTS, TFJS_LANDMARK_ROLES,
                        hand_crop, parity_landmark)
from .library import hand_photo, library_vs_mediapipe, npm_version, version
from .palm import ANCHORS, DECODE, DETECTOR_INPUT, DETECTOR_OUTPUTS, PIPELINE, best_palm, parity_detector

NAME = "handpose"
TASK = "handpose"
SUMMARY = "MediaPipe Hands palm detector + 21-keypoint landmarks (full & lite), for hand-pose-detection 'tfjs'"

VARIANTS = ("full", "lite")
LABELS = ["Left", "Right"]
LICENCE = sources.licence("Apache-2.0", "https://github.com/google-ai-edge/mediapipe/blob/master/LICENSE")


# ---------------------------------------------------------------------------- source

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
    """Default: the mediapipe 0.10.21 wheel's files. A path: a folder with the four .tflite files."""
    if weights == "none":
        raise ConverterError("random weights are not meaningful for handpose: the graphs are rebuilt from "
                             "the trained .tflite files themselves",
                             "omit --weights (uses the mediapipe wheel's models) or pass --weights FOLDER "
                             "holding " + ", ".join(TFLITE_FILES.values()))
    if weights is None:
        # An installed mediapipe 0.10.21's files, else the ones read out of its wheel fetched as
        # a file (no cp313 wheel to install); sha256-checked either way (wheel.py).
        files, digests, _ = wheel.default_files(sources.CACHE)
        folder = Path(os.path.commonpath([str(p.parent) for p in files.values()]))
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
        digests = {key: manifest_io.sha256_file(path) for key, path in files.items()}
    # One sha256 over the four files' digests: changes when any model changes.
    combined = hashlib.sha256("".join(f"{k}:{digests[k]}\n" for k in sorted(digests)).encode()).hexdigest()
    extra = {"files": {key: {"path": str(files[key]), "sha256": digests[key]} for key in files}}
    if kind == "mediapipe-wheel":
        extra["mediapipe"] = wheel.MEDIAPIPE_VERSION
    return Source(kind=kind, path=folder.resolve(), sha256=combined, extra=extra, licence=licence)


# ---------------------------------------------------------------------------- stages

@dataclass
class Loaded(stages.Loaded):
    graphs: dict       # key -> the original .tflite as a TFLiteGraph, its I/O checked


@dataclass
class Exported(stages.Exported):
    sizes: dict        # key -> bytes of its TF.js files


@dataclass
class Verified(stages.Verified):
    photo: str         # the hand photo parity ran on
    checked: dict      # key -> stages.Checked: TF.js and the installed .tflite against the original
    palms: dict        # variant -> the best palm's score on the photo
    same_files: bool   # the installed .tflite files are the source's, byte for byte
    end_to_end: dict   # variant -> the library against MediaPipe's own solution
    answer: dict       # the manifest's answer_check


def build(ctx) -> dict:
    return stages.run(ctx, load, export, verify, describe)


def source_files(source: Source) -> dict[str, Path]:
    return {key: Path(info["path"]) for key, info in source.extra["files"].items()}


def load(ctx) -> Loaded:
    """The four .tflite graphs, their I/O checked; the files themselves are the server's."""
    from ..tflite_to_tf import TFLiteGraph

    files = source_files(ctx.source)
    graphs = {key: TFLiteGraph(path) for key, path in files.items()}
    for key, graph in graphs.items():
        check_io(key, graph)
    (ctx.workdir / "tflite").mkdir()
    for key, path in files.items():
        shutil.copy2(path, ctx.workdir / "tflite" / TFLITE_FILES[key])
    return Loaded(graphs=graphs)


def export(ctx, loaded: Loaded) -> Exported:
    """Each graph -> TF function -> SavedModel -> tfjs/<key>/, with its TF.js bytes."""
    from .. import tfjs
    from ..tflite_to_tf import to_saved_model

    sizes = {}
    with tempfile.TemporaryDirectory(prefix="handpose-sm-") as tmp:
        for key, graph in loaded.graphs.items():
            saved = to_saved_model(graph, Path(tmp) / key, library_outputs(key))
            out_dir = ctx.workdir / "tfjs" / key
            check_model_json(key, tfjs.convert_saved_model(saved, out_dir, ctx.quantize))
            sizes[key] = sum(p.stat().st_size for p in out_dir.iterdir())
            ctx.log(f"{key}: {sizes[key] / 1e6:.2f} MB")
    return Exported(sizes=sizes)


def _check_model(ctx, key: str, x: np.ndarray, reference: dict, tfjs_parity) -> stages.Checked:
    """One model: its TF.js graph and the installed .tflite against the original .tflite."""
    def compare(tfjs_out: dict, litert_out: dict) -> stages.Comparison:
        server = same_names(reference, litert_out)
        return stages.Comparison(tfjs=tfjs_parity(reference, tfjs_out), server=server,
                                 server_ok=server["relative"] <= parity.TARGETS["none"])

    return stages.check(ctx, tfjs_model=tfjs_path(key), tflite_model=f"tflite/{TFLITE_FILES[key]}",
                        inputs={"input_1": x}, litert_inputs=[x], compare=compare, label=key)


def verify(ctx, loaded: Loaded, exported: Exported) -> Verified:
    """Each TF.js graph and each installed .tflite against the original .tflite (LiteRT) on a
    real hand photo, then the whole library in Node against MediaPipe's own Python solution."""
    from modelcontract.geometry import prepare

    files = source_files(ctx.source)
    photo, image = hand_photo()
    x, transform = prepare(image, DETECTOR_INPUT)
    checked, palms, crop = {}, {}, None
    for variant in VARIANTS:  # full first: its palm gives the hand crop both landmark models see
        det, lm = f"detector_{variant}", f"landmark_{variant}"
        ref = tflite_reference(files[det], x)
        checked[det] = _check_model(ctx, det, x, ref, lambda r, out: parity_detector(r, out["Identity"]))
        palm = best_palm(np.concatenate([ref["Identity_1"], ref["Identity"]], axis=-1))
        palms[variant] = palm["score"]
        if crop is None:
            crop = hand_crop(image, palm, transform)
        ref_lm = tflite_reference(files[lm], crop)
        checked[lm] = _check_model(ctx, lm, crop, ref_lm, parity_landmark)
        checked[lm].tfjs["hand_flag"] = float(ref_lm["Identity_1"].ravel()[0])
    end_to_end = {}
    for variant in VARIANTS:
        end_to_end[variant] = library_vs_mediapipe(ctx.workdir, variant)
        ctx.log(f"{variant} end to end: {json.dumps(end_to_end[variant].get('photos'))[:300]}")
        if "skipped" in end_to_end[variant]:
            ctx.log(f"{variant} end to end: {end_to_end[variant]['skipped']}")
    same_files = all(manifest_io.sha256_file(ctx.workdir / "tflite" / TFLITE_FILES[key]) ==
                     ctx.source.extra["files"][key]["sha256"] for key in files)
    return Verified(photo=photo, checked=checked, palms=palms, same_files=same_files, end_to_end=end_to_end,
                    answer=answer_record(ctx, files))


def answer_record(ctx, files: dict) -> dict:
    """The manifest's answer_check: each original .tflite on the pattern at its input size."""
    from modelcontract import answers

    parts = {}
    for key in TFLITE_FILES:
        kind = key.split("_")[0]
        x = answers.part_input(DETECTOR_INPUT if kind == "detector" else LANDMARK_INPUT)
        ref = tflite_reference(files[key], x)
        parts[key] = stages.AnswerPart(
            reference={role: ref[name] for role, name in TFLITE_ROLES[kind].items()}, tfjs_model=tfjs_path(key),
            inputs={"input_1": x}, tfjs_outputs=["Identity"] if kind == "detector" else list(TFJS_LANDMARK_ROLES.values()),
            roles=functools.partial(tfjs_roles, kind))
    return stages.answer_check(ctx, parts, f"LiteRT {version('ai-edge-litert')} (the original .tflite files)")


_MODEL_INPUTS = {"detector": "letterboxed 192x192 of the photo",
                 "landmark": "224x224 hand crop around detector_full's best palm"}


def parity_record(verified: Verified) -> dict:
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
        "reference": {"runtime": "litert", "version": version("ai-edge-litert"),
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


def describe(ctx, loaded: Loaded, exported: Exported, verified: Verified) -> dict:
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
            "package": "@tensorflow-models/hand-pose-detection", "version": npm_version(),
            "usage": "createDetector(SupportedModels.MediaPipeHands, {runtime: 'tfjs', modelType: 'full'|'lite', "
                     "detectorModelUrl: <model folder>/tfjs/detector_<type>/model.json, "
                     "landmarkModelUrl: <model folder>/tfjs/landmark_<type>/model.json})",
        },
        "tfjs": {key: tfjs_path(key) for key in exported.sizes},
        "tfjs_bytes": exported.sizes,
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
