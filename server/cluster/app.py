"""The Ray Serve application: ``import_path: server.cluster.app:build`` (see serve.yaml).

    HTTP -> HAProxy -> ingress (the Flask app via a2wsgi: pages, static, /models, /api/v1)
                         -> ModelServer "detect" | "classify" | "handpose" (the runners)

The ingress is the Flask app of ``make run``, built by ``create_app`` with remote runners:
the same routes, JSON, status codes, OpenAPI and limits. Each model deployment holds the
task's real ``inference.Registry`` (so every model of the task, reloaded when rebuilt) and
runs ``runner(image, ...)`` for the ingress, batching concurrent requests with
``@serve.batch``. Models come from each node's DATARAILROAD_MODELS (or ``models_dir``).

Settings (server/settings.py) reach the replicas through their environment (the
nodes', server/cluster/local.py): each replica reads its own with ``load()``. A model
deployment's user_config (threads, interpreters) then gives its Registry a modified copy.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ray import serve

from .. import config, create_app
from ..errors import Problem, error_bytes, upload_too_large
from ..inference import RUNNERS, Registry
from ..settings import Settings, load
from .remote import Unavailable, detach, remote_runners

log = logging.getLogger("ray.serve")

# The deployment's user_config (serve.yaml) may set any of these.
DEFAULT_MODEL_CONFIG = {"threads": 1, "interpreters": 1, "max_batch_size": 4, "batch_wait_timeout_s": 0.005}


def input_terminated(wsgi_app):
    """a2wsgi's wsgi.input ends where the ASGI body ends; saying so (as gunicorn does) lets
    werkzeug read a chunked upload (its size was checked by bodies_read_first) instead of as
    empty."""
    def app(environ, start_response):
        environ["wsgi.input_terminated"] = True
        return wsgi_app(environ, start_response)

    return app


class BodyBudget:
    """The request bodies this ingress holds at once, at most DATARAILROAD_BUFFER_BYTES."""

    def __init__(self, limit: int):
        self.limit, self.held = limit, 0

    def take(self, size: int) -> None:
        if self.held + size > self.limit:
            raise Problem(503, "server_busy", f"the server holds {self.limit} bytes of uploads already "
                                              "(DATARAILROAD_BUFFER_BYTES); retry in a moment")
        self.held += size

    def give_back(self, size: int) -> None:
        self.held -= size


async def send_problem(send, problem: Problem) -> None:
    """The API's JSON error, straight from the ASGI layer; the connection is closed after it."""
    body = error_bytes(problem.code, problem.message)
    await send({"type": "http.response.start", "status": problem.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def bodies_read_first(asgi_app, settings: Settings):
    """Each request body is read whole on the event loop before a2wsgi gives the request one
    of its threads, as HAProxy does on one machine (server/front.py): a stalled upload holds
    a coroutine, not a thread (20 stalled uploads left /healthz unanswered for 100 s). Ray's
    HAProxy passes bodies through, so the limits are kept here, from the app's ``settings``:
    DATARAILROAD_IDLE_TIMEOUT between two pieces of a body and DATARAILROAD_BODY_TIMEOUT for
    all of it (408), DATARAILROAD_BUFFER_BYTES for the bodies held at once (503), the upload
    limit for a chunked body (413). A Content-Length over the limit is not read: Flask answers
    its 413."""
    max_bytes = settings.max_upload_bytes
    budget = BodyBudget(settings.buffer_bytes)

    async def app(scope, receive, send):
        headers = dict(scope.get("headers", ())) if scope["type"] == "http" else {}
        length = headers.get(b"content-length")
        has_body = bool(length) or b"chunked" in headers.get(b"transfer-encoding", b"")
        if not has_body or (length and length.isdigit() and int(length) > max_bytes):
            return await asgi_app(scope, receive, send)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.body_timeout
        chunks, size, refusal = [], 0, None
        try:
            try:
                while size <= max_bytes:
                    left = deadline - loop.time()
                    if left <= 0:
                        raise TimeoutError("deadline")
                    message = await asyncio.wait_for(receive(), min(settings.idle_timeout, left))
                    if message["type"] != "http.request":
                        return  # the client left: nobody to answer
                    body = message.get("body", b"")
                    budget.take(len(body))
                    chunks.append(body)
                    size += len(body)
                    if not message.get("more_body"):
                        break
            except Problem as exc:
                refusal = exc
            except TimeoutError:
                refusal = Problem(408, "request_timeout", (
                    f"the request body was not received in time: the server waits at most {settings.idle_timeout:g} "
                    f"s between two pieces of a body (DATARAILROAD_IDLE_TIMEOUT) and {settings.body_timeout:g} s for "
                    "a whole body (DATARAILROAD_BODY_TIMEOUT)"))
            if refusal is None and size > max_bytes:  # a chunked body over the limit (werkzeug would cut it silently)
                refusal = upload_too_large(max_bytes)
            if refusal is not None:
                return await send_problem(send, refusal)
            replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

            async def replayed():
                return replay.pop() if replay else await receive()

            await asgi_app(scope, replayed, send)
        finally:
            budget.give_back(size)

    return app


@serve.deployment(ray_actor_options={"num_cpus": 1}, max_ongoing_requests=4)
class ModelServer:
    """One task's runners. ``infer`` is what a RemoteRunner calls; ``describe`` gives the
    ingress the runner's checks (a copy without interpreters)."""

    def __init__(self, task: str, models_dir: str | None = None):
        self.task = task
        self.settings = load()  # this replica's, from its node's environment
        self.models_dir = Path(models_dir) if models_dir else self.settings.models
        self.model_config: dict = {}  # the user_config in effect
        self.registry: Registry | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.reconfigure({})

    def reconfigure(self, user_config: dict) -> None:
        model_config = {**DEFAULT_MODEL_CONFIG, **(user_config or {})}
        if self.registry is None or (model_config["threads"], model_config["interpreters"]) != \
                (self.model_config.get("threads"), self.model_config.get("interpreters")):
            # The runners load their interpreters with these (a new Registry: new runners).
            runner_settings = dataclasses.replace(self.settings, infer_threads=int(model_config["threads"]),
                                                  interpreters=int(model_config["interpreters"]))
            self.registry = Registry(self.models_dir, settings=runner_settings)
            # Requests decode/preprocess in parallel while the interpreters (pool) run.
            self.pool = ThreadPoolExecutor(max_workers=max(2, 2 * runner_settings.interpreters),
                                           thread_name_prefix=f"{self.task}-runner")
            self.warm_up()
        self.model_config = model_config
        self.run_batch.set_max_batch_size(int(model_config["max_batch_size"]))
        self.run_batch.set_batch_wait_timeout_s(float(model_config["batch_wait_timeout_s"]))

    def warm_up(self) -> None:
        """Load the task's installed models now, so a new replica's first request doesn't."""
        loaded = self.registry.preload(self.task)
        if not loaded:
            log.warning("%s: no model loaded at start (none installed in %s, or none can serve)", self.task,
                        self.models_dir)

    def describe(self, model_id: str):
        try:
            return detach(self.registry.get(self.task, model_id))
        except Problem as exc:  # the registry's every refusal (unknown, wrong task, none, unavailable)
            return Unavailable(f"{exc} (model deployment {self.task!r}, models {self.models_dir})")

    def run_one(self, model_id: str, image, args: tuple, kwargs: dict):
        return self.registry.get(self.task, model_id)(image, *args, **kwargs)

    def run_all(self, requests: list) -> list:
        """A batch, item by item (the LiteRT graphs take one image): an item's exception is
        its own answer, the others still get theirs."""
        results = []
        for request in requests:
            try:
                results.append(self.run_one(*request))
            except Exception as exc:  # noqa: BLE001 - re-raised for its own caller in infer()
                results.append(exc)
        return results

    # max_concurrent_batches=2: one batch's items preprocess while the other's run the model.
    @serve.batch(max_batch_size=4, batch_wait_timeout_s=0.005, max_concurrent_batches=2)
    async def run_batch(self, requests: list) -> list:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.run_all, requests)

    async def infer(self, model_id: str, image, args: tuple, kwargs: dict):
        if self.model_config["max_batch_size"] <= 1:
            return await asyncio.get_running_loop().run_in_executor(
                self.pool, self.run_one, model_id, image, args, kwargs)
        result = await self.run_batch((model_id, image, args, kwargs))
        if isinstance(result, Exception):
            raise result
        return result


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=64)
@serve.ingress()
class Ingress:
    """The Flask app (create_app) with remote runners, as an ASGI app through a2wsgi."""

    def __init__(self, models: dict, wsgi_threads: int = 16, models_dir: str | None = None):
        flask_config = {"INFERENCE_RUNNERS": remote_runners(models)}
        if models_dir:
            flask_config["MODELS_DIR"] = models_dir
        self.flask = create_app(flask_config)
        self.wsgi_threads = wsgi_threads

    def __serve_build_asgi_app__(self):
        from a2wsgi import WSGIMiddleware

        return bodies_read_first(WSGIMiddleware(input_terminated(self.flask), workers=self.wsgi_threads),
                                 config.settings(self.flask))


def build(args: dict | None = None):
    """The application from serve.yaml's ``args``: ``tasks`` (default: every task the API
    serves), ``wsgi_threads`` (ingress threads running Flask), ``models_dir`` (a path every
    node sees; default: each node's DATARAILROAD_MODELS)."""
    args = args or {}
    models_dir = args.get("models_dir")
    models = {task: ModelServer.options(name=task).bind(task, models_dir) for task in args.get("tasks", RUNNERS)}
    return Ingress.bind(models, int(args.get("wsgi_threads", 16)), models_dir)
