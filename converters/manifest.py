"""manifest.json: the one description of a built model that pages, API and index read.
Its schema is modelcontract/manifest.schema.json; ``write`` refuses a manifest that breaks it."""
from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from modelcontract import manifest as contract
from modelcontract.manifest import MANIFEST, SCHEMA_VERSION  # noqa: F401 - the converters' names

from .errors import ConverterError

# Tools whose versions change the produced files; recorded beside every artifact.
_TOOLS = ("tensorflow-cpu", "tensorflowjs", "tf_keras", "torch", "ultralytics", "onnx2tf",
          "onnx", "mediapipe", "ai-edge-litert", "numpy")


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tool_versions() -> dict[str, str]:
    out = {}
    for dist in _TOOLS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def file_sizes(folder: Path) -> dict[str, int]:
    """Relative path -> bytes for every file in a model folder (manifest excluded)."""
    return {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def litert_artifacts(manifest: dict) -> dict:
    """The .tflite files the browser can run with LiteRT.js (the server's very files):
    part -> {"path": relative to the model folder, "bytes"}. Parts are "model" for a
    one-graph model, else the server's keys (e.g. handpose's detector_full)."""
    server = manifest.get("server") or {}
    paths = dict(server.get("models") or {})
    if server.get("model"):
        paths["model"] = server["model"]
    files = manifest.get("files") or {}
    return {part: {"path": path, "bytes": files.get(path)} for part, path in paths.items() if path in files}


def file_digests(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 for the same files as ``file_sizes``: the server checks each
    model's files against both before it loads them (server/manifests.py verify_files)."""
    return {name: sha256_file(Path(folder) / name) for name in file_sizes(folder)}


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def write(folder: Path, manifest: dict) -> Path:
    """Validate, then write: a build whose manifest breaks the schema installs nothing."""
    try:
        contract.validate(manifest)
    except contract.InvalidManifest as exc:
        raise ConverterError(f"the built manifest does not match {contract.SCHEMA_PATH.name}: {exc}; "
                             "nothing was installed", "fix the family's build(), or describe the new field "
                             "in modelcontract/manifest.schema.json") from None
    path = Path(folder) / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return path


def read(folder: Path) -> dict | None:
    path = Path(folder) / MANIFEST
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
