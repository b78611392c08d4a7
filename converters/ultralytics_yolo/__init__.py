"""yolo: any Ultralytics 8.x model (YOLOv5u, YOLOv8, YOLO11, YOLO26, ...) of the detect, segment,
pose, OBB, classify, semantic or depth task -> TF.js and LiteRT through the ultralytics package's own exports:
``YOLO(...).export(format="pb")`` (ONNX -> onnx2tf -> frozen graph), converted to a
TF.js graph by converters.tfjs, and ``format="litert"`` (litert-torch), the server's .tflite.

A detector's graph ends at the raw head, [1, 4+nc, anchors] (cx, cy, w, h in input pixels,
then class scores after sigmoid, then the task's columns); the page decodes it and runs NMS
("outputs.format": "yolo-raw", "yolo-seg", "yolo-pose", "yolo-obb"). A classifier's gives
its probabilities and pooled features ("probabilities"; the classify page opens it). A semantic
model's gives per-pixel class logits and a depth model's a depth map, both upsampled to the
input as Ultralytics' exports do ("yolo-semantic", "yolo-depth"; the detect page draws them). The
.tflite is the very file ``yolo export format=litert`` gives a user, metadata inside: its
layout (NCHW input, boxes as fractions of the input, NCHW prototypes) is the manifest's
``graph: ultralytics-litert``, which modelcontract/ultralytics_litert.py and the pages' twin
read back into the TF.js graph's.

--weights:
  (default)         yolo11n.pt, as NAME below
  NAME              an official checkpoint by its file name (yolo11n.pt, yolo26n.pt, yolo11n-seg.pt,
                    yolo11n-pose.pt, yolo26n-obb.pt): the shared folder's copy, else the
                    download cache's, else Ultralytics' release download; sha256-checked (official.py)
  PATH.pt           an Ultralytics 8.x checkpoint of any of the seven tasks
  NAME.yaml / PATH  an Ultralytics architecture (bundled name such as yolov8n.yaml, or a
                    file) with random weights (seeded) -- what works offline
  none              yolo11n.yaml with random weights

A checkpoint's build is named after it (yolo11n-pose), an architecture's "yolo"; --id names
another.

The export runs in a child process: ultralytics reads its environment at import time,
writes beside its input and into the working directory, and needs a few offline fixes
(child.py). The child also computes the PyTorch reference, because random
weights exist only inside that process.
"""
from __future__ import annotations

import io
import json
import pickle
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modelcontract import answers, ultralytics_litert

from .. import detections, parity, sources, stages, tfjs, tflite
from ..errors import ConverterError
from . import child, official
from .child import RANDOM_SEED
from modelcontract.manifest import sha256_file

NAME = "yolo"
TASK = "detect"
SUMMARY = "Ultralytics 8.x model (YOLO26/YOLO11/YOLOv8/YOLOv5u, seven tasks) via its own exports; raw head, NMS in the page"

DEFAULT_CHECKPOINT = "yolo11n.pt"
DEFAULT_YAML = "yolo11n.yaml"
KIND = "Ultralytics 8.x checkpoint (detect, segment, pose, OBB, classify, semantic or depth)"
# The task of each model class (ultralytics.nn.tasks) and YAML head taken.
MODEL_CLASSES = {"DetectionModel": "detect", "SegmentationModel": "segment", "PoseModel": "pose",
                 "OBBModel": "obb", "ClassificationModel": "classify",
                 "SemanticSegmentationModel": "semantic", "DepthModel": "depth"}
HEADS = {"Detect": "detect", "Segment": "segment", "Pose": "pose", "OBB": "obb", "Classify": "classify",
         "SemanticSegment": "semantic", "Depth": "depth"}
EXPECTED = ("expected an Ultralytics 8.x checkpoint of a detection, segmentation, pose, OBB, classification, "
            "semantic segmentation or depth model (a pickled ultralytics.nn.tasks " + ", ".join(MODEL_CLASSES) +
            "), e.g. yolo11n.pt, yolov8n-seg.pt, yolo11n-pose.pt, yolo11n-obb.pt, yolo11n-cls.pt, "
            "yolo26n-sem.pt or yolo26n-depth.pt")
IMGSZ = 640  # the default input side; --imgsz builds another (IMGSZ_STEP multiples) beside it
IMGSZ_STEP = 32  # the largest stride of the Detect head
# Decoding defaults for the page (ultralytics' predict defaults, fewer boxes).
PAGE_NMS = {"iou": 0.7, "score": 0.25, "max_det": 100, "agnostic": False}



def input_spec(imgsz: int = IMGSZ, task: str = "detect") -> dict:
    """Ultralytics' own preprocessing: a letterbox for the detectors; for a classifier,
    classify_transforms' shorter side resized to imgsz and the centre crop (crop fraction 1);
    for depth the photo stretched to the square (its predictor's scale_fill)."""
    resize = {"resize": "center-crop", "crop_fraction": 1.0} if task == "classify" \
        else {"resize": "stretch"} if task == "depth" else {"resize": "letterbox", "pad_value": 114}
    return {
        "shape": [1, imgsz, imgsz, 3], "layout": "NHWC", "dtype": "float32", "color": "RGB",
        "range": [0.0, 1.0], **resize,
        "scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
    }


INPUT = input_spec()


# ---------------------------------------------------------------------------- source

def _bundled_yaml(name: str) -> Path | None:
    """The ultralytics cfg file a model name like yolov8n.yaml resolves to (scale letter dropped)."""
    unified = re.sub(r"(\d+)([nslmx])(.+)?$", r"\1\3", Path(name).stem) + ".yaml"
    hits = sorted((sources.photo_path().parent.parent / "cfg" / "models").rglob(unified))
    return hits[0] if hits else None


def _yaml_task(path: Path, label: str) -> str:
    """The task of the model an architecture yaml builds (its last layer's head)."""
    import yaml

    try:
        cfg = yaml.safe_load(path.read_text())
        head = cfg["head"][-1][2]
    except Exception as exc:  # unreadable or not a model yaml
        raise ConverterError(f"{label} is not an Ultralytics model yaml ({exc.__class__.__name__})",
                             "pass e.g. --weights yolov8n.yaml or a model .yaml file") from None
    if head not in HEADS:
        raise ConverterError(f"{label} builds a {head} head; this converter handles {', '.join(HEADS)} heads",
                             "pass e.g. --weights yolo11n.yaml, yolo11n-seg.yaml, yolo11n-pose.yaml, "
                             "yolo11n-obb.yaml or yolo11n-cls.yaml")
    return HEADS[head]


def model_id(source: sources.Source) -> str:
    """A checkpoint's build is named after its file (yolo11n-pose.pt -> yolo11n-pose; an
    official one after its release name, whatever the local file is called; the trainer's
    runs/segment/train/weights/best.pt -> segment-train); an architecture's random weights
    are "yolo"."""
    if source.path is None:
        return NAME
    path = Path(source.extra.get("checkpoint") or source.path)
    stem = path.stem
    if stem in ("best", "last") and path.parent.name == "weights":
        # the trainer's runs/<task>/<run>/weights/best.pt: segment-train (segment-train-last)
        stem = "-".join([path.parents[2].name, path.parents[1].name] + ([stem] if stem == "last" else []))
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:100]
    return cleaned or NAME


def resolve_source(weights: str | None) -> sources.Source:
    if weights is None:
        weights = DEFAULT_CHECKPOINT
    if official.is_official_name(weights) and not Path(weights).is_file():
        return _checkpoint_source(official.resolve(weights))
    if weights == "none":
        weights = DEFAULT_YAML
    if weights.lower().endswith((".yaml", ".yml")):
        path = Path(weights).expanduser()
        if path.is_file():
            task = _yaml_task(path, path.name)
            return sources.Source(kind="ultralytics architecture yaml, random init", path=None,
                                  sha256=f"random-seed{RANDOM_SEED}:{sha256_file(path)}",
                                  extra={"architecture": str(path.resolve()), "task": task},
                                  licence=sources.licence(sources.RANDOM_WEIGHTS))
        bundled = _bundled_yaml(weights)
        if bundled is None:
            raise ConverterError(f"{weights} is neither a file nor an architecture bundled with ultralytics",
                                 "pass e.g. --weights yolov8n.yaml, yolo11n.yaml, yolov5nu.yaml, or a .pt file")
        task = _yaml_task(bundled, weights)
        return sources.Source(kind="ultralytics architecture yaml, random init", path=None,
                              sha256=f"random-seed{RANDOM_SEED}:{Path(weights).name}",
                              extra={"architecture": Path(weights).name, "task": task},
                              licence=sources.licence(sources.RANDOM_WEIGHTS))
    source = sources.local_weights(weights, KIND, (".pt",))
    return _checkpoint_source(official.matching(source.path, source.sha256) or source)


def _checkpoint_source(source: sources.Source) -> sources.Source:
    """A .pt's source, once its task is read from the pickle without running it."""
    from ..yolov5.checkpoint import checkpoint_globals

    names = checkpoint_globals(source.path, EXPECTED)
    if "models.yolo Model" in names:
        raise ConverterError(f"{source.path.name} is a classic anchor-based yolov5 checkpoint; {EXPECTED}",
                             f"convert it with: python -m converters yolov5n --weights {source.path}")
    tasks = [task for cls, task in MODEL_CLASSES.items() if f"ultralytics.nn.tasks {cls}" in names]
    if not tasks:
        other = sorted(n.split(" ")[1] for n in names if n.startswith("ultralytics.nn.tasks "))
        raise ConverterError(f"{source.path.name} is not an Ultralytics detection, segmentation, pose, OBB, "
                             f"classification, semantic or depth checkpoint ({', '.join(other) or 'no ultralytics model inside'}); "
                             f"{EXPECTED}", "pass such a .pt (e.g. yolo11n.pt, yolo11n-seg.pt) with --weights PATH")
    if source.licence is None:
        source.licence = sources.user_licence(KIND)
    source.extra["task"] = tasks[-1]  # the most specific, should a subclass pickle its base too
    trained = trained_side(source.path)
    if trained:
        source.extra["trained_imgsz"] = trained
    return source


class _Stub:
    """Whatever a checkpoint pickles besides plain data: built from anything, holds nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


class _PlainData(pickle.Unpickler):
    """Reads a pickle's dicts, lists, strings and numbers; every class or function it names
    (the model, tensors, optimizer) becomes a _Stub, so nothing is imported or run."""

    def find_class(self, module, name):
        return _Stub

    def persistent_load(self, pid):
        return None


def trained_side(path: Path) -> int | None:
    """The input side a checkpoint was trained at (its train_args["imgsz"]), read without
    unpickling its model; None when it doesn't say."""
    try:
        with zipfile.ZipFile(path) as zf:
            name = next(n for n in zf.namelist() if n.endswith("data.pkl"))
            checkpoint = _PlainData(io.BytesIO(zf.read(name))).load()
        side = checkpoint.get("train_args", {}).get("imgsz")
    except Exception:  # noqa: BLE001 - anything unreadable just has no side to offer
        return None
    return side if isinstance(side, int) and side > 0 else None


def _export(request: dict, tmp: Path, ctx) -> dict:
    try:
        return child.run(request, tmp, ctx)
    except child.WrongKind as exc:
        raise ConverterError(f"{exc}; {EXPECTED}", "pass a detection model with --weights") from None


# ---------------------------------------------------------------------------- stages

@dataclass
class Loaded(stages.Loaded):
    tmp: tempfile.TemporaryDirectory  # the child's folder (export removes it)
    request: dict      # what the child is asked: weights, sizes and the .npy paths it reads and writes
    spec: dict         # the build's input spec
    x: np.ndarray      # bus.jpg, letterboxed to the build's side


@dataclass
class Exported(stages.Exported):
    result: dict                # the child's result.json (files written, architecture, names, task)
    reference: dict             # PyTorch's outputs on x (fp32) by role: "head" (+ "prototypes")
    exact: dict                 # the same in float64
    agreement_reference: dict   # photo -> PyTorch's outputs at agreement_side (other sizes only)
    agreement_side: int | None  # the side the agreement compares with: the training size, else 640
    answer: tuple               # (answer-check input, PyTorch's outputs on it)
    input_name: str             # the TF.js graph's input
    output_names: dict          # role -> the TF.js graph's output of that role


@dataclass
class Verified(stages.DetectorVerified):
    tfjs_out: dict              # the TF.js outputs on x, by role


# The manifest's outputs.format per Ultralytics task (modelcontract/decode.py reads each).
FORMATS = {"detect": "yolo-raw", "segment": "yolo-seg", "pose": "yolo-pose", "obb": "yolo-obb",
           "classify": "probabilities", "semantic": "yolo-semantic", "depth": "yolo-depth"}
DETECTOR_TASKS = ("detect", "segment", "pose", "obb")
ROLE_OF_RANK = {3: "head", 4: "prototypes"}
CLASSIFIER_ROLES = ("probabilities", "features")
DENSE_ROLES = tuple(child.DENSE.values())  # a dense model's one output: "logits" or "depth"


def _role_names(shapes: dict, reference: dict | None = None) -> dict:
    """{role: output name} from {output name: shape}: a segmentation graph's two outputs differ
    in rank, a classifier's (given its ``reference`` by role) in shape (in order where the
    shapes are the same)."""
    if reference is not None and set(reference) == set(CLASSIFIER_ROLES):
        by_shape = {tuple(shape): name for name, shape in shapes.items()}
        if len(by_shape) < len(shapes):
            return dict(zip(CLASSIFIER_ROLES, shapes))
        return {role: by_shape[tuple(np.shape(value))] for role, value in reference.items()
                if tuple(np.shape(value)) in by_shape}
    if reference is not None and len(reference) == 1 and set(reference) <= set(DENSE_ROLES):
        return dict(zip(reference, shapes))
    return {ROLE_OF_RANK[len(shape)]: name for name, shape in shapes.items()}


def _roles(named: dict, reference: dict | None = None) -> dict:
    """Outputs by name -> by role (``_role_names``)."""
    names = _role_names({name: np.shape(value) for name, value in named.items()}, reference)
    return {role: np.asarray(named[name]) for role, name in names.items()}


def _load_roles(path: str) -> dict:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def build(ctx) -> dict:
    return stages.run(ctx, load, export, verify, describe)


def load(ctx) -> Loaded:
    """The photos the child needs, at the build's size (parity) and at 640 (calibration of
    random weights); the child loads the model itself, because random weights exist only
    inside that process, and it prepares the agreement photos, at the size the checkpoint was
    trained at (else 640), which only the checkpoint knows."""
    from modelcontract.geometry import prepare

    tmp = tempfile.TemporaryDirectory(prefix="yolo-export-")
    folder = Path(tmp.name)
    task = ctx.source.extra["task"]
    spec = input_spec(ctx.imgsz, task)
    x, _ = prepare(sources.load_photo("bus.jpg"), spec)
    source = ctx.source
    # a copy of a checkpoint, because the export writes its files beside its input
    weights = str(shutil.copy(source.path, folder / source.path.name)) if source.path is not None \
        else source.extra["architecture"]
    request = {"weights": weights, "imgsz": ctx.imgsz, "quantize": ctx.quantize,
               "input": str(folder / "input.npy"), "reference": str(folder / "reference.npz"),
               "reference_fp64": str(folder / "reference_fp64.npz"),
               "calibration": str(folder / "calibration.npy"), "result": str(folder / "result.json"),
               "answer_input": str(folder / "answer-input.npy"), "answer_reference": str(folder / "answer.npz"),
               "agreement": {}, "default_imgsz": IMGSZ}
    np.save(request["input"], x)
    np.save(request["answer_input"], answers.model_input(spec))
    # calibrated at the default size whatever --imgsz says: the same random weights as the 640 build
    np.save(request["calibration"], prepare(sources.load_photo("zidane.jpg"), INPUT)[0])
    if task in DETECTOR_TASKS:  # detections of this size against the training size's (the child decides)
        request["agreement"] = {photo: str(folder / f"agreement-{photo}-reference.npz")
                                for photo in detections.AGREEMENT_PHOTOS}
    return Loaded(tmp=tmp, request=request, spec=spec, x=x)


def export(ctx, loaded: Loaded) -> Exported:
    """The child: PyTorch references, then ultralytics' frozen-graph (-> TF.js) and LiteRT
    exports; their files -> workdir."""
    request, folder = loaded.request, Path(loaded.tmp.name)
    try:
        result = _export(request, folder, ctx)
        web = Path(result["web_model"])
        (ctx.workdir / "tfjs").mkdir()
        for f in web.iterdir():
            if f.name == "model.json" or f.suffix == ".bin":
                shutil.copy(f, ctx.workdir / "tfjs" / f.name)
        shutil.copy(result["metadata"], ctx.workdir / "tfjs" / "metadata.yaml")
        shutil.copy(result["tflite"], ctx.workdir / "model.tflite")
        reference = _load_roles(request["reference"])
        exact = _load_roles(request["reference_fp64"])
        agreement_reference = {photo: _load_roles(request["agreement"][photo]) for photo in result["agreement_photos"]}
        answer = (np.load(request["answer_input"]), _load_roles(request["answer_reference"]))
    finally:
        loaded.tmp.cleanup()
    model_json = json.loads((ctx.workdir / "tfjs" / "model.json").read_text())
    sig = tfjs.graph_signature(model_json)
    if result["task"] != ctx.source.extra["task"]:
        raise ConverterError(f"the checkpoint reads as a {ctx.source.extra['task']} model but loads as "
                             f"{result['task']}", "report this with the log above")
    output_names = _output_names(sig["outputs"], reference)
    if set(output_names) != set(reference):
        raise ConverterError(f"the exported graph's outputs ({', '.join(sorted(output_names))}) are not "
                             f"the model's ({', '.join(sorted(reference))})", "report this with the log above")
    return Exported(
        result=result, reference=reference, exact=exact, agreement_reference=agreement_reference,
        agreement_side=result["agreement_side"], answer=answer,
        input_name=sig["inputs"][0]["name"] if sig["inputs"] else _placeholder(model_json), output_names=output_names)


def _output_names(outputs: list, reference: dict) -> dict:
    """The graph's outputs by role. A detector's in order (output0, output1): the head, then a
    segmentation model's prototypes. A classifier's two (probabilities, features) are told
    apart by shape (``_role_names``), as onnx2tf may reorder them."""
    ordered = sorted(outputs, key=lambda o: o["key"])
    if set(reference) <= set(DENSE_ROLES):
        return {role: o["name"] for role, o in zip(reference, ordered)}
    if set(reference) == set(CLASSIFIER_ROLES):
        return _role_names({o["name"]: o["shape"] for o in ordered}, reference)
    return {role: o["name"] for role, o in zip(("head", "prototypes"), ordered)} if ordered \
        else {"head": "Identity"}


def compare_roles(reference: dict, candidate: dict) -> dict:
    """parity.compare per output role; "relative" and "max_abs" are the worst role's."""
    per_role = {role: parity.compare(reference[role], candidate[role]) for role in reference}
    worst = max(per_role.values(), key=lambda c: c["relative"])
    return {**worst, **({"outputs": per_role} if len(per_role) > 1 else {})}


def verify(ctx, loaded: Loaded, exported: Exported) -> Verified:
    """The raw head (and prototypes), TF.js and LiteRT, against PyTorch on bus.jpg; for a size
    other than the one the checkpoint was trained at (640 for random weights), the agreement
    with the same weights at that size."""
    reference, names = exported.reference, exported.output_names

    def compare(tfjs_out: dict, litert_out: dict) -> stages.Comparison:
        got, served = _roles(tfjs_out, reference), _roles(_converter_layout(ctx, exported, litert_out), reference)
        server = compare_roles(reference, served)
        if set(reference) <= set(DENSE_ROLES):  # a class map or depth map: how much of it agrees
            return stages.Comparison(tfjs={**compare_roles(reference, got), **dense_agreement(reference, got)},
                                     server={**server, **dense_agreement(reference, served)},
                                     server_ok=server["relative"] <= parity.TARGETS["none"])
        if "head" not in reference:  # a classifier: the same top 5 besides parity
            return stages.Comparison(
                tfjs={**compare_roles(reference, got), "same_top5": _top5(reference) == _top5(got)},
                server={**server, "same_top5": _top5(reference) == _top5(served)},
                server_ok=server["relative"] <= parity.TARGETS["none"])
        head, got_head = reference["head"], got["head"]
        return stages.Comparison(
            tfjs={**compare_roles(reference, got),
                  "boxes_max_abs_px": parity.compare(head[:, :4], got_head[:, :4])["max_abs"],
                  "scores_max_abs": parity.compare(head[:, 4:], got_head[:, 4:])["max_abs"]},
            server=server, server_ok=server["relative"] <= parity.TARGETS["none"])  # the .tflite is fp32

    checked = stages.check(ctx, tfjs_model="tfjs/model.json", tflite_model="model.tflite",
                           inputs={exported.input_name: loaded.x},
                           litert_inputs=[ultralytics_litert.to_nchw(loaded.x)],
                           tfjs_outputs=list(names.values()), compare=compare)
    tfjs_out = _roles(checked.outputs["tfjs"], reference)
    agreement = None
    if exported.agreement_reference:
        agreement = agreement_with_default_size(ctx, exported)
        ctx.log(f"keeps {agreement['kept']}/{agreement['reference_detections']} of the "
                f"{exported.agreement_side}-px detections "
                f"({agreement['rule']}) on {', '.join(agreement['photos'])}")
    return Verified(checked=checked, agreement=agreement, tfjs_out=tfjs_out)


def _converter_layout(ctx, exported: Exported, litert_out: dict) -> dict:
    """The LiteRT file's outputs in the TF.js graph's layout (modelcontract.ultralytics_litert)."""
    return ultralytics_litert.converter_outputs(litert_out, (ctx.imgsz, ctx.imgsz), exported.result["nc"],
                                                exported.result.get("kpt_shape"))


def dense_agreement(reference: dict, candidate: dict) -> dict:
    """A semantic model's share of input pixels of the same class (argmax of the logits); a
    depth model's largest relative difference."""
    if "logits" in reference:
        same = np.argmax(reference["logits"], -1) == np.argmax(candidate["logits"], -1)
        return {"same_class_share": round(float(same.mean()), 6)}
    ref, got = reference["depth"], candidate["depth"]
    return {"depth_max_relative": float(np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-6)))}


def _top5(outputs: dict) -> list[int]:
    return [int(i) for i in np.argsort(-outputs["probabilities"].reshape(-1), kind="stable")[:5]]


def decoding_manifest(result: dict, imgsz: int) -> dict:
    """What modelcontract.decode needs of the manifest to read this model's outputs."""
    return {"outputs": {"format": FORMATS[result["task"]]}, "labels": result["names"],
            "input": {"shape": [1, imgsz, imgsz, 3]}, "nms": {"agnostic": PAGE_NMS["agnostic"]},
            **({"kpt_shape": result["kpt_shape"]} if result.get("kpt_shape") else {})}


def agreement_with_default_size(ctx, exported: Exported) -> dict:
    """Detections of this build (LiteRT) against the same weights' at the agreement side (the
    training size, else 640; PyTorch), both decoded as the page decodes them (PAGE_NMS), boxes
    in photo pixels."""
    from modelcontract.decode import DetectOptions, decode_detections
    from modelcontract.geometry import prepare

    opts = DetectOptions(score=PAGE_NMS["score"], iou=PAGE_NMS["iou"], max_det=PAGE_NMS["max_det"])

    def decoded(outputs: dict, imgsz: int, transform, image) -> dict:
        manifest = decoding_manifest(exported.result, imgsz)
        rows = decode_detections(manifest["outputs"]["format"], outputs, manifest, transform,
                                 image.shape[1], image.shape[0], opts)
        return {"boxes": np.array([r["box"] for r in rows]).reshape(-1, 4),
                "scores": np.array([r["score"] for r in rows]), "classes": np.array([r["class_id"] for r in rows])}

    side = exported.agreement_side
    reference, candidate = {}, {}
    for photo, outputs in exported.agreement_reference.items():
        image = sources.load_photo(photo)
        reference[photo] = decoded(outputs, side, prepare(image, input_spec(side))[1], image)
        x, transform = prepare(image, input_spec(ctx.imgsz))
        out = tflite.run_tflite(ctx.workdir / "model.tflite", [ultralytics_litert.to_nchw(x)])
        candidate[photo] = decoded(_roles(_converter_layout(ctx, exported, out)), ctx.imgsz, transform, image)
    return detections.agreement(reference, candidate, f"{NAME} at {side} px (PyTorch, same weights)",
                                side, runtime="litert")


MEANINGS = {
    "head": "rows 0-3: cx, cy, w, h in model-input pixels; rows 4..4+nc: class scores after sigmoid; "
            "then per task: nm mask coefficients (segment), k keypoints x, y[, visibility after sigmoid] in "
            "model-input pixels (pose), the angle in radians (obb); one column per anchor point",
    "prototypes": "mask prototypes [1, input/4, input/4, nm] (NHWC): an instance's mask logits are its "
                  "coefficients times these",
    "probabilities": "softmax probabilities over the classes (index = labels[i])",
    "features": "the pooled head (global average pool before the classifier layer): an image's feature "
                "vector, which the classify page's Teach mode compares",
    "logits": "per-pixel class logits [1, input, input, nc] (NHWC), upsampled 8x (bilinear) from the head as "
              "Ultralytics' exports give them: a pixel's class is the argmax, once cropped to the letterbox's "
              "content and resized to the photo",
    "depth": "depth map [1, input, input, 1] (NHWC), positive, in the units the model was trained in (metres "
             "for a metric model), upsampled 4x (bilinear, align_corners) from the head as Ultralytics' "
             "exports give it; resized to the photo",
}
TITLES = {"classify": "classifier", "semantic": "class map", "depth": "depth map"}


def describe(ctx, loaded: Loaded, exported: Exported, verified: Verified) -> dict:
    from importlib import metadata

    result, reference, checked = exported.result, exported.reference, verified.checked
    names = exported.output_names
    nc = result["nc"]
    labels = result["names"]
    if labels == [f"class{i}" for i in range(nc)] or labels == [str(i) for i in range(nc)]:
        # random weights: bundled yamls are COCO-shaped (detectors) or ImageNet-shaped (classifiers)
        labels = {80: sources.coco_names, 1000: sources.imagenet_names}.get(nc, lambda: labels)()
    stem = Path(result["yaml"] or "yolo").stem
    size = "" if ctx.imgsz == IMGSZ else f", {ctx.imgsz} px"
    classifier = result["task"] == "classify"
    detector = result["task"] in DETECTOR_TASKS
    if result["task"] == "depth":
        labels = ["depth"]  # Ultralytics names its one channel "0" or "depth"
    answer_keys = {role: role if classifier else name for role, name in names.items()}
    fields = {
        "title": f"Ultralytics {stem} (" + TITLES.get(result["task"], "raw head, NMS in page") + f"{size})",
        "ultralytics_task": result["task"],
        "graph": ultralytics_litert.GRAPH,
        "input": {"name": exported.input_name, **loaded.spec},
        "outputs": {
            "format": FORMATS[result["task"]],
            # a classifier's tensors are keyed as the classify page and server read them
            "tensors": [{"name": names[role], ("key" if classifier else "role"): role,
                         "shape": list(reference[role].shape), "dtype": "float32", "meaning": MEANINGS[role]}
                        for role in (*ROLE_OF_RANK.values(), *CLASSIFIER_ROLES, *DENSE_ROLES) if role in names],
            "execute": "execute",
        },
        **({"nms": {**PAGE_NMS, "where": "page"}} if detector else {}),
        "labels": labels,
        **({"kpt_shape": result["kpt_shape"]} if result.get("kpt_shape") else {}),
        "tfjs": {"model": "tfjs/model.json"},
        "server": {"runtime": "litert", "model": "model.tflite", "quantization": "none",
                   "note": "Ultralytics' own LiteRT export (format=litert), its metadata inside; NCHW input, "
                           + ("NCHW output" if not detector and not classifier else "boxes as fractions of the input")
                           + " (graph: ultralytics-litert)",
                   **(_litert_keys(checked.outputs["litert"], reference) if classifier else {})},
        "architecture": {"yaml": result["yaml"], "head": result["head"], "parameters": result["parameters"]},
        "parity": {
            "photo": "bus.jpg",
            "reference": {"runtime": "pytorch (ultralytics)", "version": metadata.version("torch")},
            "tfjs": checked.tfjs,
            "server": checked.server,
            # the same PyTorch network in float64 vs float32: the share of any figure above that
            # is plain fp32 rounding, not conversion
            "pytorch_fp32_vs_fp64": compare_roles(exported.exact, reference),
            "tfjs_vs_fp64": compare_roles(exported.exact, verified.tfjs_out),
            "target_relative": checked.target,
            "passed": checked.passed,
        },
        "speed": checked.speed,
        # keyed as the page reads its outputs: a tensor's key (a classifier's roles), else its name
        "answer_check": stages.answer_check(ctx, {"model": stages.AnswerPart(
            reference={answer_keys[role]: value for role, value in exported.answer[1].items()},
            tfjs_model="tfjs/model.json", inputs={exported.input_name: exported.answer[0]},
            tfjs_outputs=list(names.values()),
            roles=lambda out: {answer_keys[role]: out[name] for role, name in names.items()})},
            f"PyTorch {metadata.version('torch')} (ultralytics)"),
    }
    if classifier:
        fields["task"] = "classify"  # the classify page and /api/v1/classify take it
    if verified.agreement is not None:
        fields["agreement"] = verified.agreement
    return fields


def _litert_keys(litert_out: dict, reference: dict) -> dict:
    """The server's output keys of a classifier's .tflite: {"output": ..., "features": ...}."""
    keys = _role_names({key: np.shape(value) for key, value in litert_out.items()}, reference)
    return {"output": keys["probabilities"], "features": keys["features"]}


def _placeholder(model_json: dict) -> str:
    for node in model_json["modelTopology"]["node"]:
        if node["op"] == "Placeholder":
            return node["name"]
    raise ConverterError("the exported graph has no input", None)
