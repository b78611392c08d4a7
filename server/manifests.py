"""Installed models = folders under MODELS_DIR that hold a manifest.json.

``Manifests`` is the server's only source of manifests: ``init_app`` (in create_app) gives
each app one, and pages, /models/<id>/<file>, the API, /readyz and the runner registry
(server/inference) read it. It keeps each model's parsed, validated manifest and reads one
again only when it changed: each access lists the models folder and stats each
manifest.json (through the install symlink), so a rebuild (a new build folder: a new inode)
or a removal shows at the next request, without a restart, at the cost of a few stat calls.

A manifest that is not JSON, has an unknown schema_version or breaks the schema
(modelcontract/manifest.schema.json) makes its model ``broken``: listed with its error in
/readyz and /api/v1/models, 503 for that model only; the others keep serving.
"""
from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from flask import current_app

from modelcontract import manifest as contract
from modelcontract import paths
from modelcontract.manifest import MANIFEST

EXTENSION = "datarailroad.manifests"
BUILD_SHOWN_SECONDS = 1800  # a build of ours takes minutes; an unlinked folder older than this was killed

# How to install each family, shown by pages whose model is missing.
INSTALL_HINTS = {
    "detect": "make models   (or: .venv/bin/python -m converters yolov5n --weights ../shared/models/yolov5n.pt)",
    "classify": "make models   (or: .venv/bin/python -m converters efficientnet-lite0)",
    "handpose": "make models   (or: .venv/bin/python -m converters handpose)",
    "segment": "make models   (or: .venv/bin/python -m converters yolo --weights yolo11n-seg.pt)",
    "pose": "make models   (or: .venv/bin/python -m converters yolo --weights yolo11n-pose.pt)",
    "obb": "make models   (or: .venv/bin/python -m converters yolo --weights yolo26n-obb.pt)",
}
REBUILD = "rebuild it with the converter (make models, or python -m converters ... --force)"


def has_random_weights(manifest: dict) -> bool:
    """Built with --weights none (or an architecture file): runs, but predicts nothing real."""
    source = manifest.get("source") or {}
    return str(source.get("sha256") or "").startswith("random") or source.get("kind") == "random"


# /detect's picker groups, in order: what a model finds, by its outputs.format (other tasks'
# models are all of one group).
GROUPS = {"yolo-seg": "segment", "yolo-pose": "pose", "yolo-obb": "obb", "yolo-semantic": "semantic",
          "yolo-depth": "depth"}
GROUP_LABELS = {"detect": "Objects", "segment": "Segments (instance masks)", "pose": "People (pose)",
                "obb": "Oriented boxes (aerial)", "semantic": "Class maps (semantic segmentation)",
                "depth": "Depth maps"}
# converters/ultralytics_yolo/official.py KIND: a release checkpoint, sha256-checked
OFFICIAL_KIND = "official Ultralytics checkpoint"


def group(manifest: dict) -> str:
    """"detect", "segment", "pose", "obb", "semantic" or "depth" for a detect-page model; else its task."""
    fmt = (manifest.get("outputs") or {}).get("format")
    return GROUPS.get(fmt, "detect" if manifest.get("task") == "detect" else manifest.get("task"))


def is_official(manifest: dict) -> bool:
    return (manifest.get("source") or {}).get("kind") == OFFICIAL_KIND


def preference(manifest: dict) -> tuple:
    """Pickers and API defaults: real weights before random ones, fp32 before quantised, plain
    detectors before the other YOLO tasks, official checkpoints first within each."""
    order = list(GROUP_LABELS)
    found = group(manifest)
    rank = order.index(found) if found in order else 0
    return (has_random_weights(manifest), manifest.get("quantization", "none") != "none", rank,
            not is_official(manifest), manifest["id"])


# ---------------------------------------------------------------------------- the registry

@dataclass(frozen=True)
class Model:
    """One folder with a manifest.json: its valid ``manifest``, or the ``error`` that makes it
    broken. ``stamp`` identifies the manifest file read (device, inode, mtime, size). The
    manifest is shared by every request that reads it: read it, never change it."""
    id: str
    folder: Path
    stamp: tuple
    manifest: dict | None = None
    error: str | None = None


def read_model(folder: Path, stamp: tuple = ()) -> Model:
    """A model folder's manifest, validated, and checked to name its own folder."""
    try:
        manifest = contract.read(folder)
    except contract.InvalidManifest as exc:
        return Model(folder.name, folder, stamp, error=f"its {MANIFEST} is invalid: {exc}")
    except OSError as exc:
        return Model(folder.name, folder, stamp, error=f"its {MANIFEST} can't be read: {exc.strerror or exc}")
    if manifest["id"] != folder.name:
        return Model(folder.name, folder, stamp,
                     error=f"its {MANIFEST} says id {manifest['id']!r}, but its folder is {folder.name!r}")
    return Model(folder.name, folder, stamp, manifest=manifest)


class Manifests:
    """The models folder's manifests, cached per manifest file and re-read when one changes."""

    def __init__(self, models_dir: Path):
        self.models_dir = Path(models_dir)
        self._models: dict[str, Model] = {}
        self._lock = threading.Lock()

    def _stamps(self) -> dict[str, tuple]:
        """Folder name -> its manifest's stamp. Dot folders (builds, temp) are not models."""
        try:
            names = os.listdir(self.models_dir)
        except OSError:
            return {}
        stamps = {}
        for name in names:
            if name.startswith("."):
                continue
            try:
                st = os.stat(self.models_dir / name / MANIFEST)
            except OSError:  # no manifest: not a model folder (or a dangling link)
                continue
            if stat.S_ISREG(st.st_mode):
                stamps[name] = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        return stamps

    def refresh(self) -> dict[str, Model]:
        """The current models, reading only the manifests whose stamp changed."""
        stamps = self._stamps()
        models = self._models
        if stamps.keys() == models.keys() and all(models[n].stamp == s for n, s in stamps.items()):
            return models
        with self._lock:
            known = self._models
            self._models = {name: known[name] if name in known and known[name].stamp == st
                            else read_model(self.models_dir / name, st)
                            for name, st in sorted(stamps.items())}
            return self._models

    def models(self) -> list[Model]:
        """Every model folder, valid or broken, by id."""
        return list(self.refresh().values())

    def get(self, model_id: str) -> Model | None:
        return self.refresh().get(model_id)

    def manifest(self, model_id: str) -> dict | None:
        """The valid manifest of ``model_id``; None when absent or broken."""
        model = self.get(model_id)
        return model.manifest if model else None

    def installed(self) -> list[dict]:
        """Every valid manifest, in preference order."""
        return sorted((m.manifest for m in self.models() if m.manifest is not None), key=preference)

    def broken(self) -> list[Model]:
        return [m for m in self.models() if m.error]

    def building(self, now: float | None = None) -> list[str]:
        """Ids a converter is building now: build folders in <models>/.builds
        (modelcontract.paths.build_folder) that no model links to yet, started less than
        BUILD_SHOWN_SECONDS ago (an older one was a killed build's)."""
        import time

        builds = self.models_dir / paths.BUILDS
        try:
            names = os.listdir(builds)
        except OSError:
            return []
        now = time.time() if now is None else now
        ids = set()
        for name in names:
            parsed = paths.build_folder(name)
            if parsed is None or not 0 <= now - parsed[1] < BUILD_SHOWN_SECONDS:
                continue
            link = self.models_dir / parsed[0]
            if not (link.is_symlink() and os.path.realpath(link) == os.path.realpath(builds / name)):
                ids.add(parsed[0])
        return sorted(ids)


def init_app(app) -> Manifests:
    """Give the app its registry (create_app calls this, as flaskr's db.init_app)."""
    registry = app.extensions[EXTENSION] = Manifests(app.config["MODELS_DIR"])
    return registry


def registry(app=None) -> Manifests:
    return (app or current_app).extensions[EXTENSION]


def models_dir() -> Path:
    return registry().models_dir


def load_all(folder: Path | None = None) -> list[dict]:
    """Every valid manifest, in preference order: the app's registry, or a one-off read of
    another ``folder``."""
    if folder is None or Path(folder) == models_dir():
        return registry().installed()
    return Manifests(folder).installed()


def load(model_id: str) -> dict | None:
    return registry().manifest(model_id)


def by_task(task: str) -> list[dict]:
    return [m for m in load_all() if m.get("task") == task]


def broken_summary(model: Model) -> dict:
    """A broken model as lists show it: its id and why (its manifest is not to be trusted)."""
    return {"id": model.id, "task": None, "status": "broken", "error": model.error}


def summary(manifest: dict) -> dict:
    """What pages, the index and /readyz need: no labels or per-file detail."""
    parity = manifest.get("parity", {})
    return {
        "id": manifest["id"],
        "name": manifest.get("name"),
        "title": manifest.get("title", manifest["id"]),
        "task": manifest.get("task"),
        "group": group(manifest),
        "official": is_official(manifest),
        "quantization": manifest.get("quantization", "none"),
        "input": manifest.get("input"),
        "outputs": {"format": manifest.get("outputs", {}).get("format")},
        "tfjs": manifest.get("tfjs"),
        "bytes": contract.browser_bytes(manifest),
        "parity_passed": parity.get("passed"),
        "random_weights": has_random_weights(manifest),
        "source": {"kind": manifest.get("source", {}).get("kind")},
        "created": manifest.get("created"),
    }


# ---------------------------------------------------------------------------- integrity

_digests: dict[tuple, str] = {}  # (path, size, mtime_ns, inode) -> sha256: each file hashed once
_digests_lock = threading.Lock()


def _sha256(path: Path) -> str:
    """contract.sha256_file, remembered per file version: a model is verified again at each
    load and /readyz, its files hashed once."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    with _digests_lock:
        known = _digests.get(key)
    if known is None:
        known = contract.sha256_file(path)
        with _digests_lock:
            _digests[key] = known
    return known


def verify_files(manifest: dict, folder: Path) -> list[str]:
    """What is wrong with a model's files (empty: nothing): contract.verify_files, hashing
    through the cache."""
    return contract.verify_files(manifest, folder, sha256=_sha256)


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
