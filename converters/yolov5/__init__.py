"""yolov5n: the classic anchor-based Ultralytics YOLOv5 (v6/v7 checkpoints) -> TF.js,
with agnostic NMS inside the graph.

Route. The checkpoint pickles the yolov5 repository's own classes (models.yolo.Model,
models.common.Conv/C3/...). Rather than installing that code (the PyPI ``yolov5``
package imports a long tail of training dependencies), ``modules`` holds small PyTorch
modules that carry those names and the reference forward; ``checkpoint`` reads a file
through torch's weights_only unpickler, which rebuilds them and nothing else. ``graph``
writes the TF graph layer by layer from the same weights, with the box decoding and the
NMS of ``nms`` appended, saved as a SavedModel and converted to TF.js and to LiteRT (the
server artifact). This module holds the family's stages; torch and TensorFlow are
imported only inside them, so ``python -m converters list`` stays fast.

Outputs, in this order: boxes [1,100,4] (x1,y1,x2,y2 divided by the input size),
scores [1,100], classes [1,100] (int32), valid_detections [1] (int32); rows past
valid_detections are zero.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modelcontract import answers

from .. import detections, parity, sources, stages
from ..errors import ConverterError
from .checkpoint import RANDOM_SEED, YOLOV5N_CFG, check_globals, class_names, load_model
from .graph import RAW_HEAD
from .nms import NMS, OUTPUT_KEYS, detections_of, nms_reference, padded_outputs

NAME = "yolov5n"
TASK = "detect"
SUMMARY = "YOLOv5n (classic anchor-based, COCO 80 classes), agnostic NMS inside the graph"

URL = "https://github.com/ultralytics/yolov5/releases/download/v7.0/yolov5n.pt"
URL_SHA256 = "4f180cf23ba0717ada0badd6c685026d73d48f184d00fc159c2641284b2ac0a3"  # that file
LICENCE = sources.licence("AGPL-3.0", "https://github.com/ultralytics/yolov5/blob/master/LICENSE")
KIND = "yolov5 detection checkpoint"
IMGSZ = 640  # the default input side; --imgsz builds another (IMGSZ_STEP multiples) beside it
IMGSZ_STEP = 32  # the largest stride: a side of whole grid cells at every level


def input_spec(imgsz: int = IMGSZ) -> dict:
    return {
        "name": "images", "shape": [1, imgsz, imgsz, 3], "layout": "NHWC", "dtype": "float32",
        "color": "RGB", "range": [0.0, 1.0], "resize": "letterbox", "pad_value": 114,
        "scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
    }


INPUT = input_spec()

# ---------------------------------------------------------------------------- source

def resolve_source(weights: str | None) -> sources.Source:
    if weights == "none":
        return sources.random_weights("yolov5n architecture, random init", RANDOM_SEED, nc=YOLOV5N_CFG["nc"])
    if weights is None:
        source = sources.download(URL, "yolov5n.pt", KIND)
        source.licence = LICENCE
        return source
    source = sources.local_weights(weights, KIND, (".pt",))
    # the released checkpoint, recognised by its digest, carries the release's licence
    source.licence = LICENCE if source.sha256 == URL_SHA256 else sources.user_licence(KIND)
    check_globals(source.path)
    return source


# ---------------------------------------------------------------------------- stages

@dataclass
class Loaded(stages.Loaded):
    model: object      # modules.Model, float32, eval
    labels: list       # class names, by class index
    spec: dict         # the build's input spec
    x: np.ndarray      # bus.jpg, letterboxed to the build's side
    raw: np.ndarray    # PyTorch's decoded head on x (the figure parity is measured on)
    detections: dict   # torchvision NMS on raw: the reference detections
    answer: dict       # PyTorch + torchvision's four outputs on the answer pattern


@dataclass
class Exported(stages.Exported):
    outputs: dict      # output key -> TF.js graph tensor name
    raw_node: str      # the TF.js node of the decoded head (before NMS)


def build(ctx) -> dict:
    return stages.run(ctx, load, export, verify, describe)


def load(ctx) -> Loaded:
    """The PyTorch model, its labels, and its detections on bus.jpg at the build's input size."""
    from modelcontract.geometry import prepare

    from .modules import torch_head

    model = load_model(ctx.source)
    head = model.model[-1]
    labels = class_names(model)
    if head.nc != len(labels):
        raise ConverterError(f"checkpoint has {head.nc} classes but {len(labels)} names", None)
    ctx.log(f"{sum(p.numel() for p in model.parameters()):,} parameters, {head.nc} classes, "
            f"strides {[int(s) for s in head.stride]}, input {ctx.imgsz} px")
    spec = input_spec(ctx.imgsz)
    x, _ = prepare(sources.load_photo("bus.jpg"), spec)
    raw = torch_head(model, x)
    return Loaded(model=model, labels=labels, spec=spec, x=x, raw=raw, detections=nms_reference(raw, ctx.imgsz),
                  answer=padded_outputs(nms_reference(torch_head(model, answers.model_input(spec)), ctx.imgsz)))


def export(ctx, loaded: Loaded) -> Exported:
    """The TF graph (SavedModel) -> tfjs/ and model.tflite; returns the graph's tensor names."""
    from .. import tfjs, tflite
    from .graph import save_saved_model

    with tempfile.TemporaryDirectory(prefix="yolov5-") as tmp:
        saved = save_saved_model(loaded.model, Path(tmp) / "saved_model", loaded.spec)
        model_json = tfjs.convert_saved_model(saved, ctx.workdir / "tfjs", ctx.quantize)
        tflite.saved_model_to_tflite(saved, ctx.workdir / "model.tflite")
    sig = tfjs.graph_signature(model_json)
    out_names = {o["key"]: o["name"] for o in sig["outputs"]}
    if sorted(out_names) != sorted(OUTPUT_KEYS) or [i["name"] for i in sig["inputs"]] != [INPUT["name"]]:
        raise ConverterError(f"unexpected graph signature {sig}", None)
    return Exported(outputs=out_names, raw_node=_node_named(model_json, RAW_HEAD))


match_detections = detections.match_detections  # (benches use it under this module's name)
SAME_DETECTIONS = {"same_count": True, "min_iou_same_class": 0.99}  # the fp32 target beside the raw head's


def _same(found: dict) -> bool:
    return found["count"] == found["reference_count"] and \
        found["min_iou_same_class"] >= SAME_DETECTIONS["min_iou_same_class"]


def verify(ctx, loaded: Loaded, exported: Exported) -> stages.DetectorVerified:
    """Raw head (TF.js) and detections (TF.js, LiteRT) against PyTorch + torchvision NMS on
    bus.jpg; for a size other than 640, the agreement with the 640-px reference."""
    names = exported.outputs

    def compare(tfjs_out: dict, litert_out: dict) -> stages.Comparison:
        tfjs_det = match_detections(loaded.detections, detections_of(tfjs_out, names))
        server_det = match_detections(loaded.detections, detections_of(litert_out, {k: k for k in OUTPUT_KEYS}))
        return stages.Comparison(
            tfjs={**parity.compare(loaded.raw, tfjs_out[exported.raw_node]), "detections": tfjs_det},
            server={"detections": server_det},
            # quantised graphs are held to their raw-head target only; their detections are recorded
            tfjs_ok=_same(tfjs_det) or ctx.quantize != "none", server_ok=_same(server_det))

    checked = stages.check(ctx, tfjs_model="tfjs/model.json", tflite_model="model.tflite",
                           inputs={INPUT["name"]: loaded.x}, compare=compare,
                           tfjs_outputs=[exported.raw_node] + [names[k] for k in OUTPUT_KEYS])
    agreement = None
    if ctx.imgsz != IMGSZ:
        agreement = agreement_with_default_size(ctx, loaded.model)
        ctx.log(f"keeps {agreement['kept']}/{agreement['reference_detections']} of the {IMGSZ}-px detections "
                f"({agreement['rule']}) on {', '.join(agreement['photos'])}")
    return stages.DetectorVerified(checked=checked, agreement=agreement)


def agreement_with_default_size(ctx, model) -> dict:
    """How many of the same weights' detections at 640 px (PyTorch) this build keeps (LiteRT),
    on the real photos, boxes compared in photo pixels."""
    from modelcontract.geometry import prepare

    from .. import tflite
    from .modules import torch_head

    keys = {k: k for k in OUTPUT_KEYS}

    def in_photo_pixels(found: dict, transform, side: int) -> dict:
        return {**found, "boxes": transform.to_source(found["boxes"] * side)}

    reference, candidate = {}, {}
    for photo in detections.AGREEMENT_PHOTOS:
        image = sources.load_photo(photo)
        x, transform = prepare(image, input_spec(IMGSZ))
        reference[photo] = in_photo_pixels(nms_reference(torch_head(model, x), IMGSZ), transform, IMGSZ)
        x, transform = prepare(image, input_spec(ctx.imgsz))
        out = tflite.run_tflite(ctx.workdir / "model.tflite", {INPUT["name"]: x})
        candidate[photo] = in_photo_pixels(detections_of(out, keys), transform, ctx.imgsz)
    return detections.agreement(reference, candidate, f"{NAME} at {IMGSZ} px (PyTorch, same weights)",
                                IMGSZ, runtime="litert")


def _node_named(model_json: dict, suffix: str) -> str:
    for node in model_json["modelTopology"]["node"]:
        if node["name"] == suffix or node["name"].endswith("/" + suffix):
            return node["name"]
    raise ConverterError(f"the converted graph lost its {suffix} node", None)


def describe(ctx, loaded: Loaded, exported: Exported, verified: stages.DetectorVerified) -> dict:
    import torch
    import torchvision

    names, head, checked = exported.outputs, loaded.model.model[-1], verified.checked
    fields = {
        "title": "YOLOv5n (anchor-based, NMS in graph)" + ("" if ctx.imgsz == IMGSZ else f", {ctx.imgsz} px"),
        "input": loaded.spec,
        "outputs": {
            "format": "nms",
            "tensors": [
                {"name": names["boxes"], "key": "boxes", "shape": [1, NMS["max_det"], 4], "dtype": "float32",
                 "meaning": "x1, y1, x2, y2 in model-input pixels divided by the input size (0..1); "
                            "rows past valid_detections are zero"},
                {"name": names["scores"], "key": "scores", "shape": [1, NMS["max_det"]], "dtype": "float32",
                 "meaning": "objectness x best class probability"},
                {"name": names["classes"], "key": "classes", "shape": [1, NMS["max_det"]], "dtype": "int32",
                 "meaning": "class index into labels"},
                {"name": names["valid_detections"], "key": "valid_detections", "shape": [1], "dtype": "int32",
                 "meaning": "number of valid rows"},
            ],
            "execute": "executeAsync",
        },
        "nms": dict(NMS),
        "labels": loaded.labels,
        "tfjs": {"model": "tfjs/model.json"},
        "server": {"runtime": "litert", "model": "model.tflite", "quantization": "none",
                   "outputs": list(OUTPUT_KEYS)},
        "anchors": {"strides": [int(s) for s in head.stride],
                    "anchors_px": (head.anchors * head.stride.view(-1, 1, 1)).tolist()},
        "parity": {
            "photo": "bus.jpg",
            "reference": {"runtime": "pytorch", "version": torch.__version__,
                          "nms": f"torchvision.ops.nms {torchvision.__version__}"},
            "measured_on": f"decoded head before NMS ({RAW_HEAD}, [1,{loaded.raw.shape[1]},{loaded.raw.shape[2]}])",
            "tfjs": checked.tfjs,
            "server": checked.server,
            "target_relative": checked.target,
            "detections_target": SAME_DETECTIONS,
            "passed": checked.passed,
        },
        "speed": checked.speed,
        "answer_check": stages.answer_check(ctx, {"model": stages.AnswerPart(
            reference=loaded.answer, tfjs_model="tfjs/model.json",
            inputs={INPUT["name"]: answers.model_input(loaded.spec)},
            tfjs_outputs=[names[k] for k in OUTPUT_KEYS],
            roles=lambda out: {k: out[names[k]] for k in OUTPUT_KEYS})}, f"PyTorch {torch.__version__} + torchvision NMS"),
    }
    if verified.agreement is not None:
        fields["agreement"] = verified.agreement
    return fields
