"""The API's request parameters, declared once, and its uploads.

Each route's query/form parameters are a tuple of ``Param`` (DETECT, TRACK, CLASSIFY, HANDS
below): name, kind, range or choices, the default the server fixes (else the model's), the
doc, and what the model bounds. ``read`` parses a parameter (absent: its default) and raises
a Problem, 400 bad_parameter, that quotes its declared range; ``schema`` is the same
declaration as OpenAPI (server/openapi.py writes the routes' ``parameters`` from it).

Bound by the model: a limit given as a name ("num_classes", "variants") is, when a request is
parsed, that attribute of the runner the request chose; in the document, the installed models'
value (openapi.installed_bounds, from their manifests). ``enum`` names the only values the
model or the registry accepts: the document lists them where they are known, the runner or
registry refuses another (DetectRunner.options: 400 bad_parameter; the registry: 404
unknown_model, 400 wrong_task), so the parser checks only the range or syntax.

A parameter comes from the multipart form when the body is one, else from the query string.
Images come as the multipart field ``image`` or as the raw body (image/jpeg, image/png,
image/webp or any image/* type, application/octet-stream: the bytes decide, and only JPEG,
PNG and WebP decode); videos the same ways, as ``video`` (video/mp4, video/webm,
video/x-msvideo or any video/* type, application/octet-stream). The uploads' readers raise
400 missing_<field>, duplicate_<field>, bad_custom, or 415 for an upload of the wrong type.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from flask import request

from modelcontract import limits as contract_limits
from modelcontract.decode import DEFAULT_TOP_K
from modelcontract.example_sets import ExampleFileError
from modelcontract.hands import DEFAULT_MAX_HANDS

from . import images, limits, video
from .errors import Problem

IMAGE_TYPES = set(images.MIME_TYPES) | {"application/octet-stream"}
VIDEO_TYPES = set(video.MIME_TYPES) | {"application/octet-stream"}
# Plain decimals only: float() would also take "nan", "inf" and "1_0".
_FLOAT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?")
_INT = re.compile(r"[+-]?\d{1,9}")

NUMBER, INTEGER, CHOICE, TEXT = "number", "integer", "choice", "text"


def is_multipart() -> bool:
    return request.mimetype == "multipart/form-data"


def raw(name: str) -> str | None:
    """The parameter's text: the form field of a multipart body, else the query's."""
    if is_multipart():
        value = request.form.get(name)
        if value is not None:
            return value
    return request.args.get(name)


def bad_parameter(message: str) -> Problem:
    return Problem(400, "bad_parameter", message)


@dataclass(frozen=True)
class Param:
    """One query or form parameter of a route. Limits are values, or the name of what the
    model bounds them with (see the module docstring)."""
    name: str
    kind: str  # NUMBER, INTEGER, CHOICE or TEXT
    doc: str  # the OpenAPI description
    low: float | str = 0  # NUMBER, INTEGER: the range, inclusive
    high: float | str | None = 1  # None: no upper bound known (the document's, with no model installed)
    choices: tuple[str, ...] | str = ()  # CHOICE
    enum: str = ""  # the only values the model accepts, checked by the runner or registry
    pattern: str = ""  # TEXT: its syntax (a regular expression, matched whole)
    max_length: int | None = None  # TEXT
    parse: Callable[[str], Any] | None = None  # TEXT: text -> value, None when bad; default: the text
    what: str = ""  # TEXT: "<name> must be <what>, got ..."
    shown: int = 40  # characters of a bad value that the message quotes
    default: Any = None  # the value when absent; None: the model's default (the runner's)
    arg: str = ""  # the runner's keyword for it (default: name)

    def resolved(self, bound: Callable[[str], Any]) -> tuple:
        """(low, high, choices), the model's values in: ``bound(name)`` gives them."""
        def value(v):
            return bound(v) if isinstance(v, str) and v else v
        return value(self.low), value(self.high), value(self.choices)

    def must_be(self, low, high, choices) -> str:
        if self.kind == NUMBER:
            return f"a number from {low:g} to {high:g}"
        if self.kind == INTEGER:
            return f"an integer from {low} to {high}"
        if self.kind == CHOICE:
            return f"one of {', '.join(choices)}"
        return self.what

    def read(self, runner=None):
        """The request's value (absent: ``default``), checked against the limits ``runner``
        (the model chosen) sets; else a 400 bad_parameter quoting them."""
        text = raw(self.name)
        if text is None:
            return self.default
        low, high, choices = self.resolved(lambda name: getattr(runner, name))
        value = None
        if self.kind in (NUMBER, INTEGER):
            number = text.strip()
            syntax, cast = (_FLOAT, float) if self.kind == NUMBER else (_INT, int)
            if syntax.fullmatch(number) and low <= cast(number) <= high:
                value = cast(number)
        elif self.kind == CHOICE:
            value = text if text in choices else None
        elif self.parse is not None:
            value = self.parse(text)
        elif re.fullmatch(self.pattern, text):
            value = text
        if value is None:
            raise bad_parameter(f"{self.name} must be {self.must_be(low, high, choices)}, "
                                f"got {text[:self.shown]!r}")
        return value

    def schema(self, bounds: dict) -> dict:
        """The parameter's JSON Schema in the document, the model's values from ``bounds``."""
        low, high, choices = self.resolved(bounds.get)
        enum = bounds.get(self.enum) if self.enum else None
        kind = {NUMBER: "number", INTEGER: "integer"}.get(self.kind, "string")
        if enum:  # one value (an in-graph NMS's IoU) or several (the installed model ids)
            return {"type": kind, "enum": list(enum) if isinstance(enum, (tuple, list)) else [enum]}
        if self.kind in (NUMBER, INTEGER):
            schema = {"type": kind, "minimum": low}
            if high is not None:
                schema["maximum"] = high
        elif self.kind == CHOICE:
            schema = {"type": kind, "enum": list(choices)}
        else:
            schema = {"type": kind, "pattern": f"^{self.pattern}$"}
            if self.max_length:
                schema["maxLength"] = self.max_length
        if self.default is not None:
            schema["default"] = self.default
        return schema


def read_all(declared: tuple[Param, ...], runner=None) -> dict:
    """{runner keyword: value} of ``declared`` but MODEL (read first: it picks the runner)."""
    return {p.arg or p.name: p.read(runner) for p in declared if p is not MODEL}


def _line(text: str) -> tuple[list[float], list[float]] | None:
    """The counting line "x1,y1,x2,y2" in source pixels, from (x1, y1) to (x2, y2): "in" is
    a crossing to its right, as on the page."""
    line = text.strip()
    if not limits.LINE.fullmatch(line):
        return None
    x1, y1, x2, y2 = (float(v) for v in line.split(","))
    if (x1, y1) == (x2, y2):
        raise bad_parameter(f"line must join two different points, got {text[:60]!r}")
    return [x1, y1], [x2, y2]


# ---------------------------------------------------------------------------- the declaration

MODEL = Param("model", TEXT, "installed model id of the task (GET /api/v1/models); default: the first of the task's "
                             "installed float32 (unquantised) models, in preference order, that can serve (when none "
                             "is installed: of its models with a server artifact)",
              pattern=contract_limits.MODEL_ID_PATTERN, enum="model_ids", what="an installed model id", shown=60)

DETECT = (
    MODEL,
    Param("score", NUMBER, f"minimum score (default: the manifest's, {contract_limits.DEFAULT_SCORE})"),
    # A detector with NMS in its graph accepts only its own IoU (DetectRunner.options, else 400).
    Param("iou", NUMBER, f"NMS IoU threshold (default: the manifest's, {contract_limits.DEFAULT_IOU}; the default "
                         "model's own when it runs NMS in its graph)", enum="nms_iou"),
    Param("max_det", INTEGER,
          f"maximum detections (default {contract_limits.DEFAULT_MAX_DET}; in-graph NMS caps it at its own row count)",
          low=1, high=contract_limits.MAX_DET),
    Param("classes", TEXT, "only these class ids, comma-separated (default: all). Boxes of other classes are no "
                           "candidates: they take no max_det place and suppress nothing (as the detect page's "
                           "class filter)",
          pattern=limits.CLASS_IDS_PATTERN, max_length=limits.CLASS_IDS_MAX_LENGTH, parse=limits.parse_class_ids,
          what="class ids separated by commas"),
)
# /track's own, read before the model is chosen (none is bound by it); they go to track_video.
VIDEO = (
    Param("line", TEXT, "the counting line x1,y1,x2,y2 in source pixels, from (x1, y1) to (x2, y2), two different "
                        "points (default: none, no counts)",
          pattern=limits.LINE_PATTERN, parse=_line, shown=60,
          what="x1,y1,x2,y2 in pixels (numbers of at most 6 digits before the point)"),
    Param("stride", INTEGER, "track every n-th frame (1, 1 + n, ...; default 1: every frame). All frames are decoded "
                             "and count against the frame limit", low=1, high=limits.MAX_VIDEO_STRIDE, default=1),
)
TRACK = DETECT + VIDEO
CLASSIFY = (
    MODEL,
    Param("top_k", INTEGER, f"number of classes returned (default {DEFAULT_TOP_K}, at most the model's class count)",
          low=1, high="num_classes", arg="k"),
)
HANDS = (
    MODEL,
    Param("score", NUMBER, "minimum hand presence score (default 0.5, the library's)"),
    Param("detect_score", NUMBER, "palm detection score cut, MediaPipe's min_detection_confidence (default 0.5, the "
                                  "library's); the hands page's slider"),
    Param("max_det", INTEGER, f"maximum hands (default {DEFAULT_MAX_HANDS})", low=1, high=contract_limits.MAX_HANDS,
          arg="max_hands"),
    Param("variant", CHOICE, "model pair (default full)", choices="variants"),
)


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
