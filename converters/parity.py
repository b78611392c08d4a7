"""Parity: run the produced TF.js files in the real TF.js runtime (Node) and compare
with the source framework's outputs on the same real photo."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .errors import ConverterError

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "run_tfjs.mjs"

_NUMPY_DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.uint8}


def run_tfjs(model_json: Path, inputs: dict[str, np.ndarray], outputs: list[str] | None = None,
             backend: str = "wasm", timeout: float = 600) -> dict:
    """Execute ``model_json`` in Node; returns {"outputs": {name: array}, "ms", "backend", "version"}."""
    node = shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@tensorflow" / "tfjs").is_dir():
        raise ConverterError("the TF.js runtime for parity is missing (node or node_modules)",
                             "run `npm ci` in the project root")
    with tempfile.TemporaryDirectory(prefix="tfjs-run-") as tmp:
        tmp = Path(tmp)
        specs = []
        for i, (name, array) in enumerate(inputs.items()):
            array = np.ascontiguousarray(array)
            dtype = "int32" if array.dtype.kind in "iu" else "float32"
            file = tmp / f"input_{i}.bin"
            array.astype(_NUMPY_DTYPES[dtype]).tofile(file)
            specs.append({"name": name, "shape": list(array.shape), "dtype": dtype, "file": str(file)})
        request = {"model": str(Path(model_json).resolve()), "backend": backend,
                   "inputs": specs, "outputs": outputs, "out_dir": str(tmp)}
        (tmp / "request.json").write_text(json.dumps(request))
        proc = subprocess.run([node, str(RUNNER), str(tmp / "request.json")], cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"TF.js runtime failed on {model_json}:\n{proc.stderr[-4000:]}")
        result = json.loads((tmp / "result.json").read_text())
        arrays = {}
        for out in result["outputs"]:
            data = np.fromfile(out["file"], dtype=_NUMPY_DTYPES.get(out["dtype"], np.float32))
            arrays[out["name"]] = data.reshape(out["shape"])
        return {"outputs": arrays, "ms": result["ms"], "backend": result["backend"],
                "version": result["version"]}


def compare(reference: np.ndarray, candidate: np.ndarray) -> dict:
    """max |a-b| and that relative to max |a| (the parity figure the manifest records)."""
    reference = np.asarray(reference, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64)
    if reference.shape != candidate.shape:
        raise ValueError(f"shape mismatch: reference {reference.shape} vs {candidate.shape}")
    max_abs = float(np.max(np.abs(reference - candidate))) if reference.size else 0.0
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    return {"max_abs": max_abs, "relative": max_abs / scale if scale > 0 else max_abs}


# Parity targets from the spec: max|a-b| / max|a| per quantisation (uint8 is recorded only).
TARGETS = {"none": 1e-4, "float16": 1e-2, "uint8": None}
