"""Static bytes that are not in static/: npm runtimes (whitelisted) and converted models.

Both routes serve only names they know: the vendor table below, and the files a model's
manifest lists. So there is no directory listing and no path to traverse.
"""
from __future__ import annotations

import json
from pathlib import Path

from flask import Blueprint, abort, send_file

from modelcontract import manifest as contract

from . import config, manifests

vendor_bp = Blueprint("vendor", __name__, url_prefix="/vendor")
models_bp = Blueprint("models", __name__, url_prefix="/models")

_TFJS = "@tensorflow/tfjs/dist/"
_WASM = "@tensorflow/tfjs-backend-wasm/dist/"
_MEDIAPIPE = "@mediapipe/hands/"
_LITERT = "@litertjs/core/"

# public path under /vendor/ -> path under node_modules/ (pinned in package-lock.json)
VENDOR_FILES = {
    # ES2017 builds throughout: the ES5 ones carry regenerator/core-js, which evaluate
    # strings (our CSP has no 'unsafe-eval'), and ES5 and ES2017 classes don't mix.
    "tfjs/tf.es2017.min.js": _TFJS + "tf.es2017.min.js",
    "tfjs-wasm/tf-backend-wasm.es2017.min.js": _WASM + "tf-backend-wasm.es2017.min.js",
    # setWasmPaths('/vendor/tfjs-wasm/') makes the backend pick one of these three.
    "tfjs-wasm/tfjs-backend-wasm.wasm": _WASM + "tfjs-backend-wasm.wasm",
    "tfjs-wasm/tfjs-backend-wasm-simd.wasm": _WASM + "tfjs-backend-wasm-simd.wasm",
    "tfjs-wasm/tfjs-backend-wasm-threaded-simd.wasm": _WASM + "tfjs-backend-wasm-threaded-simd.wasm",
    "tfjs-webgpu/tf-backend-webgpu.es2017.min.js": "@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.es2017.min.js",
    "hand-pose-detection/hand-pose-detection.min.js":
        "@tensorflow-models/hand-pose-detection/dist/hand-pose-detection.min.js",
    # LiteRT.js: its ES module, the one module it imports (mapped by IMPORT_MAP), and the
    # four WASM builds loadLiteRt() picks from (no relaxed SIMD / default / threaded / JSPI;
    # JSPI is the build that runs a graph with CPU-only ops on WebGPU: litert.js).
    "litertjs/core/index.js": _LITERT + "dist/index.js",
    "litertjs/wasm-utils/index.js": "@litertjs/wasm-utils/dist/index.js",
    **{f"litertjs/wasm/{name}.{ext}": f"{_LITERT}wasm/{name}.{ext}"
       for name in ("litert_wasm_compat_internal", "litert_wasm_internal", "litert_wasm_threaded_internal",
                     "litert_wasm_jspi_internal")
       for ext in ("js", "wasm")},
    # ONNX Runtime Web, for an .onnx a visitor gives a page: its ES module and the WASM build it
    # loads (the JSEP build runs both its WASM and WebGPU backends).
    "ort/ort.min.mjs": "onnxruntime-web/dist/ort.min.mjs",
    **{f"ort/ort-wasm-simd-threaded.jsep.{ext}": f"onnxruntime-web/dist/ort-wasm-simd-threaded.jsep.{ext}"
       for ext in ("mjs", "wasm")},
    # js-yaml: the metadata.yaml of an Ultralytics TF.js folder a visitor drops on a page.
    "js-yaml/js-yaml.mjs": "js-yaml/dist/js-yaml.mjs",
    # MediaPipe's own runtime for the hand-pose benchmark's peer (solutionPath).
    **{f"mediapipe-hands/{name}": _MEDIAPIPE + name for name in (
        "hands.js", "hands.binarypb", "hands_solution_packed_assets.data",
        "hands_solution_packed_assets_loader.js", "hands_solution_simd_wasm_bin.data",
        "hands_solution_simd_wasm_bin.js", "hands_solution_simd_wasm_bin.wasm",
        "hands_solution_wasm_bin.js", "hands_solution_wasm_bin.wasm",
        "hand_landmark_full.tflite", "hand_landmark_lite.tflite")},
}

# @litertjs/core imports the bare name "@litertjs/wasm-utils", model-file.js "js-yaml" (Node
# finds it in node_modules): the pages map them with this import map (inline JSON;
# security.py allows exactly this text by its hash).
IMPORT_MAP = json.dumps({"imports": {"@litertjs/wasm-utils": "/vendor/litertjs/wasm-utils/index.js",
                                     "js-yaml": "/vendor/js-yaml/js-yaml.mjs"}})

MIMETYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".wasm": "application/wasm",
    ".json": "application/json",
    ".bin": "application/octet-stream",
    ".data": "application/octet-stream",
    ".binarypb": "application/octet-stream",
    ".tflite": "application/octet-stream",
}


def _send(path: Path, cache_control: str):
    # conditional + ETag: a reload revalidates (304) instead of downloading again.
    response = send_file(path, mimetype=MIMETYPES.get(path.suffix, "application/octet-stream"),
                         conditional=True, etag=True, max_age=None)
    response.headers["Cache-Control"] = cache_control
    return response


@vendor_bp.get("/<path:name>")
def vendor_file(name: str):
    relative = VENDOR_FILES.get(name)
    if relative is None:
        abort(404, description=f"no vendored file {name!r}")
    path = config.settings().node_modules / relative
    if not path.is_file():
        abort(404, description=f"{name} is not installed; run `npm ci`")
    # Pinned versions: safe to cache for a day, revalidated by ETag afterwards.
    return _send(path, "public, max-age=86400")


@models_bp.get("/<model_id>/<path:filename>")
def model_file(model_id: str, filename: str):
    model = manifests.registry().get(model_id)
    if model is None:
        abort(404, description=f"model {model_id!r} is not installed")
    if model.error:  # its file list can't be trusted
        abort(503, description=f"model {model_id!r} cannot serve: {model.error}; {manifests.REBUILD}")
    manifest = model.manifest
    if filename != contract.MANIFEST and filename not in manifest.get("files", {}):
        abort(404, description=f"model {model_id!r} has no file {filename!r}")
    # Listed is not enough: a manifest could list '../x' or a symlink out of the folder.
    path = contract.model_path(model.folder, filename)
    if path is None:
        abort(404, description=f"model {model_id!r} has no regular file {filename!r} inside its folder")
    # Shard names are not content-hashed and a rebuild rewrites them: always revalidate.
    return _send(path, "no-cache")


@vendor_bp.app_context_processor
def import_map():
    return {"import_map": IMPORT_MAP}
