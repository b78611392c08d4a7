"""JSON API under /api/v1: installed models, server-side inference, its OpenAPI document.

Thin on purpose: read the image and the parameters, pick the runner, return its result
(the pages' result schema, see docs/server.md) with the timing of the whole request.
Every failure is a 4xx/5xx JSON ``{"error": {"code", "message"}}``.

Images come as the multipart field ``image`` or as the raw body (image/jpeg, image/png,
image/webp or any image/* type, application/octet-stream: the bytes decide, and only JPEG,
PNG and WebP decode). Uploads stay in memory: the whole body is read first (server/front.py:
bounded in size and time), and the blueprint installs a request class whose multipart file
streams are BytesIO (werkzeug would spool files over 500 KB to a temporary file on disk).
Size limit: MAX_CONTENT_LENGTH (413). The model work runs off the event loop (front.offload).

Videos (POST /track) come the same ways: the multipart field ``video`` or the raw body
(video/mp4, video/webm, video/x-msvideo or any video/* type, application/octet-stream),
decoded in memory by server/video.py.
"""
from __future__ import annotations

import io
import re
import time

from flask import Blueprint, current_app, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from modelcontract import limits
from modelcontract.custom_classes import CLASS_SETS
from modelcontract.custom_gestures import GESTURE_SETS
from modelcontract.example_sets import ExampleFileError

from . import front, images, manifests, openapi, video
from .errors import error_response

bp = Blueprint("api", __name__, url_prefix="/api/v1")

RAW_TYPES = set(images.MIME_TYPES) | {"application/octet-stream"}
VIDEO_TYPES = set(video.MIME_TYPES) | {"application/octet-stream"}
_FLOAT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?")
_INT = re.compile(r"[+-]?\d{1,9}")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


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


# ---------------------------------------------------------------------------- errors

@bp.errorhandler(ApiError)
def _api_error(exc: ApiError):
    return error_response(exc.status, exc.message, exc.code)


@bp.errorhandler(front.BodyError)
def _body_error(exc: front.BodyError):
    return error_response(exc.status, exc.message, exc.code)


@bp.errorhandler(RequestEntityTooLarge)
def _too_large(exc):
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    length = int(request.environ.get("CONTENT_LENGTH") or 0)  # set by _buffered_body
    if limit and 0 < length <= limit and _is_multipart():
        # A body within the upload limit: werkzeug's form limits stopped it (a text field over
        # MAX_FORM_MEMORY_SIZE, or more than MAX_FORM_PARTS parts).
        return error_response(413, f"the multipart form exceeds the server's form limits: a field that is not a "
                                   f"file may hold at most {request.max_form_memory_size} bytes and a form at most "
                                   f"{request.max_form_parts} parts (send the image as a file part: "
                                   f"filename=...)", "form_too_large")
    return error_response(413, f"the upload is larger than the server's limit of {limit} bytes "
                               "(DATARAILROAD_MAX_UPLOAD_BYTES)", "payload_too_large")


@bp.errorhandler(images.ImageError)
def _image_error(exc: images.ImageError):
    return error_response(exc.status, exc.message, exc.code)


@bp.errorhandler(video.VideoError)
def _video_error(exc: video.VideoError):
    return error_response(exc.status, exc.message, exc.code)


def _inference_errors():
    from . import inference

    return inference


# ---------------------------------------------------------------------------- request parsing

def _is_multipart() -> bool:
    return request.mimetype == "multipart/form-data"


def _param(name: str) -> str | None:
    if _is_multipart():
        value = request.form.get(name)
        if value is not None:
            return value
    return request.args.get(name)


def param_float(name: str, low: float = 0.0, high: float = 1.0) -> float | None:
    raw = _param(name)
    if raw is None:
        return None
    text = raw.strip()
    if not _FLOAT.fullmatch(text) or not (low <= float(text) <= high):
        raise ApiError(400, "bad_parameter", f"{name} must be a number from {low:g} to {high:g}, got {raw[:40]!r}")
    return float(text)


def param_int(name: str, low: int, high: int) -> int | None:
    raw = _param(name)
    if raw is None:
        return None
    text = raw.strip()
    if not _INT.fullmatch(text) or not (low <= int(text) <= high):
        raise ApiError(400, "bad_parameter", f"{name} must be an integer from {low} to {high}, got {raw[:40]!r}")
    return int(text)


def param_choice(name: str, choices: list[str]) -> str | None:
    raw = _param(name)
    if raw is None:
        return None
    if raw not in choices:
        raise ApiError(400, "bad_parameter", f"{name} must be one of {', '.join(choices)}, got {raw[:40]!r}")
    return raw


def param_model() -> str | None:
    raw = _param("model")
    if raw is None:
        return None
    if not limits.is_model_id(raw):
        raise ApiError(400, "bad_parameter", f"model must be an installed model id, got {raw[:60]!r}")
    return raw


def param_classes() -> frozenset[int] | None:
    """The detector's class filter: comma-separated class ids (modelcontract.limits)."""
    raw = _param("classes")
    if raw is None:
        return None
    ids = limits.parse_class_ids(raw)
    if ids is None:
        raise ApiError(400, "bad_parameter", f"classes must be class ids separated by commas, got {raw[:40]!r}")
    return ids


def param_line() -> tuple[list[float], list[float]] | None:
    """The counting line "x1,y1,x2,y2" in source pixels (modelcontract.limits.LINE_PATTERN),
    from (x1, y1) to (x2, y2): "in" is a crossing to its right, as on the page."""
    raw = _param("line")
    if raw is None:
        return None
    text = raw.strip()
    if not limits.LINE.fullmatch(text):
        raise ApiError(400, "bad_parameter", f"line must be x1,y1,x2,y2 in pixels (numbers of at most 6 digits "
                                             f"before the point), got {raw[:60]!r}")
    x1, y1, x2, y2 = (float(v) for v in text.split(","))
    if (x1, y1) == (x2, y2):
        raise ApiError(400, "bad_parameter", f"line must join two different points, got {raw[:60]!r}")
    return [x1, y1], [x2, y2]


def read_image_bytes() -> bytes:
    """The upload: multipart field ``image`` or the raw body."""
    return read_upload("image", "an image", RAW_TYPES)


def read_upload(field: str, noun: str, raw_types: set[str]) -> bytes:
    """Multipart field ``field`` or the raw body of one of ``raw_types`` or <field>/*."""
    if _is_multipart():
        uploads = request.files.getlist(field)
        if len(uploads) + len(request.form.getlist(field)) > 1:
            raise ApiError(400, f"duplicate_{field}",
                           f"the form has more than one '{field}' part: send one {field} per request")
        upload = uploads[0] if uploads else None
        if upload is None:
            if field in request.form:
                raise ApiError(400, f"missing_{field}",
                               f"the multipart field '{field}' must be a file part (with a filename)")
            raise ApiError(400, f"missing_{field}", f"no multipart field '{field}' in the request")
        return upload.read()
    mimetype = request.mimetype
    if mimetype and mimetype not in raw_types and not mimetype.startswith(f"{field}/"):
        raise ApiError(415, "unsupported_media_type",
                       f"send the {field} as multipart/form-data (field '{field}') or as a raw body of type "
                       f"{', '.join(sorted(raw_types))}; got {mimetype[:80]}")
    data = request.get_data(cache=False)
    if not data:
        raise ApiError(400, f"missing_{field}", f"the request body is empty: send {noun}")
    return data


def decode(data: bytes) -> tuple[images.DecodedImage, float]:
    t0 = time.perf_counter()
    decoded = images.decode(data, int(current_app.config["MAX_IMAGE_PIXELS"]))
    return decoded, (time.perf_counter() - t0) * 1e3


def get_runner(task: str, model_id: str | None):
    inference = _inference_errors()
    try:
        return inference.registry(current_app).get(task, model_id)
    except inference.UnknownModel as exc:
        raise ApiError(404, "unknown_model", str(exc)) from None
    except inference.WrongTask as exc:
        raise ApiError(400, "wrong_task", str(exc)) from None
    except inference.NoModel as exc:
        raise ApiError(503, "no_model", str(exc)) from None
    except inference.ModelUnavailable as exc:
        current_app.logger.error("model unavailable: %s", exc)
        raise ApiError(503, "model_unavailable", str(exc)) from None


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
    from . import cards

    model = manifests.registry().get(model_id)
    if model is None:
        raise ApiError(404, "unknown_model", f"no installed model {model_id[:60]!r} (GET /api/v1/models lists them)")
    if model.error:
        raise ApiError(503, "model_unavailable", f"model {model_id!r} cannot serve: {model.error}; {manifests.REBUILD}")
    return jsonify(cards.card(model.manifest))


@bp.app_template_global("model_cards")
def model_cards(task: str | None) -> dict:
    from . import cards

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
    data = read_image_bytes() if _is_multipart() else None
    model_id = param_model()
    runner = get_runner(task, model_id)
    try:
        run = configure(runner)
    except _inference_errors().ParameterError as exc:
        raise ApiError(400, "bad_parameter", str(exc)) from None
    if data is None:
        data = read_image_bytes()
    decoded, decode_ms = decode(data)
    return respond(run(decoded.rgb), started, decode_ms)


def detect_options(runner):
    """/detect's parameters (also /track's) -> the runner's options."""
    try:
        return runner.options(score=param_float("score"), iou=param_float("iou"),
                              max_det=param_int("max_det", 1, limits.MAX_DET), classes=param_classes())
    except _inference_errors().ParameterError as exc:
        raise ApiError(400, "bad_parameter", str(exc)) from None


@bp.post("/detect")
def detect():
    def configure(runner):
        opts = detect_options(runner)
        return lambda rgb: runner(rgb, opts)

    return infer("detect", configure)


@bp.post("/classify")
def classify():
    def configure(runner):
        k = param_int("top_k", 1, runner.num_classes)
        custom = read_custom(CLASS_SETS)
        if custom is not None and runner.features_key is None:
            raise ApiError(400, "bad_custom", f"model {runner.id} has no feature output for your classes "
                                              "(rebuild it, or use efficientnet-lite0)")
        return lambda rgb: runner(rgb, k, custom=custom)

    return infer("classify", configure)


@bp.post("/hands")
def hands():
    def configure(runner):
        score = param_float("score")
        detect_score = param_float("detect_score")
        max_hands = param_int("max_det", 1, limits.MAX_HANDS)
        variant = param_choice("variant", runner.variants)
        custom = read_custom(GESTURE_SETS)
        return lambda rgb: runner(rgb, max_hands=max_hands, score=score, variant=variant, detect_score=detect_score,
                                  custom=custom)

    return infer("handpose", configure)


def read_custom(sets) -> dict | None:
    """The optional multipart file part ``custom``: a set a page exported (example_sets)."""
    if not _is_multipart():
        return None
    parts = request.files.getlist("custom")
    if not parts:
        if "custom" in request.form:
            raise ApiError(400, "bad_custom", "the multipart field 'custom' must be a file part (with a filename)")
        return None
    if len(parts) > 1:
        raise ApiError(400, "bad_custom", f"the form has more than one 'custom' part: send one {sets.noun} file")
    try:
        return sets.parse(parts[0].read())
    except ExampleFileError as exc:
        raise ApiError(400, "bad_custom", f"the 'custom' part is {exc}") from None


@bp.post("/track")
def track():
    """Tracks and line counts of a short video: the detect page's tracking, on the server."""
    return front.offload(_track, time.perf_counter())


def _track(started: float):
    """Body -> parameters -> detector -> each (stride-th) frame: detections -> Tracker ->
    LineCounter (modelcontract/track.py, the twin of the page's track.js, with its defaults:
    the same IDs and counts as the page given the same detections). Frames are decoded one at
    a time (server/video.py); parameters are checked before a raw body is read, as in _infer.
    The answer: the page's CSV rows (``tracks``, MOT columns, frames numbered in the video
    from 1) and its counts.json record (``counts``)."""
    from modelcontract import track as tracking

    data = read_upload("video", "a video", VIDEO_TYPES) if _is_multipart() else None
    model_id = param_model()
    line = param_line()
    stride = param_int("stride", 1, limits.MAX_VIDEO_STRIDE) or 1
    runner = get_runner("detect", model_id)
    opts = detect_options(runner)
    if data is None:
        data = read_upload("video", "a video", VIDEO_TYPES)
    config = current_app.config
    tracker = tracking.Tracker()
    counter = tracking.LineCounter(*line) if line else None
    rows, classes = [], {}
    timing = {"preprocess": 0.0, "model": 0.0, "postprocess": 0.0, "track": 0.0}
    t0 = time.perf_counter()
    with video.open_video(data, int(config["MAX_IMAGE_PIXELS"]),
                          int(config.get("MAX_VIDEO_FRAMES") or limits.DEFAULT_MAX_VIDEO_FRAMES)) as clip:
        decode_ms = (time.perf_counter() - t0) * 1e3
        frames = clip.frames(stride)
        while True:
            t0 = time.perf_counter()
            item = next(frames, None)
            decode_ms += (time.perf_counter() - t0) * 1e3
            if item is None:
                break
            number, rgb = item
            result = runner(rgb, opts)
            t0 = time.perf_counter()
            tracks = tracker.update(result["detections"])
            rows += tracking.mot_rows(number, tracks)
            if counter:
                counter.update(tracks)
            classes.update((tracking.class_name(t), t["class_id"]) for t in tracks)
            timing["track"] += (time.perf_counter() - t0) * 1e3
            for stage in ("preprocess", "model", "postprocess"):
                timing[stage] += result["timing_ms"][stage]
    answer = {"model": runner.id,
              "video": {"width": clip.width, "height": clip.height, "frames": clip.count, "fps": clip.fps},
              "tracks": rows,
              "counts": {"line": {"from": counter.a, "to": counter.b} if counter else None,
                         "counts": counter.counts if counter else {}, "frames": tracker.frame,
                         "tracks": tracker.next_id - 1, "classes": classes},
              "timing_ms": {stage: round(ms, 3) for stage, ms in timing.items()}}
    return respond(answer, started, decode_ms)
