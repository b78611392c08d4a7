"""The app's errors: ``Problem``, the one exception a request's failure raises, and their
rendering. Every error is JSON ``{"error": {"code", "message"}}`` for the API, file and
health routes; a person browsing to a missing page gets an HTML page.

    raise Problem(400, "bad_parameter", "score must be a number from 0 to 1, got 'x'")

Parameters, uploads, the cluster ingress's body reader, the image and video decoders and the
model registry (server/inference) all raise it (no subclasses: the status and code are data),
and ``init_app`` renders it wherever it is raised.
"""
from __future__ import annotations

import json

from flask import Flask, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, InternalServerError

JSON_PREFIXES = ("/api/", "/models/", "/vendor/", "/healthz", "/readyz")

# The code of an error that names none (werkzeug's HTTP errors).
CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 408: "request_timeout",
         413: "payload_too_large", 415: "unsupported_media_type", 422: "unprocessable_image",
         429: "too_many_requests", 500: "internal_error", 503: "unavailable"}


class Problem(Exception):
    """A request that can't be answered: its HTTP ``status``, a stable machine-readable
    ``code`` and a ``message`` for a person (what was wrong, and how to do it right)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def __reduce__(self):
        # A Ray replica's exception reaches the ingress pickled.
        return Problem, (self.status, self.code, self.message)


def error_json(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def error_bytes(code: str, message: str) -> bytes:
    """The JSON error body outside Flask (HAProxy's error files, the cluster's ASGI layer)."""
    return json.dumps(error_json(code, message)).encode()


def upload_too_large(limit: int) -> Problem:
    return Problem(413, "payload_too_large", f"the upload is larger than the server's limit of {limit} bytes "
                                             "(DATARAILROAD_MAX_UPLOAD_BYTES)")


def error_response(status: int, message: str, code: str | None = None):
    """The JSON error answer (Flask's (response, status))."""
    return jsonify(error_json(code or CODES.get(status, "error"), message)), status


def _wants_json() -> bool:
    if request.path.startswith(JSON_PREFIXES):
        return True
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


def init_app(app: Flask) -> None:
    @app.errorhandler(Problem)
    def problem(exc: Problem):
        if exc.status >= 500:  # the server's side (a broken model, no model, busy): worth a line
            app.logger.error("%s on %s: %s", exc.code, request.path, exc.message)
        return error_response(exc.status, exc.message, exc.code)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        status = exc.code or 500
        message = exc.description or exc.name
        if _wants_json():
            response, status = error_response(status, message)
            if exc.code == 405 and getattr(exc, "valid_methods", None):
                response.headers["Allow"] = ", ".join(exc.valid_methods)
            return response, status
        return render_template("error.html", status=status, title=exc.name, message=message), status

    @app.errorhandler(Exception)
    def unexpected_error(exc: Exception):
        app.logger.exception("unhandled error on %s", request.path)
        return http_error(InternalServerError("internal error; the server keeps serving"))
