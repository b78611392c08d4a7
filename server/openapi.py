"""The OpenAPI 3.1 document of /api/v1 (served at /api/v1/openapi.json).

Schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect): tests validate real responses
against them with jsonschema, and schemathesis (`--checks all`, tests/convert/test_openapi_schemathesis.py)
checks that every request the document calls valid is answered 2xx and every invalid one 4xx.
So the document promises only what the server accepts: an image body of a declared image type
(application/octet-stream is accepted too but not declared: it admits any bytes), and the
parameters that depend on the installed default models (the in-graph NMS IoU of the default
detector, the default classifier's class count, the installed hand-model variants) as they are.

The routes' parameters are written from their declaration in server/params.py, the one the
requests are parsed with; the result schemas (components) are server/schemas.py.
"""
from __future__ import annotations

import copy
from pathlib import Path
from functools import lru_cache

from modelcontract.decode import class_count, nms_defaults
from modelcontract.hands import VARIANTS

from . import limits, params
from .schemas import SCHEMAS


def _error(description: str) -> dict:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


IMAGE_BODY_DOC = ("The image (JPEG, PNG or WebP; EXIF orientation is applied) as the raw request body, "
                  "Content-Type image/jpeg, image/png or image/webp (application/octet-stream too: the bytes "
                  "decide), or as the file part `image` of a multipart/form-data body, whose other fields may "
                  "carry the parameters below (a form field wins over the query; same rules). Limits: the "
                  "request body (DATARAILROAD_MAX_UPLOAD_BYTES, "
                  f"{limits.DEFAULT_MAX_UPLOAD_BYTES >> 20} MB by default -> 413), the decoded size "
                  "(DATARAILROAD_MAX_IMAGE_PIXELS, "
                  f"{limits.DEFAULT_MAX_IMAGE_PIXELS / 1e6:g} M pixels by default -> 413) and the aspect "
                  f"ratio (the longer side at most {limits.MAX_ASPECT_RATIO} times the shorter -> 422 "
                  "image_aspect_ratio).")


IMAGE_TYPES = ("image/jpeg", "image/png", "image/webp")


def _body() -> dict:
    """The image as a raw body of a declared image type, never empty. Multipart (field `image`)
    and application/octet-stream are accepted too (IMAGE_BODY_DOC) but not declared: their
    schema could only say "any bytes", and bytes that are no image get 415, so the document
    would promise more than the server accepts."""
    raw = {"type": "string", "format": "binary", "minLength": 1}
    return {"required": True, "description": IMAGE_BODY_DOC,
            "content": {media_type: {"schema": raw} for media_type in IMAGE_TYPES}}


VIDEO_BODY_DOC = ("The video (MP4/QuickTime, WebM/Matroska or AVI, told by its first bytes; any codec the server's "
                  "FFmpeg decodes: VP8, VP9, H.264, HEVC, MPEG-4, MJPEG) as the raw request body, Content-Type "
                  "video/mp4, video/webm or video/x-msvideo (application/octet-stream or another video/* type too: "
                  "the bytes decide), or as the file part `video` of a multipart/form-data body, whose other fields "
                  "may carry the parameters below. Decoded in memory, a frame at a time. Limits: the request body "
                  "(DATARAILROAD_MAX_UPLOAD_BYTES, "
                  f"{limits.DEFAULT_MAX_UPLOAD_BYTES >> 20} MB by default -> 413), the frames "
                  f"({limits.DEFAULT_MAX_VIDEO_FRAMES} by default, DATARAILROAD_MAX_VIDEO_FRAMES -> 413 "
                  "too_many_frames: never cut silently) and each frame's pixels (DATARAILROAD_MAX_IMAGE_PIXELS -> "
                  "413 frame_too_large).")
VIDEO_TYPES = ("video/mp4", "video/webm", "video/x-msvideo")


def _video_body() -> dict:
    """Declared like the images' body (see _body); no schema can tell which bytes are a video."""
    raw = {"type": "string", "format": "binary", "minLength": 1}
    return {"required": True, "description": VIDEO_BODY_DOC,
            "content": {media_type: {"schema": raw} for media_type in VIDEO_TYPES}}


ERRORS = {
    "400": _error("empty body, missing `image` field, or a bad parameter value (code bad_parameter, "
                  "missing_image, empty_image, wrong_task)"),
    "404": _error("unknown model (code unknown_model)"),
    "405": _error("method not allowed"),
    "413": _error("upload over the size limit (payload_too_large) or image over the pixel limit "
                  "(image_too_large)"),
    "415": _error("not a JPEG, PNG or WebP image, or an unsupported Content-Type"),
    "422": _error(f"truncated or corrupt image (unprocessable_image), or a side over {limits.MAX_ASPECT_RATIO} "
                  "times the other (image_aspect_ratio)"),
    "503": _error("no model of the task installed (no_model) or its artifact fails to load (model_unavailable)"),
}


TRACK_ERRORS = {
    **ERRORS,
    "400": _error("empty body, missing `video` field, or a bad parameter value (code bad_parameter, missing_video, "
                  "empty_video, wrong_task)"),
    "413": _error("upload over the size limit (payload_too_large), a frame over the pixel limit (frame_too_large) "
                  "or more frames than the limit (too_many_frames)"),
    "415": _error("not an MP4, WebM or AVI video, or an unsupported Content-Type"),
    "422": _error("a video that does not open or has no frame that decodes (unprocessable_video), or frames with a "
                  f"side over {limits.MAX_ASPECT_RATIO} times the other (image_aspect_ratio)"),
}


def _operation(summary: str, description: str, parameters: list[dict], result: str, body: dict | None = None,
               errors: dict | None = None) -> dict:
    return {
        "summary": summary, "description": description, "parameters": parameters,
        "requestBody": body or _body(),
        "responses": {"200": {"description": "the result, in the pages' schema",
                              "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{result}"}}}},
                      **(errors or ERRORS)},
    }


def _parameters(declared: tuple[params.Param, ...], bounds: dict) -> list[dict]:
    """A route's declared parameters (server/params.py) as OpenAPI query parameters."""
    return [{"name": p.name, "in": "query", "required": False, "schema": p.schema(bounds), "description": p.doc}
            for p in declared]


@lru_cache(maxsize=8)
def _document(nms_iou: float | None, classes: int | None, variants: tuple[str, ...],
              models: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]) -> dict:
    """The document for the installed models' bounds (installed_bounds)."""
    def of(task_models: tuple[str, ...]) -> dict:
        return {"nms_iou": nms_iou, "num_classes": classes, "variants": variants, "model_ids": task_models}

    detectors, classifiers, hand_models = (of(ids) for ids in models)
    every_model = of(tuple(sorted({i for ids in models for i in ids})))
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {"title": "DataRailroad server API", "version": "1.0.0",
                 "description": "The models the pages run in the browser, run on the server (LiteRT, the same "
                                "weights). Results use the pages' schema. Errors: "
                                "{\"error\": {\"code\", \"message\"}}."},
        "paths": {
            "/api/v1/models": {"get": {
                "summary": "Installed models (from their manifests)",
                "responses": {"200": {"description": "installed models",
                                      "content": {"application/json": {
                                          "schema": {"$ref": "#/components/schemas/ModelList"}}}}}}},
            "/api/v1/models/{model_id}": {"get": {
                "summary": "One installed model's card: source, sha256, licence, sizes, measured parity and speed",
                "parameters": [{"name": "model_id", "in": "path", "required": True,
                                "schema": params.MODEL.schema(every_model)}],
                "responses": {"200": {"description": "the model card (the same JSON the pages render)",
                                      "content": {"application/json": {
                                          "schema": {"$ref": "#/components/schemas/ModelCard"}}}},
                              "404": ERRORS["404"], "503": ERRORS["503"]}}},
            "/api/v1/detect": {"post": _operation(
                "Object detection",
                "Letterbox per the manifest, the detector, NMS, boxes back in source pixels (as the detect page). "
                "Models with NMS in the graph (yolov5n) have a fixed IoU and score floor: `iou` must be omitted "
                "or equal the model's, scores below the floor never appear.",
                _parameters(params.DETECT, detectors), "DetectResult")},
            "/api/v1/track": {"post": _operation(
                "Object tracking and line counts in a short video",
                "Every frame (or every `stride`-th) through the detector as /detect runs it, then the detect page's "
                "tracker and line counter (modelcontract/track.py, the twin of static/js/contract/track.js, with its "
                "defaults): the same tracks and counts as the page's Track mode on the same frames, in its "
                "exports' schema (tracks.csv rows, counts.json).",
                _parameters(params.TRACK, detectors), "TrackResult", _video_body(), TRACK_ERRORS)},
            "/api/v1/classify": {"post": _operation(
                "Image classification",
                "Centre crop per the manifest, the classifier, top-k (as the classify page). A multipart body may "
                "carry, beside `image`, the file part `custom`: your classes exported from the classify page's "
                "Teach panel (format datarailroad-image-classes, at most 10 classes of 60 examples; a bad file, or "
                "a model without the feature output -> 400 bad_custom); the answer then has `custom`, the page's "
                "match.",
                _parameters(params.CLASSIFY, classifiers), "ClassifyResult")},
            "/api/v1/hands": {"post": _operation(
                "Hand landmarks",
                "MediaPipe Hands (palm detector + landmark model) with the decoding of "
                "@tensorflow-models/hand-pose-detection in static-image mode, as the hands page runs it. A "
                "multipart body may carry, beside `image`, the file part `custom`: a gesture set exported from "
                "the hands page (format datarailroad-hand-gestures, at most 20 gestures of 300 examples; a bad "
                "file -> 400 bad_custom); each hand then has `custom`, the page's match.",
                _parameters(params.HANDS, hand_models), "HandsResult")},
            "/api/v1/openapi.json": {"get": {"summary": "This document",
                                             "responses": {"200": {"description": "OpenAPI 3.1 document"}}}},
        },
        "components": {"schemas": SCHEMAS},
    }


def installed_bounds() -> tuple:
    """What the installed models of each task accept, the document's values of the bounds
    params.py names (the runners': DetectRunner.options, ClassifyRunner.num_classes,
    HandsRunner.variants), read from their manifests without loading one: (in-graph NMS IoU or
    None, smallest class count or None, hand variants all offer, (detect, classify, handpose
    model ids))."""
    from flask import current_app, has_app_context

    from . import manifests

    if not has_app_context():
        return None, None, VARIANTS, ((), (), ())
    installed = [m for m in manifests.load_all(Path(current_app.config["MODELS_DIR"])) if m.get("server")]

    def of(task):
        return [m for m in installed if m.get("task") == task]

    in_graph = sorted({nms_defaults(m)["iou"] for m in of("detect") if (m.get("outputs") or {}).get("format") == "nms"})
    classes = [class_count(m) for m in of("classify")]
    variants = [v for v in VARIANTS if all(f"detector_{v}" in m["server"].get("models", {}) for m in of("handpose"))]
    return (in_graph[0] if in_graph else None, min(classes) if classes else None, tuple(variants or VARIANTS),
            tuple(tuple(m["id"] for m in of(task)) for task in ("detect", "classify", "handpose")))


def document() -> dict:
    return copy.deepcopy(_document(*installed_bounds()))
