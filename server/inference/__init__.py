"""Server-side inference: one runner per task, built from an installed model folder
(manifest + LiteRT artifact), loaded once per worker process and shared by its threads.

    registry(app).get("detect", "yolov5n") -> DetectRunner

Runners are cached per model id and manifest version (mtime + size), so a rebuilt model
is picked up by the next request. Nothing loads at import or in create_app(): gunicorn
preloads the app in the master, and each worker loads its own interpreters on first use.
"""
from __future__ import annotations

import threading
from pathlib import Path

from .. import manifests
from .base import ModelUnavailable, ParameterError, Runner
from .classify import ClassifyRunner
from .detect import DetectRunner
from .hands import HandsRunner

RUNNERS: dict[str, type[Runner]] = {"detect": DetectRunner, "classify": ClassifyRunner, "handpose": HandsRunner}
EXTENSION = "datarailroad.inference"

__all__ = ["Registry", "registry", "UnknownModel", "WrongTask", "NoModel", "ModelUnavailable", "ParameterError",
           "RUNNERS"]


class UnknownModel(LookupError):
    def __init__(self, model_id: str, installed: list[str]):
        super().__init__(f"model {model_id!r} is not installed"
                         + (f"; installed for this task: {', '.join(installed)}" if installed else ""))


class WrongTask(ValueError):
    pass


class NoModel(LookupError):
    """No model of the task is installed (-> 503 with the install command)."""


def is_default_candidate(manifest: dict) -> bool:
    return manifest.get("quantization", "none") == "none" and bool(manifest.get("server"))


class Registry:
    def __init__(self, models_dir: Path, runners: dict | None = None):
        self.models_dir = Path(models_dir)
        # task -> runner class, or a factory of the same signature (server/cluster: remote runners)
        self.runners = runners or RUNNERS
        self._runners: dict[str, tuple[tuple, Runner]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _version(self, model_id: str) -> tuple:
        stat = (self.models_dir / model_id / manifests.MANIFEST).stat()
        return stat.st_mtime_ns, stat.st_size

    def choose(self, task: str, model_id: str | None) -> dict:
        installed = manifests.load_all(self.models_dir)
        of_task = [m for m in installed if m.get("task") == task]
        if model_id is None:
            candidates = [m for m in of_task if is_default_candidate(m)] or [m for m in of_task if m.get("server")]
            if not candidates:
                hint = manifests.INSTALL_HINTS.get(task)
                raise NoModel(f"no {task} model is installed on the server"
                              + (f"; install one with: {hint}" if hint else ""))
            return candidates[0]
        for m in installed:
            if m["id"] == model_id:
                if m.get("task") != task:
                    raise WrongTask(f"model {model_id!r} is a {m.get('task')} model, not {task}")
                return m
        raise UnknownModel(model_id, [m["id"] for m in of_task])

    def get(self, task: str, model_id: str | None = None) -> Runner:
        manifest = self.choose(task, model_id)
        mid = manifest["id"]
        if not manifest.get("server"):
            raise ModelUnavailable(f"model {mid!r} has no server artifact in its manifest; "
                                   "rebuild it with the converter")
        try:
            version = self._version(mid)
        except OSError as exc:
            raise ModelUnavailable(f"model {mid!r} disappeared: {exc}") from None
        cached = self._runners.get(mid)
        if cached and cached[0] == version:
            return cached[1]
        with self._guard:
            lock = self._locks.setdefault(mid, threading.Lock())
        with lock:  # one load per model, even when the first requests arrive together
            cached = self._runners.get(mid)
            if cached and cached[0] == version:
                return cached[1]
            try:
                runner = self.runners[task](manifest, self.models_dir / mid)
            except ModelUnavailable:
                raise
            except (KeyError, ValueError, TypeError, IndexError, StopIteration) as exc:
                raise ModelUnavailable(f"model {mid!r}: its manifest does not describe a usable {task} model "
                                       f"({type(exc).__name__}: {exc})") from None
            self._runners[mid] = (version, runner)
            return runner

    def loaded(self) -> list[str]:
        return sorted(self._runners)


_app_lock = threading.Lock()


def registry(app) -> Registry:
    """The app's registry (created on first use, per process)."""
    folder = Path(app.config["MODELS_DIR"])
    reg = app.extensions.get(EXTENSION)
    if reg is None or reg.models_dir != folder:
        with _app_lock:
            reg = app.extensions.get(EXTENSION)
            if reg is None or reg.models_dir != folder:
                reg = app.extensions[EXTENSION] = Registry(folder, app.config.get("INFERENCE_RUNNERS"))
    return reg
