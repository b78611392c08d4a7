"""JSON API under /api/v1: installed models, server-side inference, its OpenAPI document.

Routes only, thin on purpose: read the upload and the parameters (server/params.py), pick the
runner (server/inference), return its result (the pages' result schema, see docs/server.md)
with the timing of the whole request. Every failure is a Problem (server/errors.py): a
4xx/5xx JSON ``{"error": {"code", "message"}}``.

Uploads stay in memory: the front (server/front.py, HAProxy) has received the whole body
before the app sees it, and the blueprint installs a request class whose multipart file
streams are BytesIO (werkzeug would spool files over 500 KB to a temporary file on disk).
Size limit: MAX_CONTENT_LENGTH (413; the front refuses a Content-Length over it first).
Images are decoded by server/images.py, videos one frame at a time by server/video.py
(tracked by server/inference/track.py).
"""
from __future__ import annotations

import io
import threading
import time
from contextlib import contextmanager

from flask import Blueprint, current_app, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from modelcontract import dense
from modelcontract.custom_classes import CLASS_SETS
from modelcontract.custom_gestures import GESTURE_SETS

from . import cards, config, images, inference, limits, manifests, openapi, params
from .errors import Problem, error_response, upload_too_large
from .inference.track import track_video

bp = Blueprint("api", __name__, url_prefix="/api/v1")


COMPUTE = "datarailroad.compute_slots"


@bp.record_once
def _compute_slots(state) -> None:
    """At most DATARAILROAD_THREADS requests of a worker decode and run models at once; the
    others wait for a slot. The worker's other threads (gunicorn.conf.py) answer files, pages
    and /healthz meanwhile, without a queue of CPU work in front of them: with 16 detects
    running at once on 2 cores, /healthz took 300-800 ms, as long as a detect. Remote runners
    (the cluster's ingress) run nothing here: no limit."""
    if state.app.config.get("INFERENCE_RUNNERS") is None:
        state.app.extensions[COMPUTE] = threading.BoundedSemaphore(config.settings(state.app).threads)


@contextmanager
def compute_slot():
    slots = current_app.extensions.get(COMPUTE)
    if slots is None:
        yield
        return
    with slots:
        yield


@bp.record_once
def _memory_uploads(state) -> None:
    """Multipart files in memory, never on disk (see module docstring)."""
    base = state.app.request_class
    if getattr(base, "keeps_uploads_in_memory", False):
        return

    class InMemoryUploadRequest(base):
        keeps_uploads_in_memory = True

        def _get_file_stream(self, total_content_length, content_type, filename=None, content_length=None):
            return io.BytesIO()

    state.app.request_class = InMemoryUploadRequest


@bp.before_request
def _refuse_large_bodies() -> None:
    """A Content-Length over the limit is a 413 before anything else (the front refuses it too,
    before the body is read; this covers a server without it). A chunked body over the limit
    is refused before the app by the front (HAProxy) and by the cluster's ingress: werkzeug
    alone would cut it at the limit silently."""
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    if limit and (request.content_length or 0) > limit:
        raise RequestEntityTooLarge()


@bp.errorhandler(RequestEntityTooLarge)
def _too_large(exc):
    """413 with the limit that was passed (here: the API's uploads; elsewhere errors.py's)."""
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    length = request.content_length or 0
    if limit and 0 < length <= limit and params.is_multipart():
        # A body within the upload limit: werkzeug's form limits stopped it (a text field over
        # MAX_FORM_MEMORY_SIZE, or more than MAX_FORM_PARTS parts).
        return error_response(413, f"the multipart form exceeds the server's form limits: a field that is not a "
                                   f"file may hold at most {request.max_form_memory_size} bytes and a form at most "
                                   f"{request.max_form_parts} parts (send the image as a file part: "
                                   f"filename=...)", "form_too_large")
    problem = upload_too_large(limit)
    return error_response(problem.status, problem.message, problem.code)


# ---------------------------------------------------------------------------- helpers

def get_runner(task: str, model_id: str | None):
    """The runner of the model asked for, or of the task's default (the registry's errors are
    Problems: 404 unknown_model, 400 wrong_task, 503 no_model / model_unavailable)."""
    return inference.registry(current_app).get(task, model_id)


def decode(data: bytes) -> tuple[images.DecodedImage, float]:
    t0 = time.perf_counter()
    decoded = images.decode(data, int(current_app.config["MAX_IMAGE_PIXELS"]))
    return decoded, (time.perf_counter() - t0) * 1e3


def respond(result: dict, started: float, decode_ms: float):
    result["timing_ms"] = {"decode": round(decode_ms, 3), **result["timing_ms"],
                           "total": round((time.perf_counter() - started) * 1e3, 3)}
    return jsonify(result)


# ---------------------------------------------------------------------------- routes

@bp.get("/models")
def list_models():
    registry = manifests.registry()
    return jsonify(models=[manifests.summary(m) for m in registry.installed()]
                   + [manifests.broken_summary(m) for m in registry.broken()])


# One card builder (server/cards.py) for the API and the pages, which embed the same JSON.
@bp.get("/models/<model_id>")
def model_card(model_id: str):
    model = manifests.registry().get(model_id)
    if model is None:
        raise Problem(404, "unknown_model", f"no installed model {model_id[:60]!r} (GET /api/v1/models lists them)")
    if model.error:
        raise Problem(503, "model_unavailable", f"model {model_id!r} cannot serve: {model.error}; {manifests.REBUILD}")
    return jsonify(cards.card(model.manifest))


@bp.app_template_global("model_cards")
def model_cards(task: str | None) -> dict:
    return cards.for_task(task)


@bp.get("/openapi.json")
def openapi_document():
    return jsonify(openapi.document())


def infer(task: str, declared: tuple, configure):
    """Body -> parameters -> runner -> decode -> result. The model parameter picks the runner,
    the route's others (``declared``, server/params.py) are read against it, and
    ``configure(runner, values)`` returns ``run(rgb) -> result``. A multipart body carries the
    form fields, so it is read first; a raw body is read only once the parameters are valid."""
    started = time.perf_counter()
    with compute_slot():
        data = params.read_image() if params.is_multipart() else None
        runner = get_runner(task, params.MODEL.read())
        run = configure(runner, params.read_all(declared, runner))
        if data is None:
            data = params.read_image()
        decoded, decode_ms = decode(data)
        return respond(run(decoded.rgb), started, decode_ms)


@bp.post("/detect")
def detect():
    def configure(runner, values):
        opts = runner.options(**values)  # a 400 for an IoU other than its in-graph NMS's
        return lambda rgb: runner(rgb, opts)

    return infer("detect", params.DETECT, configure)


@bp.post("/classify")
def classify():
    def configure(runner, values):
        custom = params.read_custom(CLASS_SETS)
        if custom is not None and runner.features_key is None:
            raise Problem(400, "bad_custom", f"model {runner.id} has no feature output for your classes "
                                             "(rebuild it, or use efficientnet-lite0)")
        return lambda rgb: runner(rgb, **values, custom=custom)

    return infer("classify", params.CLASSIFY, configure)


@bp.post("/hands")
def hands():
    def configure(runner, values):
        custom = params.read_custom(GESTURE_SETS)
        return lambda rgb: runner(rgb, **values, custom=custom)

    return infer("handpose", params.HANDS, configure)


@bp.post("/track")
def track():
    """Tracks and line counts of a short video: the detect page's tracking, on the server.
    Body -> parameters -> detector -> the video's tracks (server/inference/track.py).
    Parameters are checked before a raw body is read, as in infer."""
    started = time.perf_counter()
    with compute_slot():
        return _track(started)


def _track(started: float):
    data = params.read_video() if params.is_multipart() else None
    model_id = params.MODEL.read()
    video_args = params.read_all(params.VIDEO)  # line, stride: bound by no model
    runner = get_runner("detect", model_id)
    if (runner.manifest.get("outputs") or {}).get("format") in dense.DENSE_FORMATS:
        raise Problem(400, "wrong_task", f"model {runner.id!r} gives a map of each picture, not objects to track; "
                                         "/api/v1/detect answers it frame by frame")
    opts = runner.options(**params.read_all(params.DETECT, runner))
    if data is None:
        data = params.read_video()
    app_config = current_app.config
    answer, decode_ms = track_video(
        runner, opts, data, **video_args, max_pixels=int(app_config["MAX_IMAGE_PIXELS"]),
        max_frames=int(app_config.get("MAX_VIDEO_FRAMES") or limits.DEFAULT_MAX_VIDEO_FRAMES))
    return respond(answer, started, decode_ms)


ENDPOINTS = {"detect": "detect", "classify": "classify", "handpose": "hands"}


def warm_up(app, model_ids: list[str]) -> None:
    """One request for each of ``model_ids`` through the app itself (gunicorn.conf.py, once
    its models are loaded), on a plain grey JPEG: decoding, pre- and post-processing and
    Flask's own first-use costs are paid before a visitor's first request (84 of its 152 ms,
    measured on yolov5n's detect)."""
    import cv2
    import numpy as np

    jpeg = cv2.imencode(".jpg", np.full((480, 640, 3), 114, np.uint8))[1].tobytes()
    tasks = {m["id"]: m.get("task") for m in manifests.registry(app).installed()}
    client = app.test_client()
    for model_id in model_ids:
        endpoint = ENDPOINTS.get(tasks.get(model_id))
        if endpoint:
            client.post(f"/api/v1/{endpoint}?model={model_id}", data=jpeg, content_type="image/jpeg")
