"""The ultralytics export's child process: ultralytics reads its environment at import time,
writes beside its input and into the working directory, and needs a few offline fixes
(``export_env``). ``run`` starts it on a request (paths of the photos it reads and the
arrays it writes) and reads its result; ``main`` is what runs in it: load, the PyTorch
references (random weights exist only inside this process), export."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import ConverterError

RANDOM_SEED = 0
# The dense tasks' one output, by role: per-pixel class logits, a depth map.
DENSE = {"semantic": "logits", "depth": "depth"}
ROOT = Path(__file__).resolve().parents[2]


def export_env(tmp: Path) -> dict:
    """Offline-safe environment for ultralytics' export."""
    env = dict(os.environ)
    config = tmp / "ultralytics-config"
    config.mkdir(exist_ok=True)
    env.update({
        "YOLO_OFFLINE": "true",        # no connectivity probes
        "YOLO_AUTOINSTALL": "false",   # never pip-install from inside an export
        "YOLO_CONFIG_DIR": str(config),
        # onnx2tf's and litert-torch's tools come from this venv
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    })
    # onnx2tf and ultralytics both fetch this calibration sample unless it is in the CWD;
    # an fp32 export never uses its values.
    np.save(tmp / "calibration_image_sample_data_20x128x128x3_float32.npy",
            np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
    return env


def calibrate_batchnorm(model, x_nhwc: np.ndarray, min_var: float = 0.1) -> None:
    """Set every batch norm's running statistics from one forward pass over ``x_nhwc``.

    Channels that barely vary on one photo would get huge gains and make the random network
    chaotic (PyTorch fp32 itself then drifts ~1e-4 from a float64 run); flooring the variance
    keeps outputs that vary while fp32 rounding noise stays ~1e-7.
    """
    import torch

    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: one pass sets the statistics exactly
    model.train()
    with torch.no_grad():
        model(torch.from_numpy(x_nhwc).permute(0, 3, 1, 2).contiguous())
    model.eval()
    for m in norms:
        m.running_var.clamp_(min=min_var)


def main(request_file: str) -> None:
    """Runs in the child: load, reference forward, export. Writes result.json."""
    request = json.loads(Path(request_file).read_text())
    import copy

    import torch
    from ultralytics import YOLO
    from ultralytics.nn import tasks

    torch.manual_seed(RANDOM_SEED)
    yolo = YOLO(request["weights"])
    model = yolo.model
    kinds = {tasks.DetectionModel: "detect", tasks.SegmentationModel: "segment", tasks.PoseModel: "pose",
             tasks.OBBModel: "obb", tasks.ClassificationModel: "classify",
             tasks.SemanticSegmentationModel: "semantic", tasks.DepthModel: "depth"}
    if type(model) not in kinds:
        raise SystemExit(f"WRONG-KIND: {type(model).__name__} is not one of "
                         f"{', '.join(k.__name__ for k in kinds)}")
    if getattr(model, "end2end", False):
        model.end2end = False  # NMS-free heads: export the one-to-many raw head instead
    x = np.load(request["input"])
    if request["weights"].lower().endswith((".yaml", ".yml")):
        # Random weights give a near-constant output (activations shrink layer by layer and the
        # class prior makes every score ~1e-5): calibrate batch norm on another photo and drop
        # the class prior, so parity compares outputs that vary.
        for branch in getattr(model.model[-1], "cv3", ()):
            torch.nn.init.zeros_(branch[-1].bias)
        calibrate_batchnorm(model, np.load(request["calibration"]))
    task = kinds[type(model)]
    if task == "classify":
        _classify_with_features()
    if task in DENSE:
        # The exported head's form: a semantic head's logits and a depth head's map upsampled
        # to the input (8x, 4x), as both exports give them; eval mode gives them smaller.
        head = model.model[-1]
        head.export, head.format = True, "pb"
    model.eval()

    def head_outputs(net, x_nhwc) -> dict:
        """The raw head (and a segmentation model's prototypes, NHWC as the TF graph has them),
        or a classifier's probabilities and features."""
        with torch.no_grad():
            y = net(torch.from_numpy(x_nhwc).permute(0, 3, 1, 2).contiguous())
        if task == "classify":  # (probabilities, features): _classify_with_features
            return {"probabilities": y[0].numpy(), "features": y[1].numpy()}
        if task in DENSE:  # [1, C, H, W] -> NHWC, as the TF graph has it
            return {DENSE[task]: y.permute(0, 2, 3, 1).numpy()}
        y = y[0] if isinstance(y, (list, tuple)) else y
        if isinstance(y, (list, tuple)):  # Segment: [head, prototypes NCHW]
            return {"head": y[0].numpy(), "prototypes": y[1].permute(0, 2, 3, 1).numpy()}
        return {"head": y.numpy()}

    np.savez(request["reference"], **head_outputs(model, x))
    # The answer check's pattern (modelcontract.answers) through the same network.
    np.savez(request["answer_reference"], **head_outputs(model, np.load(request["answer_input"])))
    # The same weights at the size they were trained at (640 for an architecture's random
    # weights), for the agreement of another size with it; none at that size itself.
    side = _trained_side(yolo) or request["default_imgsz"]
    done = []
    if request["agreement"] and side != request["imgsz"]:
        from converters import sources
        from converters.ultralytics_yolo import input_spec
        from modelcontract.geometry import prepare

        for photo, path in request["agreement"].items():
            np.savez(path, **head_outputs(model, prepare(sources.load_photo(photo), input_spec(side))[0]))
            done.append(photo)
    # The same network in float64: how far fp32 arithmetic alone lands from the exact result
    # (context for the parity figure; the model itself stays fp32).
    np.savez(request["reference_fp64"], **head_outputs(copy.deepcopy(model).double(), x.astype(np.float64)))

    # The TF.js graph: Ultralytics' frozen-graph export (ONNX -> onnx2tf SavedModel -> .pb),
    # converted by converters.tfjs as its own TF.js export did until 8.4.83 (which writes LiteRT
    # for format="tfjs" now).
    from ultralytics.utils.export import tensorflow as tf_export

    from converters import tfjs

    # TF.js has no grouped convolution: onnx2tf splits them, as 8.4.82 asked for format="tfjs"
    # (8.4.190 asks only for edgetpu).
    onnx2saved_model = tf_export.onnx2saved_model
    tf_export.onnx2saved_model = lambda *args, **kwargs: onnx2saved_model(
        *args, **{**kwargs, "disable_group_convolution": True})
    # nms=None: the raw head, NMS in the page or server (in 8.4.190 nms=False asks for a
    # YOLO26's NMS-free one-to-one head instead).
    started = time.perf_counter()
    pb = Path(yolo.export(format="pb", imgsz=request["imgsz"], nms=None, device="cpu")).resolve()
    _align_corners(pb, pb.with_suffix(".onnx"))
    web = Path("web_model").resolve()
    tfjs.convert_frozen_model(pb, web, quantize=request["quantize"])
    seconds = time.perf_counter() - started
    # The .tflite: Ultralytics' LiteRT export (litert-torch, torch.export straight to LiteRT),
    # the very file a user of `yolo export format=litert` gets, metadata inside.
    started = time.perf_counter()
    litert = Path(yolo.export(format="litert", imgsz=request["imgsz"], nms=None, device="cpu")).resolve()
    litert_seconds = time.perf_counter() - started
    names = model.names
    Path(request["result"]).write_text(json.dumps({
        "web_model": str(web),
        # what the export writes beside model.json (task, names, imgsz...): the pages read it
        # when this folder is dropped on them
        "metadata": str(pb.parent / f"{pb.stem}_saved_model" / "metadata.yaml"),
        "tflite": str(litert),
        "names": [names[i] for i in sorted(names)] if isinstance(names, dict) else list(names),
        "nc": len(names),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "yaml": model.yaml.get("yaml_file"),
        "head": type(model.model[-1]).__name__,
        "task": task,
        "kpt_shape": list(getattr(model.model[-1], "kpt_shape", None) or []) or None,
        "export_seconds": round(seconds, 1),
        "litert_export_seconds": round(litert_seconds, 1),
        "agreement_side": side if done else None,
        "agreement_photos": done,
    }))


def _align_corners(pb: Path, onnx_file: Path) -> None:
    """Give the frozen graph's bilinear resizes the ONNX graph's align_corners where it has it:
    onnx2tf writes every one half-pixel, which put a depth head (three align_corners=True
    upsamples) 1e-3 from PyTorch in TensorFlow and 2.5e-2 in TF.js, against 2e-7 once set.
    The two graphs hold their bilinear resizes in the same order."""
    import onnx
    import tensorflow as tf

    modes = [next((a.s.decode() for a in node.attribute if a.name == "coordinate_transformation_mode"),
                  "half_pixel") for node in onnx.load(str(onnx_file)).graph.node
             if node.op_type == "Resize" and any(a.name == "mode" and a.s == b"linear" for a in node.attribute)]
    if "align_corners" not in modes:
        return
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(pb.read_bytes())
    resizes = [node for node in graph.node if node.op == "ResizeBilinear"]
    if len(resizes) != len(modes):
        raise SystemExit(f"{len(modes)} bilinear resizes in the ONNX graph, {len(resizes)} in TensorFlow's")
    for node, mode in zip(resizes, modes):
        if mode == "align_corners":
            node.attr["align_corners"].b, node.attr["half_pixel_centers"].b = True, False
    pb.write_bytes(graph.SerializeToString())


def _trained_side(yolo) -> int | None:
    """The input side a checkpoint was trained at (its train_args); None for an architecture."""
    side = ((getattr(yolo, "ckpt", None) or {}).get("train_args") or {}).get("imgsz")
    return side if isinstance(side, int) else None


def _classify_with_features() -> None:
    """The classification head outputs its pooled features beside the probabilities (the
    classify page's Teach mode compares images by them; Ultralytics' head returns the
    probabilities alone when exported, and its logits otherwise)."""
    import torch
    from ultralytics.nn.modules.head import Classify

    def forward(self, x):
        if isinstance(x, list):
            x = torch.cat(x, 1)
        features = self.pool(self.conv(x)).flatten(1)
        logits = self.linear(self.drop(features))
        return logits if self.training else (logits.softmax(1), features)

    Classify.forward = forward


class WrongKind(ConverterError):
    """The checkpoint holds another kind of model than a DetectionModel."""


def run(request: dict, tmp: Path, ctx) -> dict:
    """The child on ``request`` in ``tmp`` (its working directory and log); -> its result.json."""
    (tmp / "request.json").write_text(json.dumps(request))
    log = tmp / "export.log"
    with open(log, "w") as out:
        proc = subprocess.run([sys.executable, "-m", "converters.ultralytics_yolo.child", str(tmp / "request.json")],
                              cwd=tmp, env=export_env(tmp), stdout=out, stderr=subprocess.STDOUT)
    text = log.read_text(errors="replace")
    if "WRONG-KIND:" in text:
        raise WrongKind(text.split("WRONG-KIND:")[1].splitlines()[0].strip(), None)
    if proc.returncode != 0 or not (tmp / "result.json").is_file():
        tail = "\n".join(text.splitlines()[-25:])
        raise ConverterError(f"the ultralytics export failed (exit {proc.returncode}):\n{tail}",
                             "see the log above; the model was not installed")
    result = json.loads((tmp / "result.json").read_text())
    if not (Path(result["web_model"]) / "model.json").is_file():
        tail = "\n".join(text.splitlines()[-25:])
        raise ConverterError(f"the ultralytics export wrote no TF.js model.json:\n{tail}",
                             "see the log above; the model was not installed")
    ctx.log(f"ultralytics exports: TF.js {result['export_seconds']}s, LiteRT {result['litert_export_seconds']}s "
            f"({result['head']} head, "
            f"{result['parameters']:,} parameters, {result['nc']} classes)")
    return result


if __name__ == "__main__":
    main(sys.argv[1])
