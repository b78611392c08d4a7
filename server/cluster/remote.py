"""Remote runners: what the Flask API's registry builds on the cluster (app.config
``INFERENCE_RUNNERS``, see server/inference/__init__.py).

The API keeps all of its request handling (parameters, model choice, decoding, errors). A
``RemoteRunner`` answers the API's checks (``options()``, ``num_classes``, ``variants``,
``defaults``) from a copy of the real runner without its interpreters, and runs
``runner(image, ...)`` in the task's model deployment, where the real runner lives.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from werkzeug.exceptions import ServiceUnavailable

from modelcontract import ultralytics_litert

from ..inference import model_unavailable
from ..inference.litert import LiteRTModel


@dataclass(frozen=True)
class Unavailable:
    """The model deployment's answer when it cannot load the model (-> the API's 503)."""
    message: str


def holds_model(value) -> bool:
    if isinstance(value, (LiteRTModel, ultralytics_litert.Layout)):
        return True
    if isinstance(value, dict):
        return any(holds_model(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds_model(v) for v in value)
    return False


def detach(runner):
    """A shallow copy of ``runner`` whose attributes holding interpreters read None: it
    pickles, and it is all the API's checks use (they never touch a model)."""
    spec = copy.copy(runner)
    for name, value in list(vars(spec).items()):
        if holds_model(value):
            setattr(spec, name, None)
    return spec


class RemoteRunner:
    """The runner's checks, local; its ``__call__``, in the model deployment."""

    def __init__(self, spec, handle):
        self._spec = spec
        self._handle = handle

    def __getattr__(self, name):
        return getattr(self._spec, name)

    def __call__(self, image, *args, **kwargs):
        from ray.exceptions import RayActorError
        from ray.serve.exceptions import BackPressureError

        try:
            return self._handle.infer.remote(self._spec.id, image, args, kwargs).result()
        except (RayActorError, BackPressureError) as exc:
            # A replica died with this request, or all are full: the client may retry.
            # Any other failure stays the API's 500, as in the Flask app.
            raise ServiceUnavailable(f"model replica unavailable, retry: {type(exc).__name__}") from None


def remote_runners(handles: dict) -> dict:
    """{task: factory(manifest, folder, settings) -> RemoteRunner} for the task's deployment
    handle (the settings that matter are the model deployment's own)."""
    def factory_for(task):
        def build(manifest: dict, folder, settings=None) -> RemoteRunner:
            answer = handles[task].describe.remote(manifest["id"]).result()
            if isinstance(answer, Unavailable):
                raise model_unavailable(answer.message)
            return RemoteRunner(answer, handles[task])

        return build

    return {task: factory_for(task) for task in handles}
