"""The API's request parsing: query and form parameters, and the uploads (the image or video,
the optional ``custom`` set). Each reader checks what it reads and raises a Problem (400
bad_parameter, missing_<field>, bad_custom...; 415 for an upload of the wrong type) naming
the parameter and what it should be; absent, it gives None.

A parameter comes from the multipart form when the body is one, else from the query string.
Images come as the multipart field ``image`` or as the raw body (image/jpeg, image/png,
image/webp or any image/* type, application/octet-stream: the bytes decide, and only JPEG,
PNG and WebP decode); videos the same ways, as ``video`` (video/mp4, video/webm,
video/x-msvideo or any video/* type, application/octet-stream).
"""
from __future__ import annotations

import re

from flask import request

from modelcontract import limits as contract_limits
from modelcontract.example_sets import ExampleFileError

from . import images, limits, video
from .errors import Problem

IMAGE_TYPES = set(images.MIME_TYPES) | {"application/octet-stream"}
VIDEO_TYPES = set(video.MIME_TYPES) | {"application/octet-stream"}
# Plain decimals only: float() would also take "nan", "inf" and "1_0".
_FLOAT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?")
_INT = re.compile(r"[+-]?\d{1,9}")


def bad_parameter(message: str) -> Problem:
    return Problem(400, "bad_parameter", message)


def is_multipart() -> bool:
    return request.mimetype == "multipart/form-data"


def raw(name: str) -> str | None:
    """The parameter's text: the form field of a multipart body, else the query's."""
    if is_multipart():
        value = request.form.get(name)
        if value is not None:
            return value
    return request.args.get(name)


def param_float(name: str, low: float = 0.0, high: float = 1.0) -> float | None:
    text = raw(name)
    if text is None:
        return None
    number = text.strip()
    if not _FLOAT.fullmatch(number) or not (low <= float(number) <= high):
        raise bad_parameter(f"{name} must be a number from {low:g} to {high:g}, got {text[:40]!r}")
    return float(number)


def param_int(name: str, low: int, high: int) -> int | None:
    text = raw(name)
    if text is None:
        return None
    number = text.strip()
    if not _INT.fullmatch(number) or not (low <= int(number) <= high):
        raise bad_parameter(f"{name} must be an integer from {low} to {high}, got {text[:40]!r}")
    return int(number)


def param_choice(name: str, choices: list[str]) -> str | None:
    text = raw(name)
    if text is None:
        return None
    if text not in choices:
        raise bad_parameter(f"{name} must be one of {', '.join(choices)}, got {text[:40]!r}")
    return text


def param_model() -> str | None:
    """The model id asked for (syntax only: the registry says whether it is installed)."""
    text = raw("model")
    if text is None:
        return None
    if not contract_limits.is_model_id(text):
        raise bad_parameter(f"model must be an installed model id, got {text[:60]!r}")
    return text


def param_classes() -> frozenset[int] | None:
    """The detector's class filter: comma-separated class ids (server/limits.py)."""
    text = raw("classes")
    if text is None:
        return None
    ids = limits.parse_class_ids(text)
    if ids is None:
        raise bad_parameter(f"classes must be class ids separated by commas, got {text[:40]!r}")
    return ids


def param_line() -> tuple[list[float], list[float]] | None:
    """The counting line "x1,y1,x2,y2" in source pixels (server/limits.py LINE_PATTERN),
    from (x1, y1) to (x2, y2): "in" is a crossing to its right, as on the page."""
    text = raw("line")
    if text is None:
        return None
    line = text.strip()
    if not limits.LINE.fullmatch(line):
        raise bad_parameter(f"line must be x1,y1,x2,y2 in pixels (numbers of at most 6 digits "
                            f"before the point), got {text[:60]!r}")
    x1, y1, x2, y2 = (float(v) for v in line.split(","))
    if (x1, y1) == (x2, y2):
        raise bad_parameter(f"line must join two different points, got {text[:60]!r}")
    return [x1, y1], [x2, y2]


def detect_options(runner):
    """/detect's parameters (also /track's) -> the runner's options (its ParameterError: a
    value the model can't honour, e.g. an IoU other than its in-graph NMS's)."""
    return runner.options(score=param_float("score"), iou=param_float("iou"),
                          max_det=param_int("max_det", 1, contract_limits.MAX_DET), classes=param_classes())


# ---------------------------------------------------------------------------- uploads

def read_image() -> bytes:
    """The upload: multipart field ``image`` or the raw body."""
    return read_upload("image", "an image", IMAGE_TYPES)


def read_video() -> bytes:
    """The upload: multipart field ``video`` or the raw body."""
    return read_upload("video", "a video", VIDEO_TYPES)


def read_upload(field: str, noun: str, raw_types: set[str]) -> bytes:
    """Multipart field ``field`` or the raw body of one of ``raw_types`` or <field>/*."""
    if is_multipart():
        uploads = request.files.getlist(field)
        if len(uploads) + len(request.form.getlist(field)) > 1:
            raise Problem(400, f"duplicate_{field}",
                          f"the form has more than one '{field}' part: send one {field} per request")
        upload = uploads[0] if uploads else None
        if upload is None:
            if field in request.form:
                raise Problem(400, f"missing_{field}",
                              f"the multipart field '{field}' must be a file part (with a filename)")
            raise Problem(400, f"missing_{field}", f"no multipart field '{field}' in the request")
        return upload.read()
    mimetype = request.mimetype
    if mimetype and mimetype not in raw_types and not mimetype.startswith(f"{field}/"):
        raise Problem(415, "unsupported_media_type",
                      f"send the {field} as multipart/form-data (field '{field}') or as a raw body of type "
                      f"{', '.join(sorted(raw_types))}; got {mimetype[:80]}")
    data = request.get_data(cache=False)
    if not data:
        raise Problem(400, f"missing_{field}", f"the request body is empty: send {noun}")
    return data


def read_custom(sets) -> dict | None:
    """The optional multipart file part ``custom``: a set a page exported (example_sets)."""
    if not is_multipart():
        return None
    parts = request.files.getlist("custom")
    if not parts:
        if "custom" in request.form:
            raise Problem(400, "bad_custom", "the multipart field 'custom' must be a file part (with a filename)")
        return None
    if len(parts) > 1:
        raise Problem(400, "bad_custom", f"the form has more than one 'custom' part: send one {sets.noun} file")
    try:
        return sets.parse(parts[0].read())
    except ExampleFileError as exc:
        raise Problem(400, "bad_custom", f"the 'custom' part is {exc}") from None
