"""Errors as JSON ``{"error": {"code", "message"}}`` for API, file and health routes;
an HTML page for a person browsing to a missing page."""
from __future__ import annotations

from flask import Flask, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, InternalServerError

JSON_PREFIXES = ("/api/", "/models/", "/vendor/", "/healthz", "/readyz")

_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 408: "request_timeout",
          413: "payload_too_large", 415: "unsupported_media_type", 422: "unprocessable_image",
          429: "too_many_requests", 500: "internal_error", 503: "unavailable"}


def error_response(status: int, message: str, code: str | None = None):
    body = {"error": {"code": code or _CODES.get(status, "error"), "message": message}}
    return jsonify(body), status


def _wants_json() -> bool:
    if request.path.startswith(JSON_PREFIXES):
        return True
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


def register(app: Flask) -> None:
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
