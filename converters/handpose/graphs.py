"""The four MediaPipe .tflite files as graphs: their I/O checked, rebuilt as TF functions
whose signature keys number the TF.js outputs as the library asks, the produced model.json
checked, and the original files run in LiteRT (the reference)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import parity
from ..errors import ConverterError
from .landmarks import LANDMARK_KEYS, LANDMARK_OUTPUTS, TFJS_LANDMARK_ROLES
from .palm import DETECTOR_OUTPUTS

TFLITE_FILES = {
    "detector_full": "palm_detection_full.tflite",
    "detector_lite": "palm_detection_lite.tflite",
    "landmark_full": "hand_landmark_full.tflite",
    "landmark_lite": "hand_landmark_lite.tflite",
}

# The pipeline's roles of each model's outputs: the original .tflite's names, and the TF.js
# graph's (its detector joins the logit and the 18 box values per anchor, as splitDetections
# in contract/hands.js takes them apart).
TFLITE_ROLES = {"detector": {"logits": "Identity_1", "boxes": "Identity"}, "landmark": LANDMARK_KEYS}


def tfjs_roles(kind: str, out: dict) -> dict:
    """A TF.js graph's outputs by role (the detector's joined tensor taken apart)."""
    if kind == "detector":
        joined = out["Identity"]
        return {"logits": joined[..., :1], "boxes": joined[..., 1:]}
    return {role: out[name] for role, name in TFJS_LANDMARK_ROLES.items()}


def tflite_reference(path: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    """One original .tflite's outputs on ``x``, by name."""
    from ..tflite import interpreter

    interp = interpreter(path)
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return {d["name"]: np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()}


def check_io(key: str, graph) -> None:
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


def library_outputs(key: str):
    """tflite outputs {name: tensor} -> the signature dict whose sorted keys number correctly."""
    import tensorflow as tf

    if key.startswith("detector"):
        return lambda o: {"detections": tf.concat([o["Identity_1"], o["Identity"]], axis=-1)}
    return lambda o: {k: o[v] for k, v in LANDMARK_KEYS.items()}


def check_model_json(key: str, model_json: dict) -> None:
    """The produced graph must expose exactly the names/shapes the library asks for."""
    from ..tfjs import graph_signature

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


def tfjs_path(key: str) -> str:
    return f"tfjs/{key}/model.json"


def same_names(ref: dict, got: dict) -> dict:
    """Every output of the installed .tflite against the original's, by name."""
    parts = {name: parity.compare(ref[name], got[name]) for name in ref}
    worst = max(parts.values(), key=lambda p: p["relative"])
    return {"max_abs": worst["max_abs"], "relative": worst["relative"], "outputs": parts}
