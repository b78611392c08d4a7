"""The .tflite files users already have: Ultralytics' TensorFlow export of 8.1-8.3 (ONNX ->
onnx2tf, input NHWC, boxes as fractions of the input), made here from the official
checkpoints. Ultralytics 8.4.190 still runs that chain for ``format="saved_model"`` and keeps
its float32 and float16 .tflite by-products, and with int8=True its int8 ones, calibrated here
on synthetic scenes (no dataset is offline); its ``tf_wrapper`` gives the heads the old
export's normalized outputs. ``python_metadata`` rewrites
the appended metadata as 8.1-8.3 wrote it: one text file, Python's repr of the dict.

``legacy_tflite(folder, weights, imgsz, nms, precision, metadata)`` -> the file, built once
per folder (about 40 s for an n model at 320 px on two cores).
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
    from ultralytics.utils.export.tensorflow import tf_wrapper

    yolo = YOLO(request["weights"])
    # The heads of the old format=tflite export: boxes and keypoints as fractions of the input
    # (8.4's saved_model export keeps pixels, its LiteRT export normalizes in its own wrapper).
    tf_wrapper(yolo.model)
    int8 = {"int8": True, "data": request["data"], "fraction": 1.0} if request["data"] else {}
    yolo.export(format="saved_model", imgsz=request["imgsz"], nms=request["nms"], **int8)


def python_metadata(data: bytes) -> bytes:
    """A .tflite with its appended metadata.json turned into 8.1-8.3's temp_meta.txt (repr)."""
    start = data.rfind(b"PK\x03\x04")
    metadata = json.loads(zipfile.ZipFile(io.BytesIO(data[start:])).read("metadata.json"))
    metadata["names"] = {int(k): v for k, v in metadata["names"].items()}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("temp_meta.txt", repr(metadata))
    return data[:start] + out.getvalue()


def legacy_tflite(folder: Path, weights: Path, imgsz: int = 320, nms: bool = False, precision: str = "float32",
                  metadata: str = "json", classify: bool = False) -> Path:
    """``weights``' legacy .tflite (``precision``: float32, float16, int8 or full_integer) with NMS inside or not,
    its metadata as metadata.json ("json") or as 8.1-8.3's repr ("repr"); ``classify``: the
    weights are a classifier's (int8 calibrates it on a folder of class folders)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{Path(weights).stem}-{imgsz}{'-nms' if nms else ''}_{precision}{'-repr' if metadata == 'repr' else ''}.tflite"
    out = folder / name
    with FileLock(folder / f"{name}.lock"):
        if out.is_file():
            return out
        with tempfile.TemporaryDirectory(prefix="legacy-tflite-") as tmp:
            work = Path(tmp)
            shutil.copy(weights, work / Path(weights).name)
            data = None
            if precision in INT8:   # calibration images: synthetic scenes (no dataset is offline)
                from converters.scenes import dataset

                scenes = "classify" if classify else "segment"   # a classifier calibrates on a folder
                data = str(dataset.write(scenes, work / "scenes", CALIBRATION, CALIBRATION, imgsz))
            request = {"weights": Path(weights).name, "imgsz": imgsz, "nms": nms, "data": data}
            (work / "request.json").write_text(json.dumps(request))
            proc = subprocess.run([sys.executable, "-m", "harness.legacy_tflite", str(work / "request.json")],
                                  cwd=work, env=export_env(work), capture_output=True, text=True)
            made = work / f"{Path(weights).stem}_saved_model" / f"{Path(weights).stem}_{INT8.get(precision, precision)}.tflite"
            if proc.returncode != 0 or not made.is_file():
                raise RuntimeError(f"legacy export failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            data = made.read_bytes()
            out.write_bytes(python_metadata(data) if metadata == "repr" else data)
    return out


if __name__ == "__main__":
    _child(sys.argv[1])
