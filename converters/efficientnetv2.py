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

Export, verification and manifest fields are shared with ``converters.efficientnet_lite``
(``converters.classifier``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from modelcontract import answers

from . import classifier, sources, stages
from .errors import ConverterError
from modelcontract.manifest import sha256_file

NAME = "efficientnetv2-b0"
TASK = "classify"
SUMMARY = "EfficientNetV2-B0 ImageNet-1k classifier (Keras Applications), 224x224, top-5 probabilities"

WEIGHTS_FILE = "efficientnetv2-b0.h5"
WEIGHTS_URL = "https://storage.googleapis.com/tensorflow/keras-applications/efficientnet_v2/" + WEIGHTS_FILE
WEIGHTS_MD5 = "21ecbf6da12460d5c40bb2f29ceb2188"  # Keras' own check for this file (with top)
# Keras Applications' weights ship under Keras' licence (the EfficientNetV2 originals, google/automl: Apache-2.0 too)
LICENCE = sources.licence("Apache-2.0", "https://github.com/keras-team/keras/blob/master/LICENSE")
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
        return sources.random_weights("random", RANDOM_SEED, init=f"tf_keras default initialisers, seed {RANDOM_SEED}")
    if weights:
        source = sources.local_weights(weights, "Keras weights", (".h5", ".keras"))
        _check_keras_file(source.path)
        source.licence = sources.user_licence("Keras weights")
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
    source.licence = LICENCE
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


@dataclass
class Loaded(classifier.Loaded):
    model: object          # the Keras model (probabilities)


def build(ctx) -> dict:
    return stages.run(ctx, load, export, classifier.verify, describe)


def load(ctx) -> Loaded:
    """The Keras model (probabilities and logits) and its outputs on bus.jpg."""
    import tensorflow as tf
    import tf_keras

    model, logits_model = _keras_model(ctx.source)
    ctx.log(f"{model.count_params():,} parameters")
    x, _ = classifier.prepare_photo(INPUT)
    answer_x = answers.model_input(INPUT)
    return Loaded(
        model=model, x=x,
        reference={"probabilities": model(x, training=False).numpy(),
                   "logits": logits_model(x, training=False).numpy()},
        answer_x=answer_x, answer=model(answer_x, training=False).numpy(),
        reference_info={"runtime": "tf_keras", "version": tf_keras.__version__, "tensorflow": tf.__version__})


def export(ctx, loaded: Loaded) -> classifier.Exported:
    model = loaded.model
    return classifier.export_graph(ctx, lambda t: model(t, training=False), model.variables, INPUT)


def describe(ctx, loaded: Loaded, exported: classifier.Exported, verified: classifier.Verified) -> dict:
    return classifier.describe(
        title="EfficientNetV2-B0 (ImageNet-1k)" + (" - random weights" if ctx.source.path is None else ""),
        input_spec=INPUT, verified=verified,
        extra={"architecture": {"family": "EfficientNetV2", "variant": "B0", "built_with": "tf_keras",
                                "preprocessing_in_graph": "Rescaling(1/255) + Normalization(ImageNet mean/std)"},
               "preprocessing": {"resize": "stretch to 224x224 (bilinear, half-pixel centres)",
                                 "why": "the graph normalises internally and expects RGB 0..255; "
                                        "Keras reference evaluation resizes the whole image to 224"}})
