"""What every runner shares: the manifest, its folder, LiteRT loading, and its errors (Problems:
the API answers them as they are)."""
from __future__ import annotations

from pathlib import Path

from ..errors import Problem
from ..settings import Settings, load

from .litert import LiteRTModel


class ParameterError(Problem, ValueError):
    """A request parameter the model cannot honour (-> 400 bad_parameter)."""

    def __init__(self, name: str, message: str):
        super().__init__(400, "bad_parameter", message)
        self.name = name


class ModelUnavailable(Problem, RuntimeError):
    """An installed manifest whose server artifact is missing or does not load (-> 503)."""

    def __init__(self, message: str):
        super().__init__(503, "model_unavailable", message)


class Runner:
    task = ""

    def __init__(self, manifest: dict, folder: Path, settings: Settings | None = None):
        """``settings``: the LiteRT ones (threads, interpreters, batching) are used; default:
        this process's (``load()``)."""
        self.manifest = manifest
        self.folder = Path(folder)
        self.id = manifest["id"]
        self.settings = settings or load()

    def load_tflite(self, relative: str) -> LiteRTModel:
        path = (self.folder / relative).resolve()
        if self.folder.resolve() not in path.parents:
            raise ModelUnavailable(f"{self.id}: server artifact {relative!r} lies outside the model folder")
        try:
            return LiteRTModel(path, threads=self.settings.infer_threads, pool_size=self.settings.interpreters)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelUnavailable(f"{self.id}: could not load {relative}: {exc}") from exc
