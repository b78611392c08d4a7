"""Writing manifest.json: the one description of a built model that pages, API and index read.
Reading it, and what it names (files, digests, server and LiteRT parts), is
modelcontract/manifest.py, shared with the server; ``write`` refuses a manifest that breaks
its schema (modelcontract/manifest.schema.json)."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from modelcontract import manifest as contract

from .errors import ConverterError

# Tools whose versions change the produced files; recorded beside every artifact.
_TOOLS = ("tensorflow-cpu", "tensorflowjs", "tf_keras", "torch", "ultralytics", "litert-torch", "onnx2tf",
          "onnx", "mediapipe", "ai-edge-litert", "numpy")


def tool_versions() -> dict[str, str]:
    out = {}
    for dist in _TOOLS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


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
    path = Path(folder) / contract.MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return path
