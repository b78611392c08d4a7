"""What every runner shares: the manifest, its folder, LiteRT loading, and its errors (Problems:
the API answers them as they are)."""
from __future__ import annotations

from pathlib import Path

from ..errors import Problem
from ..settings import Settings, load

from .litert import LiteRTModel


UNAVAILABLE = "model_unavailable"


def parameter_error(message: str) -> Problem:
    """A request parameter the model cannot honour."""
    return Problem(400, "bad_parameter", message)


def model_unavailable(message: str) -> Problem:
    """An installed manifest whose server artifact is missing or does not load."""
    return Problem(503, UNAVAILABLE, message)


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
            raise model_unavailable(f"{self.id}: server artifact {relative!r} lies outside the model folder")
        try:
            return LiteRTModel(path, threads=self.settings.infer_threads, pool_size=self.settings.interpreters)
        except (OSError, ValueError, RuntimeError) as exc:
            raise model_unavailable(f"{self.id}: could not load {relative}: {exc}") from exc
