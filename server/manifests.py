"""Installed models = folders under MODELS_DIR that hold a manifest.json."""
from __future__ import annotations

import json
from pathlib import Path

from flask import current_app

MANIFEST = "manifest.json"

# How to install each family, shown by pages whose model is missing.
INSTALL_HINTS = {
    "detect": "make models   (or: .venv/bin/python -m converters yolov5n --weights ../shared/models/yolov5n.pt)",
    "classify": "make models   (or: .venv/bin/python -m converters efficientnet-lite0)",
    "handpose": "make models   (or: .venv/bin/python -m converters handpose)",
}


def models_dir() -> Path:
    return Path(current_app.config["MODELS_DIR"])


def has_random_weights(manifest: dict) -> bool:
    """Built with --weights none (or an architecture file): runs, but predicts nothing real."""
    source = manifest.get("source") or {}
    return str(source.get("sha256") or "").startswith("random") or source.get("kind") == "random"


def preference(manifest: dict) -> tuple:
    """Pickers and API defaults: real weights before random ones, fp32 before quantised."""
    return has_random_weights(manifest), manifest.get("quantization", "none") != "none", manifest["id"]


def load_all(folder: Path | None = None) -> list[dict]:
    """Every readable manifest, in preference order. Half-built temp folders start with '.'."""
    folder = folder or models_dir()
    if not folder.is_dir():
        return []
    found = []
    for child in sorted(folder.iterdir()):
        if child.name.startswith(".") or not (child / MANIFEST).is_file():
            continue
        try:
            manifest = json.loads((child / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        if manifest.get("id") == child.name:
            found.append(manifest)
    return sorted(found, key=preference)


def load(model_id: str) -> dict | None:
    for manifest in load_all():
        if manifest["id"] == model_id:
            return manifest
    return None


def browser_bytes(manifest: dict) -> int:
    """Download size for a page: the files of the TF.js graph folders only."""
    folders = {path.rsplit("/", 1)[0] + "/" for path in (manifest.get("tfjs") or {}).values()}
    return sum(size for name, size in manifest.get("files", {}).items()
               if any(name.startswith(folder) for folder in folders))


def summary(manifest: dict) -> dict:
    """What pages, the index and /readyz need: no labels or per-file detail."""
    parity = manifest.get("parity", {})
    return {
        "id": manifest["id"],
        "name": manifest.get("name"),
        "title": manifest.get("title", manifest["id"]),
        "task": manifest.get("task"),
        "quantization": manifest.get("quantization", "none"),
        "input": manifest.get("input"),
        "outputs": {"format": manifest.get("outputs", {}).get("format")},
        "tfjs": manifest.get("tfjs"),
        "bytes": browser_bytes(manifest),
        "parity_passed": parity.get("passed"),
        "random_weights": has_random_weights(manifest),
        "source": {"kind": manifest.get("source", {}).get("kind")},
        "created": manifest.get("created"),
    }


def by_task(task: str) -> list[dict]:
    return [m for m in load_all() if m.get("task") == task]
