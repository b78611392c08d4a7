"""Server-side inference: one runner per task, built from an installed model folder
(manifest + LiteRT artifact), loaded once per worker process and shared by its threads.

    registry(app).get("detect", "yolov5n") -> DetectRunner

Manifests come from the app's manifest registry (server/manifests.py ``Manifests``), the
server's one source of them. The runners get the registry's settings (the app's, or a
cluster replica's: server/settings.py) for LiteRT's threads, interpreters and batching. Runners are cached per model id and version (the manifest
file's stamp and every listed file's mtime and size), so a rebuilt model is picked up by the
next request. Nothing loads at import or in create_app(): gunicorn preloads the app in the
master, and each worker loads its own interpreters (``preload``, gunicorn.conf.py) before it
takes a request; a model installed later loads on its first use.

Before a model loads, ``check`` verifies it: the manifest's input contract, every listed
file against its recorded size and sha256 (manifests.verify_files), and a trial run of each
.tflite in a child process (litert.trial_load), so a file that would crash LiteRT can't take
the worker down. A model that fails answers 503 for itself only (the failure is remembered
until its files change); so does a model whose manifest is invalid (unknown schema_version,
not JSON, breaking modelcontract/manifest.schema.json). ``status`` reports every model for
/readyz.
"""
from __future__ import annotations

import threading
from pathlib import Path

from modelcontract import manifest as contract

from .. import config, manifests
from ..errors import Problem
from ..settings import Settings, load
from .base import UNAVAILABLE, Runner, model_unavailable, parameter_error
from . import litert
from .classify import ClassifyRunner
from .detect import DetectRunner
from .hands import HandsRunner

RUNNERS: dict[str, type[Runner]] = {"detect": DetectRunner, "classify": ClassifyRunner, "handpose": HandsRunner}
EXTENSION = "datarailroad.inference"

__all__ = ["Registry", "registry", "model_unavailable", "parameter_error", "RUNNERS"]


# The registry's errors are Problems (server/errors.py), status and code as data: the API
# answers them as they are.
def unknown_model(model_id: str, installed: list[str]) -> Problem:
    return Problem(404, "unknown_model", f"model {model_id!r} is not installed"
                   + (f"; installed for this task: {', '.join(installed)}" if installed else ""))


def is_default_candidate(manifest: dict) -> bool:
    return manifest.get("quantization", "none") == "none" and bool(manifest.get("server"))


class Registry:
    def __init__(self, models: manifests.Manifests | Path, runners: dict | None = None,
                 settings: Settings | None = None):
        # The app's manifest registry; a bare folder (a cluster model deployment) gets its own.
        self.manifests = models if isinstance(models, manifests.Manifests) else manifests.Manifests(models)
        self.models_dir = self.manifests.models_dir
        # task -> runner class, or a factory of the same signature (server/cluster: remote runners)
        self.runners = runners or RUNNERS
        self.settings = settings or load()  # handed to every runner
        self.local = runners is None  # LiteRT runs in this process (not on remote runners)
        self._runners: dict[str, tuple[tuple, Runner]] = {}
        self._failures: dict[str, tuple[tuple, str]] = {}  # model id -> (version, why it can't serve)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @staticmethod
    def _version(model: manifests.Model) -> tuple:
        """The manifest file's stamp and each listed file's (mtime, size): changes when any is rebuilt."""
        files = []
        for name in sorted(model.manifest.get("files") or {}):
            try:
                st = (model.folder / name).stat()
                files.append((st.st_mtime_ns, st.st_size))
            except (OSError, ValueError):
                files.append(None)
        return model.stamp, tuple(files)

    def _forget_removed(self) -> None:
        """Drop the runners (and their interpreters) of models no longer installed."""
        present = {m.id for m in self.manifests.models()}
        for mid in [mid for mid in self._runners if mid not in present]:
            self._runners.pop(mid, None)
            self._failures.pop(mid, None)

    def check(self, manifest: dict) -> str | None:
        """Why the model can't serve, or None: its input contract, its files (sizes, sha256),
        and a trial run of each server .tflite in a child process (local runners only)."""
        problem = manifests.input_problem(manifest)
        if problem:
            return problem
        problems = manifests.verify_files(manifest, self.models_dir / manifest["id"])
        if problems:
            return "its files do not match its manifest: " + "; ".join(problems[:5]) \
                + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        if self.local:
            for name in contract.server_artifacts(manifest):
                try:
                    litert.trial_load(self.models_dir / manifest["id"] / name)
                except (litert.LoadError, OSError) as exc:
                    return f"{name}: {exc}"
        return None

    def _unavailable(self, mid: str, version: tuple, why: str) -> Problem:
        self._failures[mid] = (version, why)
        return model_unavailable(f"model {mid!r} cannot serve: {why}; {manifests.REBUILD}")

    def default_ids(self, task: str) -> list[str]:
        """The task's default models in the order the API tries them (503 no_model: none)."""
        of_task = [m for m in self.manifests.installed() if m.get("task") == task]
        candidates = [m for m in of_task if is_default_candidate(m)] or [m for m in of_task if m.get("server")]
        if not candidates:
            hint = manifests.INSTALL_HINTS.get(task)
            raise Problem(503, "no_model", f"no {task} model is installed on the server"
                          + (f"; install one with: {hint}" if hint else ""))
        return [m["id"] for m in candidates]

    def choose(self, task: str, model_id: str | None) -> manifests.Model:
        """The model asked for (or the task's first default), valid: a broken one raises
        503 model_unavailable; a missing one 404 unknown_model (or 503 no_model for the default)."""
        if model_id is None:
            model_id = self.default_ids(task)[0]
        model = self.manifests.get(model_id)
        if model is None:
            raise unknown_model(model_id, [m["id"] for m in self.manifests.installed() if m.get("task") == task])
        if model.error:
            raise model_unavailable(f"model {model_id!r} cannot serve: {model.error}; {manifests.REBUILD}")
        if model.manifest.get("task") != task:
            raise Problem(400, "wrong_task", f"model {model_id!r} is a {model.manifest.get('task')} model, not {task}")
        return model

    def get(self, task: str, model_id: str | None = None) -> Runner:
        """The runner of the model asked for; without one, of the first default that can serve,
        so a broken model installed beside good ones does not take the task down."""
        if model_id is not None:
            return self._runner(self.choose(task, model_id))
        first = None
        for candidate in self.default_ids(task):
            try:
                return self._runner(self.choose(task, candidate))
            except Problem as exc:
                if exc.code != UNAVAILABLE:
                    raise
                first = first or exc
        raise first

    def _runner(self, model: manifests.Model) -> Runner:
        task, mid, manifest = model.manifest["task"], model.id, model.manifest
        if not manifest.get("server"):
            raise model_unavailable(f"model {mid!r} has no server artifact in its manifest; "
                                    "rebuild it with the converter")
        version = self._version(model)
        cached = self._runners.get(mid)
        if cached and cached[0] == version:
            return cached[1]
        with self._guard:
            self._forget_removed()
            lock = self._locks.setdefault(mid, threading.Lock())
        with lock:  # one load per model, even when the first requests arrive together
            cached = self._runners.get(mid)
            if cached and cached[0] == version:
                return cached[1]
            failed = self._failures.get(mid)
            if failed and failed[0] == version:
                raise self._unavailable(mid, version, failed[1])
            problem = self.check(manifest)
            if problem:
                raise self._unavailable(mid, version, problem)
            try:
                runner = self.runners[task](manifest, model.folder, self.settings)
            except Problem as exc:
                if exc.code != UNAVAILABLE:
                    raise
                raise self._unavailable(mid, version, exc.message) from None
            except (KeyError, ValueError, TypeError, IndexError, StopIteration) as exc:
                raise self._unavailable(mid, version, f"its manifest does not describe a usable {task} model "
                                                      f"({type(exc).__name__}: {exc})") from None
            self._failures.pop(mid, None)
            self._runners[mid] = (version, runner)
            return runner

    def preload(self, task: str | None = None) -> list[str]:
        """Load every installed model (of ``task``) that can serve (gunicorn.conf.py: each
        worker, before its first request; a cluster model deployment, its task's); the ids
        loaded. One that can't is left to answer its 503 on use."""
        loaded = []
        for manifest in self.manifests.installed():
            if manifest.get("server") and manifest.get("task") in self.runners and task in (None, manifest["task"]):
                try:
                    self._runner(self.choose(manifest["task"], manifest["id"]))
                except Problem:
                    continue
                loaded.append(manifest["id"])
        return loaded

    def status(self) -> list[dict]:
        """Every model folder for /readyz: a valid manifest's summary with ``status`` ``ready``,
        ``broken`` (with ``error``) or ``browser_only`` (no server artifact: the pages run it,
        the API can't) and ``verified`` ``sha256`` (or ``size`` for older manifests); an
        invalid manifest as ``broken`` with its error only."""
        with self._guard:
            self._forget_removed()
        out = []
        for model in self.manifests.models():
            if model.error:
                out.append(manifests.broken_summary(model))
                continue
            manifest = model.manifest
            entry = {**manifests.summary(manifest),
                     "verified": "sha256" if isinstance(manifest.get("files_sha256"), dict) else "size"}
            if not manifest.get("server"):
                out.append({**entry, "status": "browser_only"})
                continue
            version = self._version(model)
            failed = self._failures.get(model.id)
            problem = failed[1] if failed and failed[0] == version else self.check(manifest)
            if problem:
                self._failures[model.id] = (version, problem)
                out.append({**entry, "status": "broken", "error": problem})
            else:  # loaded: this process holds its runner (preload, or a request)
                cached = self._runners.get(model.id)
                out.append({**entry, "status": "ready", "loaded": bool(cached and cached[0] == version)})
        return out


_app_lock = threading.Lock()


def registry(app) -> Registry:
    """The app's runner registry (created on first use, per process), on its manifest registry
    and its settings."""
    reg = app.extensions.get(EXTENSION)
    if reg is None:
        with _app_lock:
            reg = app.extensions.get(EXTENSION)
            if reg is None:
                reg = app.extensions[EXTENSION] = Registry(manifests.registry(app), app.config.get("INFERENCE_RUNNERS"),
                                                           config.settings(app))
    return reg
