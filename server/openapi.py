"""The OpenAPI 3.1 document of /api/v1 (served at /api/v1/openapi.json).

Schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect): tests validate real responses
against them with jsonschema, and schemathesis (`--checks all`, tests/convert/test_openapi_schemathesis.py)
checks that every request the document calls valid is answered 2xx and every invalid one 4xx.
So the document promises only what the server accepts: an image body of a declared image type
(application/octet-stream is accepted too but not declared: it admits any bytes), and the
parameters that depend on the installed default models (the in-graph NMS IoU of the default
detector, the default classifier's class count, the installed hand-model variants) as they are.
The result schemas are the pages' result objects (docs/server.md) plus ``model``,
``image`` and ``timing_ms``.
"""
from __future__ import annotations

import copy
from pathlib import Path
from functools import lru_cache

from modelcontract import limits
from modelcontract.decode import DEFAULT_TOP_K, class_count, nms_defaults
from modelcontract.gesture import GESTURES
from modelcontract.hands import DEFAULT_MAX_HANDS, HANDEDNESS, VARIANTS

from . import limits as request_limits

NUMBER_01 = {"type": "number", "minimum": 0, "maximum": 1}
POINT = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}


def _error(description: str) -> dict:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _param(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _model_param(ids: tuple[str, ...]) -> dict:
    """The installed models of the task (another id: 404 unknown_model, or 400 wrong_task)."""
    schema = {"type": "string", "enum": list(ids)} if ids else \
        {"type": "string", "pattern": f"^{limits.MODEL_ID_PATTERN}$"}
    return _param("model", schema, "installed model id of the task (GET /api/v1/models); default: the first "
                                    "of the task's installed float32 (unquantised) models, in preference order, that "
                                    "can serve (when none is installed: of its models with a server artifact)")

IMAGE_BODY_DOC = ("The image (JPEG, PNG or WebP; EXIF orientation is applied) as the raw request body, "
                  "Content-Type image/jpeg, image/png or image/webp (application/octet-stream too: the bytes "
                  "decide), or as the file part `image` of a multipart/form-data body, whose other fields may "
                  "carry the parameters below (a form field wins over the query; same rules). Limits: the "
                  "request body (DATARAILROAD_MAX_UPLOAD_BYTES, "
                  f"{request_limits.DEFAULT_MAX_UPLOAD_BYTES >> 20} MB by default -> 413), the decoded size "
                  "(DATARAILROAD_MAX_IMAGE_PIXELS, "
                  f"{request_limits.DEFAULT_MAX_IMAGE_PIXELS / 1e6:g} M pixels by default -> 413) and the aspect "
                  f"ratio (the longer side at most {request_limits.MAX_ASPECT_RATIO} times the shorter -> 422 "
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
                  f"{request_limits.DEFAULT_MAX_UPLOAD_BYTES >> 20} MB by default -> 413), the frames "
                  f"({request_limits.DEFAULT_MAX_VIDEO_FRAMES} by default, DATARAILROAD_MAX_VIDEO_FRAMES -> 413 "
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
    "422": _error(f"truncated or corrupt image (unprocessable_image), or a side over {request_limits.MAX_ASPECT_RATIO} "
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
                  f"side over {request_limits.MAX_ASPECT_RATIO} times the other (image_aspect_ratio)"),
}


def _operation(summary: str, description: str, params: list[dict], result: str, body: dict | None = None,
               errors: dict | None = None) -> dict:
    return {
        "summary": summary, "description": description, "parameters": params,
        "requestBody": body or _body(),
        "responses": {"200": {"description": "the result, in the pages' schema",
                              "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{result}"}}}},
                      **(errors or ERRORS)},
    }


SCHEMAS = {
    "Error": {
        "type": "object", "required": ["error"], "additionalProperties": False,
        "properties": {"error": {"type": "object", "required": ["code", "message"], "additionalProperties": False,
                                 "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}},
    },
    "ImageSize": {
        "type": "object", "required": ["width", "height"], "additionalProperties": False,
        "description": "the decoded image, after EXIF orientation",
        "properties": {"width": {"type": "integer", "minimum": 1}, "height": {"type": "integer", "minimum": 1}},
    },
    "Timing": {
        "type": "object", "description": "milliseconds per stage; `total` is the whole request",
        "required": ["decode", "total"],
        "additionalProperties": {"type": "number", "minimum": 0},
    },
    "Box": {"type": "array", "items": {"type": "number", "minimum": 0}, "minItems": 4, "maxItems": 4,
            "description": "x1, y1, x2, y2 in source-image pixels (clamped to the image)"},
    "Detection": {
        "type": "object", "required": ["class_id", "label", "score", "box"], "additionalProperties": False,
        "properties": {"class_id": {"type": "integer", "minimum": 0}, "label": {"type": "string"},
                       "score": NUMBER_01, "box": {"$ref": "#/components/schemas/Box"},
                       "polygons": {"type": "array", "items": {"type": "array", "items": POINT},
                                    "description": "segmentation models: the instance mask's outline in source "
                                                   "pixels, one polygon per connected part (pixel corners)"},
                       "keypoints": {"type": "array", "items": {"type": "array", "items": {"type": "number"},
                                                                "minItems": 3, "maxItems": 3},
                                     "description": "pose models: x, y (source pixels) and visibility (0-1; 1 where "
                                                    "the model gives none), in the model's keypoint order"},
                       "corners": {"type": "array", "items": POINT, "minItems": 4, "maxItems": 4,
                                   "description": "OBB models: the rotated box's corners in source pixels (not "
                                                  "clamped); `box` is their bounding box"},
                       "angle": {"type": "number", "minimum": 0, "description": "OBB models: radians, [0, pi/2)"}},
    },
    "DetectResult": {
        "type": "object", "required": ["model", "image", "detections", "timing_ms"], "additionalProperties": False,
        "properties": {"model": {"type": "string"}, "image": {"$ref": "#/components/schemas/ImageSize"},
                       "detections": {"type": "array", "items": {"$ref": "#/components/schemas/Detection"}},
                       "timing_ms": {"$ref": "#/components/schemas/Timing"}},
    },
    "ClassScore": {
        "type": "object", "required": ["class_id", "label", "probability"], "additionalProperties": False,
        "properties": {"class_id": {"type": "integer", "minimum": 0}, "label": {"type": "string"},
                       "probability": NUMBER_01},
    },
    "CustomMatch": {
        "type": ["object", "null"], "required": ["name", "distance", "confidence", "votes"],
        "description": "only when the request has a 'custom' file: the nearest of its classes (gestures) as the "
                       "page matches them (static/js/contract/example_sets.js), or null when none is near enough",
        "properties": {"name": {"type": "string"}, "distance": {"type": "number", "minimum": 0},
                       "confidence": NUMBER_01, "votes": {"type": "object", "additionalProperties": NUMBER_01}},
    },
    "ClassifyResult": {
        "type": "object", "required": ["model", "image", "top", "timing_ms"], "additionalProperties": False,
        "properties": {"model": {"type": "string"}, "image": {"$ref": "#/components/schemas/ImageSize"},
                       "top": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/ClassScore"}},
                       "custom": {"$ref": "#/components/schemas/CustomMatch"},
                       "timing_ms": {"$ref": "#/components/schemas/Timing"}},
    },
    "Hand": {
        "type": "object", "required": ["handedness", "model_handedness", "score", "gesture", "keypoints"],
        "additionalProperties": False,
        "properties": {
            "handedness": {"type": "string", "enum": list(HANDEDNESS),
                           "description": "the person's hand, as the hands page labels it (the model's label "
                                          "swapped: MediaPipe assumes a mirrored selfie picture)"},
            "model_handedness": {"type": "string", "enum": list(HANDEDNESS), "description": "the model's own label"},
            "score": NUMBER_01,
            "gesture": {"type": "string", "enum": list(GESTURES),
                        "description": "static/js/contract/gesture.js's rules for a still image"},
            "custom": {"$ref": "#/components/schemas/CustomMatch"},
            "keypoints": {"type": "array", "minItems": 21, "maxItems": 21,
                          "description": "MediaPipe's 21 hand landmarks (wrist, thumb_cmc, ... pinky_finger_tip), "
                                         "x, y in source-image pixels (may lie outside the image)",
                          "items": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}},
        },
    },
    "HandsResult": {
        "type": "object", "required": ["model", "variant", "image", "hands", "timing_ms"],
        "additionalProperties": False,
        "properties": {"model": {"type": "string"}, "variant": {"type": "string", "enum": list(VARIANTS)},
                       "image": {"$ref": "#/components/schemas/ImageSize"},
                       "hands": {"type": "array", "items": {"$ref": "#/components/schemas/Hand"}},
                       "timing_ms": {"$ref": "#/components/schemas/Timing"}},
    },
    "VideoInfo": {
        "type": "object", "required": ["width", "height", "frames", "fps"], "additionalProperties": False,
        "description": "the decoded video: its first frame's size (after rotation metadata), every frame it has, "
                       "and its frame rate as the container states it (null when it states none)",
        "properties": {"width": {"type": "integer", "minimum": 1}, "height": {"type": "integer", "minimum": 1},
                       "frames": {"type": "integer", "minimum": 1},
                       "fps": {"type": ["number", "null"], "exclusiveMinimum": 0}},
    },
    "TrackRow": {
        "type": "array", "minItems": 8, "maxItems": 8,
        "description": "one track on one frame, the columns of the detect page's tracks.csv (MOTChallenge): frame "
                       "(the video's, from 1), id (from 1), x, y, w, h (the box's left, top, width and height in "
                       "source pixels), score, class (class id); full precision (the page's CSV rounds)",
        "prefixItems": [{"type": "integer", "minimum": 1}, {"type": "integer", "minimum": 1},
                        {"type": "number"}, {"type": "number"}, {"type": "number", "minimum": 0},
                        {"type": "number", "minimum": 0}, NUMBER_01, {"type": "integer", "minimum": 0}],
    },
    "LineCounts": {
        "type": "object", "required": ["line", "counts", "frames", "tracks", "classes"], "additionalProperties": False,
        "description": "the detect page's counts.json record",
        "properties": {
            "line": {"oneOf": [{"type": "null"}, {
                "type": "object", "required": ["from", "to"], "additionalProperties": False,
                "properties": {end: {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
                               for end in ("from", "to")}}],
                     "description": "the `line` parameter, null without one"},
            "counts": {"type": "object", "description": "crossings per class label: in = to the line's right as "
                                                        "drawn (from -> to, y down), out = to its left; each track "
                                                        "counts once per direction; {} without a line",
                       "additionalProperties": {"type": "object", "required": ["in", "out"],
                                                "additionalProperties": False,
                                                "properties": {"in": {"type": "integer", "minimum": 0},
                                                               "out": {"type": "integer", "minimum": 0}}}},
            "frames": {"type": "integer", "minimum": 1, "description": "frames the tracker saw (every stride-th)"},
            "tracks": {"type": "integer", "minimum": 0, "description": "track IDs given"},
            "classes": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
                        "description": "label -> class id of every class tracked"},
        },
    },
    "TrackResult": {
        "type": "object", "required": ["model", "video", "tracks", "counts", "timing_ms"],
        "additionalProperties": False,
        "properties": {"model": {"type": "string"}, "video": {"$ref": "#/components/schemas/VideoInfo"},
                       "tracks": {"type": "array", "items": {"$ref": "#/components/schemas/TrackRow"}},
                       "counts": {"$ref": "#/components/schemas/LineCounts"},
                       "shapes": {"type": "array", "items": {"$ref": "#/components/schemas/TrackShape"},
                                  "description": "segmentation, pose and OBB models only: one per row of "
                                                 "`tracks`, in order"},
                       "timing_ms": {"$ref": "#/components/schemas/Timing"}},
    },
    "TrackShape": {
        "type": "object", "additionalProperties": False,
        "description": "what the detection a track matched on that frame adds to its box (see Detection): "
                       "`polygons` (segmentation), `keypoints` (pose), `corners` and `angle` (OBB)",
        "properties": {"polygons": {"type": "array", "items": {"type": "array", "items": POINT}},
                       "keypoints": {"type": "array", "items": {"type": "array", "items": {"type": "number"},
                                                                "minItems": 3, "maxItems": 3}},
                       "corners": {"type": "array", "items": POINT, "minItems": 4, "maxItems": 4},
                       "angle": {"type": "number", "minimum": 0}},
    },
    "ModelSummary": {
        "type": "object", "required": ["id", "task"],
        "properties": {"id": {"type": "string"}, "name": {"type": ["string", "null"]},
                       "title": {"type": "string"},
                       "task": {"type": ["string", "null"], "description": "detect, classify or handpose"},
                       "group": {"type": ["string", "null"], "description": "what it finds: detect, segment, "
                                 "pose or obb for a detect model (its outputs.format), else its task"},
                       "official": {"type": "boolean", "description": "built from an official Ultralytics "
                                    "release checkpoint, its sha256 checked"},
                       "quantization": {"type": "string"}, "input": {"type": ["object", "null"]},
                       "outputs": {"type": "object"}, "tfjs": {"type": ["object", "null"]},
                       "bytes": {"type": "integer", "minimum": 0}, "parity_passed": {"type": ["boolean", "null"]},
                       "source": {"type": "object"}, "created": {"type": ["string", "null"]},
                       "status": {"const": "broken", "description": "only on a model whose manifest.json is "
                                  "invalid (task null, no other field but error)"},
                       "error": {"type": "string"}},
    },
    "ModelCard": {
        "type": "object", "description": "what the pages' #model-card shows (server/cards.py)",
        "required": ["id", "title", "task", "input", "source", "licence", "quantization", "sizes", "parity", "speed",
                     "agreement", "tools", "created", "picker"],
        "properties": {
            "id": {"type": "string"}, "title": {"type": "string"}, "task": {"type": ["string", "null"]},
            "finds": {"type": "object", "description": "what it finds: group (detect, segment, pose, obb, or the "
                      "task), class names, keypoints per instance, the official checkpoint and its data"},
            "input": {"type": ["object", "null"], "description": "the model's input width and height in pixels"},
            "source": {"type": "object", "required": ["kind", "url", "sha256", "sha256_prefix"],
                       "description": "the weights' origin; sha256 null for random weights",
                       "properties": {"kind": {"type": "string"}, "url": {"type": ["string", "null"]},
                                      "sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"},
                                      "sha256_prefix": {"type": ["string", "null"], "pattern": "^[0-9a-f]{8}$"}}},
            "licence": {"type": "object", "required": ["name", "url"],
                        "description": "the weights' licence; name \"unknown\" when the build did not record it",
                        "properties": {"name": {"type": "string"}, "url": {"type": ["string", "null"]}}},
            "quantization": {"type": "object"},
            "sizes": {"type": "object", "description": "bytes: browser (TF.js, .tflite on LiteRT.js) and server (.tflite)"},
            "parity": {"type": ["object", "null"], "required": ["relative", "reference", "photo", "text"],
                       "description": "the TF.js graph vs the source framework at build, e.g. \"max relative error "
                                      "3.6e-6 vs PyTorch on bus.jpg\"",
                       "properties": {"relative": {"type": "number", "minimum": 0}, "reference": {"type": "string"},
                                      "photo": {"type": ["string", "null"]}, "text": {"type": "string"}}},
            "speed": {"type": ["object", "null"], "description": "median native ms per inference measured at build"},
            "agreement": {"type": ["object", "null"],
                          "description": "a smaller-input model: how many of its reference's detections it keeps"},
            "tools": {"type": "object"}, "created": {"type": ["string", "null"]},
            "picker": {"type": "string", "description": "the pages' one-line picker label"},
        },
    },
    "ModelList": {
        "type": "object", "required": ["models"], "additionalProperties": False,
        "properties": {"models": {"type": "array", "items": {"$ref": "#/components/schemas/ModelSummary"}}},
    },
}


@lru_cache(maxsize=8)
def _document(nms_iou: float | None, classes: int | None, variants: tuple[str, ...],
              models: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]) -> dict:
    score = NUMBER_01
    detectors, classifiers, hand_models = (_model_param(ids) for ids in models)
    # A detector with NMS in its graph accepts only its own IoU (else 400).
    iou = {"type": "number", "enum": [nms_iou]} if nms_iou is not None else score
    top_k = {"type": "integer", "minimum": 1, **({"maximum": classes} if classes else {})}
    detect_params = [
        detectors,
        _param("score", score, f"minimum score (default: the manifest's, {limits.DEFAULT_SCORE})"),
        _param("iou", iou, f"NMS IoU threshold (default: the manifest's, {limits.DEFAULT_IOU}; the default "
                           "model's own when it runs NMS in its graph)"),
        _param("max_det", {"type": "integer", "minimum": 1, "maximum": limits.MAX_DET},
               f"maximum detections (default {limits.DEFAULT_MAX_DET}; in-graph NMS caps it at its own "
               "row count)"),
        _param("classes", {"type": "string", "pattern": f"^{request_limits.CLASS_IDS_PATTERN}$",
                           "maxLength": request_limits.CLASS_IDS_MAX_LENGTH},
               "only these class ids, comma-separated (default: all). Boxes of other classes are no "
               "candidates: they take no max_det place and suppress nothing (as the detect page's "
               "class filter)")]
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
                                "schema": _model_param(tuple(sorted({i for ids in models for i in ids})))["schema"]}],
                "responses": {"200": {"description": "the model card (the same JSON the pages render)",
                                      "content": {"application/json": {
                                          "schema": {"$ref": "#/components/schemas/ModelCard"}}}},
                              "404": ERRORS["404"], "503": ERRORS["503"]}}},
            "/api/v1/detect": {"post": _operation(
                "Object detection",
                "Letterbox per the manifest, the detector, NMS, boxes back in source pixels (as the detect page). "
                "Models with NMS in the graph (yolov5n) have a fixed IoU and score floor: `iou` must be omitted "
                "or equal the model's, scores below the floor never appear.",
                detect_params, "DetectResult")},
            "/api/v1/track": {"post": _operation(
                "Object tracking and line counts in a short video",
                "Every frame (or every `stride`-th) through the detector as /detect runs it, then the detect page's "
                "tracker and line counter (modelcontract/track.py, the twin of static/js/contract/track.js, with its "
                "defaults): the same tracks and counts as the page's Track mode on the same frames, in its "
                "exports' schema (tracks.csv rows, counts.json).",
                [*detect_params,
                 _param("line", {"type": "string", "pattern": f"^{request_limits.LINE_PATTERN}$"},
                        "the counting line x1,y1,x2,y2 in source pixels, from (x1, y1) to (x2, y2), two different "
                        "points (default: none, no counts)"),
                 _param("stride", {"type": "integer", "minimum": 1, "maximum": request_limits.MAX_VIDEO_STRIDE},
                        "track every n-th frame (1, 1 + n, ...; default 1: every frame). All frames are decoded "
                        "and count against the frame limit")],
                "TrackResult", _video_body(), TRACK_ERRORS)},
            "/api/v1/classify": {"post": _operation(
                "Image classification",
                "Centre crop per the manifest, the classifier, top-k (as the classify page). A multipart body may "
                "carry, beside `image`, the file part `custom`: your classes exported from the classify page's "
                "Teach panel (format datarailroad-image-classes, at most 10 classes of 60 examples; a bad file, or "
                "a model without the feature output -> 400 bad_custom); the answer then has `custom`, the page's "
                "match.",
                [classifiers, _param("top_k", top_k,
                                     f"number of classes returned (default {DEFAULT_TOP_K}, at most the model's "
                                     "class count)")],
                "ClassifyResult")},
            "/api/v1/hands": {"post": _operation(
                "Hand landmarks",
                "MediaPipe Hands (palm detector + landmark model) with the decoding of "
                "@tensorflow-models/hand-pose-detection in static-image mode, as the hands page runs it. A "
                "multipart body may carry, beside `image`, the file part `custom`: a gesture set exported from "
                "the hands page (format datarailroad-hand-gestures, at most 20 gestures of 300 examples; a bad "
                "file -> 400 bad_custom); each hand then has `custom`, the page's match.",
                [hand_models,
                 _param("score", score, "minimum hand presence score (default 0.5, the library's)"),
                 _param("detect_score", score, "palm detection score cut, MediaPipe's min_detection_confidence "
                                               "(default 0.5, the library's); the hands page's slider"),
                 _param("max_det", {"type": "integer", "minimum": 1, "maximum": limits.MAX_HANDS},
                        f"maximum hands (default {DEFAULT_MAX_HANDS})"),
                 _param("variant", {"type": "string", "enum": list(variants)}, "model pair (default full)")],
                "HandsResult")},
            "/api/v1/openapi.json": {"get": {"summary": "This document",
                                             "responses": {"200": {"description": "OpenAPI 3.1 document"}}}},
        },
        "components": {"schemas": SCHEMAS},
    }


def installed_defaults() -> tuple:
    """What the installed models of each task accept (server/inference: DetectRunner.options,
    ClassifyRunner's class count, HandsRunner.variants), read from their manifests without
    loading one: (in-graph NMS IoU or None, smallest class count or None, hand variants all
    offer, (detect, classify, handpose model ids))."""
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
    return copy.deepcopy(_document(*installed_defaults()))
