"""Installed models = folders under MODELS_DIR that hold a manifest.json."""
from __future__ import annotations

import hashlib
import json
import stat
import threading
from pathlib import Path, PurePosixPath

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


# ---------------------------------------------------------------------------- integrity

def model_path(folder: Path, relative: str) -> Path | None:
    """The regular file ``relative`` (a manifest's name) inside ``folder``, or None: no
    absolute or ``..`` paths, no symlink that leads out of the folder (the folder itself may
    be a link), nothing but a regular file."""
    if not isinstance(relative, str) or not relative or "\\" in relative or "\x00" in relative:
        return None
    parts = PurePosixPath(relative).parts
    if PurePosixPath(relative).is_absolute() or any(p in (".", "..") for p in parts):
        return None
    try:
        base = Path(folder).resolve(strict=True)
        path = (base / relative).resolve(strict=True)
        mode = path.stat().st_mode
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    if base not in path.parents or not stat.S_ISREG(mode):
        return None
    return path


def server_artifacts(manifest: dict) -> list[str]:
    """The files the server loads: ``server.model`` or every ``server.models`` value."""
    server = manifest.get("server") or {}
    names = list((server.get("models") or {}).values()) if isinstance(server.get("models"), dict) else []
    if server.get("model"):
        names.append(server["model"])
    return names


_digests: dict[tuple, str] = {}  # (path, size, mtime_ns, inode) -> sha256: each file hashed once
_digests_lock = threading.Lock()


def _sha256(path: Path, st) -> str:
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    with _digests_lock:
        known = _digests.get(key)
    if known is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        known = h.hexdigest()
        with _digests_lock:
            _digests[key] = known
    return known


def verify_files(manifest: dict, folder: Path) -> list[str]:
    """What is wrong with a model's files (empty: nothing). Every file the manifest lists
    must be a regular file inside the folder, of the recorded size and, where the manifest
    records it (``files_sha256``, converters since this check), of the recorded sha256.
    Manifests older than ``files_sha256`` are checked by size only (README "Readiness")."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return ["the manifest lists no files"]
    digests = manifest.get("files_sha256")
    problems = [f"{name}: the server loads it but the manifest does not list it"
                for name in server_artifacts(manifest) if name not in files]
    for name, size in files.items():
        path = model_path(folder, name)
        if path is None:
            problems.append(f"{name}: missing, not a regular file, or outside the model folder")
            continue
        st = path.stat()
        if st.st_size != size:
            problems.append(f"{name}: {st.st_size} bytes, the manifest says {size}")
        elif isinstance(digests, dict):
            if name not in digests:
                problems.append(f"{name}: no sha256 in the manifest")
            elif _sha256(path, st) != digests[name]:
                problems.append(f"{name}: its sha256 differs from the manifest's")
    return problems


def input_problem(manifest: dict) -> str | None:
    """The server's preprocessing needs ``input.shape`` = [1, H, W, 3]."""
    spec = manifest.get("input")
    if not isinstance(spec, dict):
        return "the manifest has no 'input' (the model's input contract)"
    shape = spec.get("shape")
    if not (isinstance(shape, list) and len(shape) == 4
            and all(isinstance(v, int) and v > 0 for v in shape)):
        return f"the manifest's input.shape must be [1, height, width, 3], got {shape!r}"
    return None
