"""EfficientNetV2-B0 (Keras Applications, ImageNet-1k) -> TF.js graph model + LiteRT artifact.

Built with ``tf_keras`` (Keras 2), imported directly: with Keras 3 the TF.js converter folds
the residual adds into fused convolutions with a rank-4 bias, which the WASM backend rejects
(``FusedConv2D only supports rank-1 bias``). Importing ``tf_keras`` instead of setting
``TF_USE_LEGACY_KERAS=1`` leaves ``tf.keras`` (Keras 3) untouched for everything else that
runs in the same process (``python -m converters all``, one pytest session).

Input contract: Keras' EfficientNetV2-B* models carry their own preprocessing layers
(Rescaling 1/255, then Normalization with the ImageNet mean/std), so the graph takes RGB
pixel values 0..255 as they are: scale 1, mean 0, std 1, range [0, 255].
Resize: ``stretch`` to 224x224 (plain resize of the whole frame, as the Keras reference and
the upstream EfficientNetV2 evaluation at 224 do; training used random crops with aspect
distortion, so a moderate stretch stays within what the model has seen). Nothing is cut
off, which matters for camera frames.

Weights: ``efficientnetv2-b0.h5`` (with the 1000-class top) from the Keras Applications
bucket, fetched once into the cache when online; ``--weights file.h5|.keras`` offline;
``--weights none`` = the Keras initialisers with a fixed seed (reproducible builds). Random
weights give a near-uniform softmax (~1e-3 everywhere), so parity is measured on the logits
(the Softmax input, read from the very TF.js graph that ships) as well as on the probabilities.

The helpers at the bottom (SavedModel export, parity, manifest fields) are shared with
``converters.efficientnet_lite``.
"""
from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np

from . import parity, sources, tfjs, tflite
from .errors import ConverterError
from .manifest import sha256_file

NAME = "efficientnetv2-b0"
TASK = "classify"
SUMMARY = "EfficientNetV2-B0 ImageNet-1k classifier (Keras Applications), 224x224, top-5 probabilities"

WEIGHTS_FILE = "efficientnetv2-b0.h5"
WEIGHTS_URL = "https://storage.googleapis.com/tensorflow/keras-applications/efficientnet_v2/" + WEIGHTS_FILE
WEIGHTS_MD5 = "21ecbf6da12460d5c40bb2f29ceb2188"  # Keras' own check for this file (with top)
RANDOM_SEED = 0
SIZE = 224

INPUT = {
    "name": "input", "shape": [1, SIZE, SIZE, 3], "layout": "NHWC", "dtype": "float32", "color": "RGB",
    "resize": "stretch", "scale": 1.0, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "range": [0, 255],
}

WEIGHTS_FIX = (f"download {WEIGHTS_URL} elsewhere and pass --weights /path/to/{WEIGHTS_FILE} "
               "(Keras .h5 or .keras weights of EfficientNetV2-B0 with the 1000-class top), "
               "or --weights none for random weights")


# ---------------------------------------------------------------------------- source

def resolve_source(weights: str | None) -> sources.Source:
    if weights == "none":
        return sources.Source(kind="random", sha256=f"random-seed{RANDOM_SEED}",
                              extra={"init": f"tf_keras default initialisers, seed {RANDOM_SEED}"})
    if weights:
        source = sources.local_weights(weights, "Keras weights", (".h5", ".keras"))
        _check_keras_file(source.path)
        return source
    # Keras' own download cache first: a machine that ever ran Keras online has the file.
    for cached in (Path.home() / ".keras" / "models" / WEIGHTS_FILE, sources.CACHE / WEIGHTS_FILE):
        if cached.is_file():
            source = sources.Source(kind="Keras weights", path=cached, url=WEIGHTS_URL,
                                    sha256=sha256_file(cached))
            break
    else:
        try:
            source = sources.download(WEIGHTS_URL, WEIGHTS_FILE, "Keras weights", timeout=30)
        except ConverterError as exc:
            raise ConverterError(exc.message, WEIGHTS_FIX) from None
    if _md5(source.path) != WEIGHTS_MD5:
        raise ConverterError(f"{source.path} is not the published {WEIGHTS_FILE} (MD5 differs)",
                             f"delete it and retry online, or {WEIGHTS_FIX}")
    return source


def _check_keras_file(path: Path) -> None:
    """Cheap structural check before any TF import: HDF5 with EfficientNetV2 layers, or a .keras zip."""
    expected = ("expected Keras EfficientNetV2-B0 weights with the 1000-class top "
                f"(e.g. {WEIGHTS_FILE} from Keras Applications, or a model saved as .keras)")
    if path.suffix.lower() == ".keras":
        import zipfile

        if not zipfile.is_zipfile(path):
            raise ConverterError(f"{path.name} is not a .keras archive; {expected}", f"pass {WEIGHTS_FILE}")
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
        if "config.json" not in names or not any(n.endswith(".h5") for n in names):
            raise ConverterError(f"{path.name} holds no Keras model config and weights; {expected}",
                                 f"pass {WEIGHTS_FILE}")
        return
    import h5py

    try:
        with h5py.File(path, "r") as f:
            if "layers" in f and "vars" in f:
                return  # Keras 3 .weights.h5: keyed by object path, so the load step checks the fit
            # Keras 2 weights file, or a Keras 2 full model (weights under "model_weights").
            group = f["model_weights"] if "model_weights" in f else f
            layers = {n.decode() if isinstance(n, bytes) else n for n in group.attrs.get("layer_names", [])}
    except OSError:
        raise ConverterError(f"{path.name} is not an HDF5 file; {expected}", f"pass {WEIGHTS_FILE}") from None
    if not {"stem_conv", "top_conv", "predictions"} <= layers:
        raise ConverterError(f"{path.name} has no EfficientNetV2 stem/top/predictions layers; {expected}",
                             f"pass {WEIGHTS_FILE}")


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------------------- build

def _keras_model(source: sources.Source):
    """(probabilities model, logits model) sharing one set of tf_keras layers."""
    import tf_keras

    if source.path is None:
        tf_keras.utils.set_random_seed(RANDOM_SEED)
    # classifier_activation=None keeps the logits reachable; the softmax is its own layer.
    base = tf_keras.applications.EfficientNetV2B0(
        include_top=True, weights=None, input_shape=(SIZE, SIZE, 3), classifier_activation=None)
    if source.path is not None:
        try:
            base.load_weights(str(source.path))
        except Exception as exc:  # h5py/Keras raise many types for a mismatching file
            raise ConverterError(
                f"{source.path.name} does not fit EfficientNetV2-B0 with the 1000-class top "
                f"({exc.__class__.__name__}: {str(exc).splitlines()[0][:200]})", WEIGHTS_FIX) from None
    probabilities = tf_keras.layers.Softmax(name="probabilities")(base.output)
    return tf_keras.Model(base.input, probabilities, name=NAME), base


def build(ctx) -> dict:
    import tensorflow as tf
    import tf_keras

    with ctx.step("load"):
        model, logits_model = _keras_model(ctx.source)
        ctx.log(f"{model.count_params():,} parameters")
    with ctx.step("reference"):
        x, _ = prepare_photo(INPUT)
        reference = {"probabilities": model(x, training=False).numpy(),
                     "logits": logits_model(x, training=False).numpy()}
    with tempfile.TemporaryDirectory(prefix="effv2-") as tmp:
        saved_model = Path(tmp) / "saved_model"
        with ctx.step("savedmodel"):
            export_saved_model(lambda t: model(t, training=False), model.variables, saved_model, INPUT)
        with ctx.step("tfjs"):
            model_json = tfjs.convert_saved_model(saved_model, ctx.workdir / "tfjs", ctx.quantize)
        with ctx.step("tflite"):
            tflite.saved_model_to_tflite(saved_model, ctx.workdir / "model.tflite")
    with ctx.step("verify"):
        checked = verify_classifier(ctx, model_json, x, reference,
                                    {"runtime": "tf_keras", "version": tf_keras.__version__,
                                     "tensorflow": tf.__version__})
    return classifier_fields(
        title="EfficientNetV2-B0 (ImageNet-1k)" + (" - random weights" if ctx.source.path is None else ""),
        input_spec=INPUT, checked=checked,
        extra={"architecture": {"family": "EfficientNetV2", "variant": "B0", "built_with": "tf_keras",
                                "preprocessing_in_graph": "Rescaling(1/255) + Normalization(ImageNet mean/std)"},
               "preprocessing": {"resize": "stretch to 224x224 (bilinear, half-pixel centres)",
                                 "why": "the graph normalises internally and expects RGB 0..255; "
                                        "Keras reference evaluation resizes the whole image to 224"}})


# ------------------------------------------------- shared with efficientnet_lite

def prepare_photo(input_spec: dict, photo: str = "bus.jpg"):
    from modelcontract.geometry import prepare

    return prepare(sources.load_photo(photo), input_spec)


def export_saved_model(forward, variables, path: Path, input_spec: dict) -> Path:
    """SavedModel with one ``serving_default`` signature: input -> {"probabilities"}.

    Only the variables are attached to the saved object (not a Keras model), so saving
    does not trace every Keras layer; the function captures them by reference.
    """
    import tensorflow as tf

    root = tf.Module()
    root.weights = list(variables)

    @tf.function(input_signature=[tf.TensorSpec(input_spec["shape"], tf.float32, name=input_spec["name"])])
    def serve(x):
        return {"probabilities": forward(x)}

    tf.saved_model.save(root, str(path), signatures={"serving_default": serve})
    return path


def softmax_input(model_json: dict) -> str:
    """Name of the node feeding the graph's Softmax: the logits, as the TF.js runtime computes them."""
    nodes = model_json["modelTopology"]["node"]
    softmax = [n for n in nodes if n.get("op") == "Softmax"]
    if len(softmax) != 1:
        raise RuntimeError(f"expected one Softmax node in the TF.js graph, found {len(softmax)}")
    return softmax[0]["input"][0].split(":")[0]


def top_k(probabilities: np.ndarray, labels: list[str], k: int = 5) -> list[dict]:
    p = np.asarray(probabilities).reshape(-1)
    order = np.argsort(-p, kind="stable")[:k]
    return [{"class_id": int(i), "label": labels[i], "probability": round(float(p[i]), 6)} for i in order]


def verify_classifier(ctx, model_json: dict, x: np.ndarray, reference: dict, reference_info: dict,
                      labels: list[str] | None = None) -> dict:
    """Run the produced TF.js files (WASM) and the .tflite on ``x``; compare with the reference.

    ``reference``: {"probabilities": [1,1000], "logits": [1,1000]} from the source framework.
    Returns {"signature", "parity"}; raises ConverterError when a target is missed.
    """
    labels = labels or sources.imagenet_names()
    signature = tfjs.graph_signature(model_json)
    input_name = signature["inputs"][0]["name"]
    output_name = signature["outputs"][0]["name"]
    logits_node = softmax_input(model_json)
    run = parity.run_tfjs(ctx.workdir / "tfjs" / "model.json", {input_name: x},
                          outputs=[output_name, logits_node], backend="wasm")
    got_p, got_l = run["outputs"][output_name], run["outputs"][logits_node]
    ref_p, ref_l = reference["probabilities"], reference["logits"]
    tfjs_p, tfjs_l = parity.compare(ref_p, got_p), parity.compare(ref_l, got_l)
    server = tflite.run_tflite(ctx.workdir / "model.tflite", {"input": x})["probabilities"]
    server_p = parity.compare(ref_p, server)

    target = parity.TARGETS[ctx.quantize]
    server_target = parity.TARGETS["none"]  # the .tflite stays fp32 whatever --quantize says
    ref_top, tfjs_top = top_k(ref_p, labels), top_k(got_p, labels)
    top1_agrees = ref_top[0]["class_id"] == tfjs_top[0]["class_id"]
    if target is None:
        passed = top1_agrees and server_p["relative"] <= server_target
        criterion = "no numeric target for uint8 (figures recorded); top-1 equals the reference's"
    else:
        passed = (tfjs_p["relative"] <= target and tfjs_l["relative"] <= target
                  and server_p["relative"] <= server_target)
        criterion = "max|a-b|/max|a| <= target on probabilities and on logits (server: fp32 target)"
    ctx.log(f"TF.js {run['backend']} vs {reference_info['runtime']}: probabilities rel {tfjs_p['relative']:.2e}, "
            f"logits rel {tfjs_l['relative']:.2e}; LiteRT rel {server_p['relative']:.2e}; "
            f"top-1 {tfjs_top[0]['label']} {tfjs_top[0]['probability']:.3f}")
    result = {
        "photo": "bus.jpg",
        "reference": {**reference_info, "top5": ref_top},
        "tfjs": {"backend": run["backend"], "version": run["version"], "ms": round(run["ms"], 1),
                 "compared": "probabilities", **_rounded(tfjs_p),
                 "logits": {"node": logits_node, **_rounded(tfjs_l)}, "top5": tfjs_top},
        "server": {"runtime": "litert", "compared": "probabilities", **_rounded(server_p),
                   "target_relative": server_target},
        "target_relative": target,
        "criterion": criterion,
        "passed": bool(passed),
    }
    if target is not None and not passed:
        raise ConverterError(
            f"parity check failed on bus.jpg: TF.js probabilities rel {tfjs_p['relative']:.2e}, logits rel "
            f"{tfjs_l['relative']:.2e}, LiteRT rel {server_p['relative']:.2e} (target {target:g})",
            "the converted model disagrees with its source and was not installed; report this with the log")
    return {"signature": {"input": input_name, "output": output_name}, "parity": result}


def _rounded(figures: dict) -> dict:
    return {k: float(f"{v:.4g}") for k, v in figures.items()}


def classifier_fields(title: str, input_spec: dict, checked: dict, extra: dict) -> dict:
    """The manifest fields both EfficientNet families return."""
    labels = sources.imagenet_names()
    return {
        "title": title,
        "input": {**input_spec, "name": checked["signature"]["input"]},
        "outputs": {"format": "probabilities", "tensors": [{
            "name": checked["signature"]["output"], "shape": [1, len(labels)],
            "meaning": "softmax probabilities over the ImageNet-1k classes (index = labels[i])"}]},
        "labels": labels,
        "tfjs": {"model": "tfjs/model.json"},
        "server": {"runtime": "litert", "model": "model.tflite", "signature": "serving_default",
                   "input": "input", "output": "probabilities", "precision": "float32"},
        "parity": checked["parity"],
        **extra,
    }
