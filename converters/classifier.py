"""What the two ImageNet classifier families (efficientnetv2-b0, efficientnet-lite0) share:
the bus.jpg input, the SavedModel -> TF.js + .tflite export, the verify stage (probabilities
and the logits feeding the graph's Softmax, TF.js and LiteRT against the source framework)
and the manifest fields.

A family's ``load`` returns a ``Loaded`` (subclassed with its own fields), its ``export``
an ``Exported`` holding ``export_graph``'s model.json; ``verify`` here takes both and
returns the ``Verified`` that ``describe`` turns into manifest fields.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import parity, sources, stages, tfjs, tflite

PHOTO = "bus.jpg"
FEATURES = 1280   # the pooled head of both EfficientNet families


@dataclass
class Loaded(stages.Loaded):
    x: np.ndarray          # the preprocessed photo
    reference: dict        # the source's {"probabilities", "logits"} on x, and "features" where the graph has them
    answer_x: np.ndarray   # the answer-check pattern as input (modelcontract.answers)
    answer: object         # the source's probabilities on it, or {"probabilities", "features"}
    reference_info: dict   # the source framework: runtime and version


@dataclass
class Exported(stages.Exported):
    model_json: dict       # the TF.js model.json export_graph wrote


@dataclass
class Verified(stages.Verified):
    signature: dict        # the graph's input, output and features tensor names
    speed: dict            # the manifest's speed
    answer_check: dict     # the manifest's answer_check
    parity: dict           # the manifest's parity


def prepare_photo(input_spec: dict, photo: str = PHOTO):
    from modelcontract.geometry import prepare

    return prepare(sources.load_photo(photo), input_spec)


def export_saved_model(forward, variables, path: Path, input_spec: dict) -> Path:
    """SavedModel with one ``serving_default`` signature: input -> {"probabilities"} (and
    "features" when ``forward`` returns both, as a dict).

    Only the variables are attached to the saved object (not a Keras model), so saving
    does not trace every Keras layer; the function captures them by reference.
    """
    import tensorflow as tf

    root = tf.Module()
    root.weights = list(variables)

    @tf.function(input_signature=[tf.TensorSpec(input_spec["shape"], tf.float32, name=input_spec["name"])])
    def serve(x):
        out = forward(x)
        return out if isinstance(out, dict) else {"probabilities": out}

    tf.saved_model.save(root, str(path), signatures={"serving_default": serve})
    return path


def export_graph(ctx, forward, variables, input_spec: dict) -> Exported:
    """forward(x) -> probabilities (or {probabilities, features}), as tfjs/ (at the build's quantisation) and an fp32
    model.tflite in the work folder, with the TF.js model.json."""
    with tempfile.TemporaryDirectory(prefix=f"{ctx.name}-") as tmp:
        saved_model = export_saved_model(forward, variables, Path(tmp) / "saved_model", input_spec)
        model_json = tfjs.convert_saved_model(saved_model, ctx.workdir / "tfjs", ctx.quantize)
        tflite.saved_model_to_tflite(saved_model, ctx.workdir / "model.tflite")
    return Exported(model_json=model_json)


def softmax_input(model_json: dict) -> str:
    """Name of the node feeding the graph's Softmax: the logits, as the TF.js runtime computes them."""
    nodes = model_json["modelTopology"]["node"]
    softmax = [n for n in nodes if n.get("op") == "Softmax"]
    if len(softmax) != 1:
        raise RuntimeError(f"expected one Softmax node in the TF.js graph, found {len(softmax)}")
    return softmax[0]["input"][0].split(":")[0]


def top_k(probabilities: np.ndarray, labels: list[str], k: int = 5) -> list[dict]:
    from modelcontract.scores import top_k as indices

    p = np.asarray(probabilities).reshape(-1)
    return [{"class_id": int(i), "label": labels[i], "probability": round(float(p[i]), 6)} for i in indices(p, k)]


def verify(ctx, loaded: Loaded, exported: Exported) -> Verified:
    """Probabilities and logits of the TF.js graph (WASM) and probabilities of the .tflite
    against the source framework on bus.jpg. fp32 / float16: max|a-b|/max|a| within the
    target on both; uint8: figures recorded, top-1 must equal the reference's. The .tflite
    stays fp32 whatever --quantize says, so it is held to the fp32 target."""
    labels = sources.imagenet_names()
    model_json = exported.model_json
    signature = tfjs.graph_signature(model_json)
    input_name = signature["inputs"][0]["name"]
    by_key = {o["key"]: o["name"] for o in signature["outputs"]}
    output_name = by_key["probabilities"]
    features_name = by_key.get("features")   # the second output, where the family has one
    logits_node = softmax_input(model_json)
    ref_p, ref_l = loaded.reference["probabilities"], loaded.reference["logits"]
    ref_top = top_k(ref_p, labels)
    fetched = [output_name, logits_node] + ([features_name] if features_name else [])

    def compare(tfjs_out: dict, litert_out: dict) -> stages.Comparison:
        got_p = tfjs_out[output_name]
        tfjs_top = top_k(got_p, labels)
        probabilities = _rounded(parity.compare(ref_p, got_p))
        logits = _rounded(parity.compare(ref_l, tfjs_out[logits_node]))
        server = _rounded(parity.compare(ref_p, litert_out["probabilities"]))
        tfjs = {"compared": "probabilities", **probabilities, "logits": {"node": logits_node, **logits},
                "top5": tfjs_top}
        gated = [probabilities["relative"], logits["relative"]]
        server_gated = [server["relative"]]
        if features_name:
            ref_f = loaded.reference["features"]
            tfjs["features"] = {"node": features_name, **_rounded(parity.compare(ref_f, tfjs_out[features_name]))}
            server["features"] = _rounded(parity.compare(ref_f, litert_out["features"]))
            gated.append(tfjs["features"]["relative"])
            server_gated.append(server["features"]["relative"])
        return stages.Comparison(
            tfjs=tfjs, server={"compared": "probabilities", **server, "target_relative": parity.TARGETS["none"]},
            tfjs_ok=ctx.quantize != "uint8" or tfjs_top[0]["class_id"] == ref_top[0]["class_id"],
            server_ok=max(server_gated) <= parity.TARGETS["none"], gated=max(gated))

    checked = stages.check(ctx, tfjs_model="tfjs/model.json", tflite_model="model.tflite",
                           inputs={input_name: loaded.x}, tfjs_outputs=fetched,
                           litert_inputs={"input": loaded.x}, compare=compare)
    also = " and on features" if features_name else ""
    criterion = ("no numeric target for uint8 (figures recorded); top-1 equals the reference's"
                 if checked.target is None else
                 f"max|a-b|/max|a| <= target on probabilities, on logits{also} (server: fp32 target)")
    if features_name:   # roles by key, as the manifest's tensors name them
        part = stages.AnswerPart(
            reference=dict(loaded.answer), tfjs_model="tfjs/model.json", inputs={input_name: loaded.answer_x},
            tfjs_outputs=[output_name, features_name],
            roles=lambda out: {"probabilities": out[output_name], "features": out[features_name]})
    else:
        part = stages.AnswerPart(
            reference={output_name: loaded.answer}, tfjs_model="tfjs/model.json",
            inputs={input_name: loaded.answer_x}, tfjs_outputs=[output_name],
            roles=lambda out: {output_name: out[output_name]})
    answer = stages.answer_check(ctx, {"model": part}, " ".join(str(v) for v in loaded.reference_info.values()))
    return Verified(
        signature={"input": input_name, "output": output_name, "features": features_name},
        speed=checked.speed,
        answer_check=answer,
        parity={
            "photo": PHOTO,
            "reference": {**loaded.reference_info, "top5": ref_top},
            "tfjs": checked.tfjs,
            "server": checked.server,
            "target_relative": checked.target,
            "criterion": criterion,
            "passed": checked.passed,
        },
    )


def _rounded(figures: dict) -> dict:
    return {k: float(f"{v:.4g}") for k, v in figures.items()}


def describe(title: str, input_spec: dict, verified: Verified, extra: dict) -> dict:
    """The manifest fields both EfficientNet families return."""
    labels = sources.imagenet_names()
    signature = verified.signature
    tensors = [{"name": signature["output"], "shape": [1, len(labels)],
                "meaning": "softmax probabilities over the ImageNet-1k classes (index = labels[i])"}]
    server = {"runtime": "litert", "model": "model.tflite", "signature": "serving_default",
              "input": "input", "output": "probabilities", "precision": "float32"}
    if signature["features"]:
        # Two outputs: each named by its .tflite signature key too (LiteRT.js reads them by key).
        tensors[0]["key"] = "probabilities"
        tensors.append({"name": signature["features"], "key": "features", "shape": [1, FEATURES],
                        "meaning": "the pooled head (global average pool before the classifier layer): "
                                   "an image's feature vector, which the classify page's Teach mode compares"})
        server["features"] = "features"
    return {
        "title": title,
        "input": {**input_spec, "name": signature["input"]},
        "outputs": {"format": "probabilities", "tensors": tensors},
        "labels": labels,
        "tfjs": {"model": "tfjs/model.json"},
        "server": server,
        "parity": verified.parity,
        "speed": verified.speed,
        "answer_check": verified.answer_check,
        **extra,
    }
