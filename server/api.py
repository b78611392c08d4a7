"""JSON API under /api/v1: installed models, server-side inference, its OpenAPI document.

Routes only, thin on purpose: read the upload and the parameters (server/params.py), pick the
runner (server/inference), return its result (the pages' result schema, see docs/server.md)
with the timing of the whole request. Every failure is a Problem (server/errors.py): a
4xx/5xx JSON ``{"error": {"code", "message"}}``.

Uploads stay in memory: the whole body is read first (server/front.py: bounded in size and
time), and the blueprint installs a request class whose multipart file streams are BytesIO
(werkzeug would spool files over 500 KB to a temporary file on disk). Size limit:
MAX_CONTENT_LENGTH (413). Images are decoded by server/images.py, videos one frame at a time
by server/video.py (tracked by server/inference/track.py). The model work runs off the event
loop (front.offload).
"""
from __future__ import annotations

import io
import time

from flask import Blueprint, current_app, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from modelcontract import limits as contract_limits
from modelcontract.custom_classes import CLASS_SETS
from modelcontract.custom_gestures import GESTURE_SETS

from . import cards, front, images, inference, limits, manifests, openapi, params
from .errors import Problem, error_response
from .inference.track import track_video

bp = Blueprint("api", __name__, url_prefix="/api/v1")


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
def _buffered_body() -> None:
    """The whole body, read here before anything parses it: in memory, at most
    MAX_CONTENT_LENGTH bytes, in bounded time (front.read_body: 408 for a stalled client,
    400 for a malformed chunked body or one cut short, 413 past the limit). A chunked body
    (``wsgi.input_terminated``) is cut by gunicorn only at the limit, so without this it would
    arrive silently truncated (a 415/422 instead of the 413). What follows sees an ordinary
    body of known length."""
    environ = request.environ
    limit = current_app.config.get("MAX_CONTENT_LENGTH") or 0
    length = request.content_length
    if request.method != "POST" or (length is None and not environ.get("wsgi.input_terminated")):
        return
    if length is not None and limit and length > limit:
        # Unread: gunicorn discards it before the connection's next request (within its
        # keep-alive time), so a client still sending it gets the 413, not a reset.
        raise RequestEntityTooLarge()
    data = front.read_body(environ, length, limit or 2 ** 62)
    environ["wsgi.input"] = io.BytesIO(data)
    environ["CONTENT_LENGTH"] = str(len(data))
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    environ.pop("wsgi.input_terminated", None)


@bp.teardown_request
def _release_body(exc) -> None:
    front.release(request.environ)


@bp.errorhandler(RequestEntityTooLarge)
def _too_large(exc):
    """413 with the limit that was passed (here: the API's uploads; elsewhere errors.py's)."""
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    length = int(request.environ.get("CONTENT_LENGTH") or 0)  # set by _buffered_body
    if limit and 0 < length <= limit and params.is_multipart():
        # A body within the upload limit: werkzeug's form limits stopped it (a text field over
        # MAX_FORM_MEMORY_SIZE, or more than MAX_FORM_PARTS parts).
        return error_response(413, f"the multipart form exceeds the server's form limits: a field that is not a "
                                   f"file may hold at most {request.max_form_memory_size} bytes and a form at most "
                                   f"{request.max_form_parts} parts (send the image as a file part: "
                                   f"filename=...)", "form_too_large")
    return error_response(413, f"the upload is larger than the server's limit of {limit} bytes "
                               "(DATARAILROAD_MAX_UPLOAD_BYTES)", "payload_too_large")


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


def infer(task: str, configure):
    """The model work of a request, on a native thread (see server/front.py)."""
    return front.offload(_infer, task, configure, time.perf_counter())


def _infer(task: str, configure, started: float):
    """Body -> parameters -> runner -> decode -> result. ``configure(runner)`` reads the
    task's parameters and returns ``run(rgb) -> result``. A multipart body carries the form
    fields, so it is read first; a raw body is read only once the parameters are valid."""
    data = params.read_image() if params.is_multipart() else None
    runner = get_runner(task, params.param_model())
    run = configure(runner)
    if data is None:
        data = params.read_image()
    decoded, decode_ms = decode(data)
    return respond(run(decoded.rgb), started, decode_ms)


@bp.post("/detect")
def detect():
    def configure(runner):
        opts = params.detect_options(runner)
        return lambda rgb: runner(rgb, opts)

    return infer("detect", configure)


@bp.post("/classify")
def classify():
    def configure(runner):
        k = params.param_int("top_k", 1, runner.num_classes)
        custom = params.read_custom(CLASS_SETS)
        if custom is not None and runner.features_key is None:
            raise Problem(400, "bad_custom", f"model {runner.id} has no feature output for your classes "
                                             "(rebuild it, or use efficientnet-lite0)")
        return lambda rgb: runner(rgb, k, custom=custom)

    return infer("classify", configure)


@bp.post("/hands")
def hands():
    def configure(runner):
        score = params.param_float("score")
        detect_score = params.param_float("detect_score")
        max_hands = params.param_int("max_det", 1, contract_limits.MAX_HANDS)
        variant = params.param_choice("variant", runner.variants)
        custom = params.read_custom(GESTURE_SETS)
        return lambda rgb: runner(rgb, max_hands=max_hands, score=score, variant=variant, detect_score=detect_score,
                                  custom=custom)

    return infer("handpose", configure)


@bp.post("/track")
def track():
    """Tracks and line counts of a short video: the detect page's tracking, on the server."""
    return front.offload(_track, time.perf_counter())


def _track(started: float):
    """Body -> parameters -> detector -> the video's tracks (server/inference/track.py).
    Parameters are checked before a raw body is read, as in _infer."""
    data = params.read_video() if params.is_multipart() else None
    model_id = params.param_model()
    line = params.param_line()
    stride = params.param_int("stride", 1, limits.MAX_VIDEO_STRIDE) or 1
    runner = get_runner("detect", model_id)
    opts = params.detect_options(runner)
    if data is None:
        data = params.read_video()
    config = current_app.config
    answer, decode_ms = track_video(
        runner, opts, data, line=line, stride=stride, max_pixels=int(config["MAX_IMAGE_PIXELS"]),
        max_frames=int(config.get("MAX_VIDEO_FRAMES") or limits.DEFAULT_MAX_VIDEO_FRAMES))
    return respond(answer, started, decode_ms)
