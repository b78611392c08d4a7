"""The model files users already have, made here from the official checkpoints.

``onnx_file(folder, weights, imgsz, nms, half, dynamic)``: Ultralytics' ONNX export as
``yolo export format=onnx`` writes it (a few seconds); ``tiny_onnx``: a one-node ONNX model
with given metadata, for what the pages refuse.

The .tflite files: Ultralytics' TensorFlow export of 8.1-8.3 (ONNX ->
onnx2tf, input NHWC, boxes as fractions of the input), made here from the official
checkpoints. Ultralytics 8.4.190 still runs that chain for ``format="saved_model"`` and keeps
its float32 and float16 .tflite by-products, and with int8=True its int8 ones, calibrated here
on synthetic scenes (no dataset is offline); its ``tf_wrapper`` gives the heads the old
export's normalized outputs. ``python_metadata`` rewrites
the appended metadata as 8.1-8.3 wrote it: one text file, Python's repr of the dict.

``legacy_tflite(folder, weights, imgsz, nms, precision, metadata)`` -> the file, built once
per folder (about 40 s for an n model at 320 px on two cores).

``untrained_checkpoint(folder, task)``: a semantic or depth checkpoint of the scenes' classes
with seeded random weights, as Ultralytics' own ``Model.save`` writes one: what predict() and
the converter both read, when agreement is the question and trained weights are not needed.
"""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from filelock import FileLock

from converters.ultralytics_yolo.child import export_env


# precision -> onnx2tf's file: int8 weights with float input and output, or int8 throughout.
INT8 = {"int8": "integer_quant", "full_integer": "full_integer_quant"}
CALIBRATION = 16   # scenes


def _child(request_file: str) -> None:
    request = json.loads(Path(request_file).read_text())
    from ultralytics import YOLO

    if request.get("format") == "checkpoint":
        _save_untrained(request)
        return
    if request.get("format") == "onnx":
        YOLO(request["weights"]).export(format="onnx", imgsz=request["imgsz"], nms=request["nms"],
                                        half=request["half"], dynamic=request["dynamic"])
        return
    from ultralytics.utils.export.tensorflow import tf_wrapper

    yolo = YOLO(request["weights"])
    # The heads of the old format=tflite export: boxes and keypoints as fractions of the input
    # (8.4's saved_model export keeps pixels, its LiteRT export normalizes in its own wrapper).
    tf_wrapper(yolo.model)
    int8 = {"int8": True, "data": request["data"], "fraction": 1.0} if request["data"] else {}
    yolo.export(format="saved_model", imgsz=request["imgsz"], nms=request["nms"], **int8)


def _save_untrained(request: dict) -> None:
    """Seeded random weights, batch norm set from one scene (else a random network's every
    output is near-constant: converters/ultralytics_yolo/child.py), saved with the task and
    size a trained checkpoint records."""
    import numpy as np
    import torch
    from ultralytics import YOLO

    from converters.scenes import dataset
    from converters.ultralytics_yolo.child import RANDOM_SEED, calibrate_batchnorm

    torch.manual_seed(RANDOM_SEED)
    yolo = YOLO(request["yaml"])
    yolo.model = type(yolo.model)(request["yaml"], nc=len(request["names"]), verbose=False)
    yolo.model.names = dict(enumerate(request["names"]))
    args = {"task": yolo.task, "imgsz": request["imgsz"]}
    yolo.model.args, yolo.ckpt = args, {"train_args": args}
    scene = dataset.scene(request["task"], 1, request["imgsz"])[0]
    calibrate_batchnorm(yolo.model, scene.astype(np.float32)[None] / 255, min_var=UNTRAINED_MIN_VAR[request["task"]])
    yolo.save(request["out"])


# The batch-norm variance floor: a depth head's log-depth saturates its clamp (e^-4 to e^5) at
# 0.1, where the 0.5/255 of predict()'s uint8 resize moves it by 1%; at 0.15 its map spans
# 0.97-1.31 and moves by 3e-5; at 0.3 and above it is flat within 3%.
UNTRAINED_MIN_VAR = {"semantic": 0.1, "depth": 0.15}


def untrained_checkpoint(folder: Path, task: str, imgsz: int = 160) -> Path:
    """``folder``/<task>-untrained.pt (see the module's docstring), made once."""
    from converters.scenes import draw, train

    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{task}-untrained.pt"
    with FileLock(folder / f"{out.name}.lock"):
        if not out.is_file():
            names = draw.NAMES[task] + (["background"] if task == "semantic" else [])
            with tempfile.TemporaryDirectory(prefix="untrained-") as tmp:
                work = Path(tmp)
                request = {"format": "checkpoint", "task": task, "yaml": train.MODELS[task], "names": names,
                           "imgsz": imgsz, "out": str(out)}
                (work / "request.json").write_text(json.dumps(request))
                proc = subprocess.run([sys.executable, "-m", "harness.user_exports", str(work / "request.json")],
                                      cwd=work, env=export_env(work), capture_output=True, text=True)
                if proc.returncode != 0 or not out.is_file():
                    raise RuntimeError(f"{out.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return out


def python_metadata(data: bytes) -> bytes:
    """A .tflite with its appended metadata.json turned into 8.1-8.3's temp_meta.txt (repr)."""
    start = data.rfind(b"PK\x03\x04")
    metadata = json.loads(zipfile.ZipFile(io.BytesIO(data[start:])).read("metadata.json"))
    metadata["names"] = {int(k): v for k, v in metadata["names"].items()}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("temp_meta.txt", repr(metadata))
    return data[:start] + out.getvalue()


def _built(folder: Path, name: str, weights: Path, request: dict, made: str, finish=None, prepare=None) -> Path:
    """``folder/name``, made once (under a lock) by the child's export of ``weights`` with
    ``request``; ``made``: the export's file in its working folder; ``finish`` turns its bytes
    into the file's; ``prepare(work)`` adds to the request what it writes there first."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / name
    with FileLock(folder / f"{name}.lock"):
        if out.is_file():
            return out
        with tempfile.TemporaryDirectory(prefix="user-export-") as tmp:
            work = Path(tmp)
            shutil.copy(weights, work / Path(weights).name)
            request = {**request, **(prepare(work) if prepare else {}), "weights": Path(weights).name}
            (work / "request.json").write_text(json.dumps(request))
            proc = subprocess.run([sys.executable, "-m", "harness.user_exports", str(work / "request.json")],
                                  cwd=work, env=export_env(work), capture_output=True, text=True)
            if proc.returncode != 0 or not (work / made).is_file():
                raise RuntimeError(f"the export of {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            data = (work / made).read_bytes()
            out.write_bytes(finish(data) if finish else data)
    return out


def legacy_tflite(folder: Path, weights: Path, imgsz: int = 320, nms: bool = False, precision: str = "float32",
                  metadata: str = "json", classify: bool = False) -> Path:
    """``weights``' legacy .tflite (``precision``: float32, float16, int8 or full_integer) with NMS inside or not,
    its metadata as metadata.json ("json") or as 8.1-8.3's repr ("repr"); ``classify``: the
    weights are a classifier's (int8 calibrates it on a folder of class folders)."""
    stem = Path(weights).stem

    def calibration(work: Path) -> dict:
        if precision not in INT8:
            return {"data": None}
        from converters.scenes import dataset   # synthetic scenes: no dataset is offline

        scenes = "classify" if classify else "segment"   # a classifier calibrates on a folder
        return {"data": str(dataset.write(scenes, work / "scenes", CALIBRATION, CALIBRATION, imgsz))}

    name = f"{stem}-{imgsz}{'-nms' if nms else ''}_{precision}{'-repr' if metadata == 'repr' else ''}.tflite"
    return _built(folder, name, weights, {"imgsz": imgsz, "nms": nms},
                  f"{stem}_saved_model/{stem}_{INT8.get(precision, precision)}.tflite",
                  finish=python_metadata if metadata == "repr" else None, prepare=calibration)


def onnx_file(folder: Path, weights: Path, imgsz: int = 320, nms: bool = False, half: bool = False,
              dynamic: bool = False) -> Path:
    """``weights`` exported by ``yolo export format=onnx`` with these arguments, built once per folder."""
    flags = "".join(f"-{k}" for k, v in (("nms", nms), ("half", half), ("dynamic", dynamic)) if v)
    request = {"format": "onnx", "imgsz": imgsz, "nms": nms, "half": half, "dynamic": dynamic}
    return _built(folder, f"{Path(weights).stem}-{imgsz}{flags}.onnx", weights, request, f"{Path(weights).stem}.onnx")


def tiny_onnx(path: Path, metadata: dict, dynamic: bool = False, op_domain: str = "") -> Path:
    """A one-node ONNX model (Identity, or an op of another domain) with these metadata_props."""
    import onnx
    from onnx import TensorProto, helper

    dims = ["batch", 3, "height", "width"] if dynamic else [1, 3, 32, 32]
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("output0", TensorProto.FLOAT, dims)
    node = helper.make_node("Identity" if not op_domain else "Mystery", ["images"], ["output0"], domain=op_domain)
    opsets = [helper.make_opsetid("", 18)] + ([helper.make_opsetid(op_domain, 1)] if op_domain else [])
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=opsets)
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))
    return path


if __name__ == "__main__":
    _child(sys.argv[1])
