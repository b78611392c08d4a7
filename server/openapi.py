"""The OpenAPI 3.1 document of /api/v1 (served at /api/v1/openapi.json).

Schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect): tests validate real responses
against them with jsonschema. The result schemas are the pages' result objects
(README "The server API") plus ``model``, ``image`` and ``timing_ms``.
"""
from __future__ import annotations

import copy
from functools import lru_cache

NUMBER_01 = {"type": "number", "minimum": 0, "maximum": 1}


def _error(description: str) -> dict:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _param(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


MODEL_PARAM = _param("model", {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
                     "installed model id (GET /api/v1/models); default: the first installed float32 model "
                     "of the task")

IMAGE_BODY_DOC = ("The image (JPEG, PNG or WebP; EXIF orientation is applied) as the multipart field `image`, "
                  "or as the raw request body. Parameters go in the query string or, with multipart, as form "
                  "fields (a form field wins over the query). Limits: the request body "
                  "(DATARAILROAD_MAX_UPLOAD_BYTES, 10 MB -> 413) and the decoded size "
                  "(DATARAILROAD_MAX_IMAGE_PIXELS, 40 M pixels -> 413).")


def _body(fields: dict) -> dict:
    form = {"type": "object", "required": ["image"],
            "properties": {"image": {"type": "string", "contentMediaType": "application/octet-stream",
                                     "description": "the image file"},
                           **{k: {"type": "string", "description": v} for k, v in fields.items()}}}
    raw = {"type": "string", "contentMediaType": "application/octet-stream"}
    return {"required": True, "description": IMAGE_BODY_DOC,
            "content": {"multipart/form-data": {"schema": form},
                        "image/jpeg": {"schema": raw}, "image/png": {"schema": raw},
                        "image/webp": {"schema": raw}, "application/octet-stream": {"schema": raw}}}


ERRORS = {
    "400": _error("empty body, missing `image` field, or a bad parameter value (code bad_parameter, "
                  "missing_image, empty_image, wrong_task)"),
    "404": _error("unknown model (code unknown_model)"),
    "405": _error("method not allowed"),
    "413": _error("upload over the size limit (payload_too_large) or image over the pixel limit "
                  "(image_too_large)"),
    "415": _error("not a JPEG, PNG or WebP image, or an unsupported Content-Type"),
    "422": _error("truncated or corrupt image (unprocessable_image)"),
    "503": _error("no model of the task installed (no_model) or its artifact fails to load (model_unavailable)"),
}


def _operation(summary: str, description: str, params: list[dict], result: str) -> dict:
    fields = {p["name"]: p["description"] for p in params}
    return {
        "summary": summary, "description": description, "parameters": params,
        "requestBody": _body(fields),
        "responses": {"200": {"description": "the result, in the pages' schema",
                              "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{result}"}}}},
                      **ERRORS},
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
                       "score": NUMBER_01, "box": {"$ref": "#/components/schemas/Box"}},
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
    "ClassifyResult": {
        "type": "object", "required": ["model", "image", "top", "timing_ms"], "additionalProperties": False,
        "properties": {"model": {"type": "string"}, "image": {"$ref": "#/components/schemas/ImageSize"},
                       "top": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/ClassScore"}},
                       "timing_ms": {"$ref": "#/components/schemas/Timing"}},
    },
    "Hand": {
        "type": "object", "required": ["handedness", "model_handedness", "score", "gesture", "keypoints"],
        "additionalProperties": False,
        "properties": {
            "handedness": {"type": "string", "enum": ["Left", "Right"],
                           "description": "the person's hand, as the hands page labels it (the model's label "
                                          "swapped: MediaPipe assumes a mirrored selfie picture)"},
            "model_handedness": {"type": "string", "enum": ["Left", "Right"], "description": "the model's own label"},
            "score": NUMBER_01,
            "gesture": {"type": "string", "enum": ["thumbs_up", "thumbs_down", "none"],
                        "description": "static/js/gesture.js's rules for a still image"},
            "keypoints": {"type": "array", "minItems": 21, "maxItems": 21,
                          "description": "MediaPipe's 21 hand landmarks (wrist, thumb_cmc, ... pinky_finger_tip), "
                                         "x, y in source-image pixels (may lie outside the image)",
                          "items": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}},
        },
    },
    "HandsResult": {
        "type": "object", "required": ["model", "variant", "image", "hands", "timing_ms"],
        "additionalProperties": False,
        "properties": {"model": {"type": "string"}, "variant": {"type": "string", "enum": ["full", "lite"]},
                       "image": {"$ref": "#/components/schemas/ImageSize"},
                       "hands": {"type": "array", "items": {"$ref": "#/components/schemas/Hand"}},
                       "timing_ms": {"$ref": "#/components/schemas/Timing"}},
    },
    "ModelSummary": {
        "type": "object", "required": ["id", "task"],
        "properties": {"id": {"type": "string"}, "name": {"type": ["string", "null"]},
                       "title": {"type": "string"},
                       "task": {"type": ["string", "null"], "description": "detect, classify or handpose"},
                       "quantization": {"type": "string"}, "input": {"type": ["object", "null"]},
                       "outputs": {"type": "object"}, "tfjs": {"type": ["object", "null"]},
                       "bytes": {"type": "integer", "minimum": 0}, "parity_passed": {"type": ["boolean", "null"]},
                       "source": {"type": "object"}, "created": {"type": ["string", "null"]}},
    },
    "ModelList": {
        "type": "object", "required": ["models"], "additionalProperties": False,
        "properties": {"models": {"type": "array", "items": {"$ref": "#/components/schemas/ModelSummary"}}},
    },
}


@lru_cache(maxsize=1)
def _document() -> dict:
    score = NUMBER_01
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
            "/api/v1/detect": {"post": _operation(
                "Object detection",
                "Letterbox per the manifest, the detector, NMS, boxes back in source pixels (as the detect page). "
                "Models with NMS in the graph (yolov5n) have a fixed IoU and score floor: `iou` must be omitted "
                "or equal the model's, scores below the floor never appear.",
                [MODEL_PARAM,
                 _param("score", score, "minimum score (default: the manifest's, 0.25)"),
                 _param("iou", score, "NMS IoU threshold (default: the manifest's)"),
                 _param("max_det", {"type": "integer", "minimum": 1, "maximum": 1000},
                        "maximum detections (default 100; in-graph NMS caps it at its own row count)")],
                "DetectResult")},
            "/api/v1/classify": {"post": _operation(
                "Image classification", "Centre crop per the manifest, the classifier, top-k (as the classify page).",
                [MODEL_PARAM, _param("top_k", {"type": "integer", "minimum": 1},
                                     "number of classes returned (default 5, at most the model's class count)")],
                "ClassifyResult")},
            "/api/v1/hands": {"post": _operation(
                "Hand landmarks",
                "MediaPipe Hands (palm detector + landmark model) with the decoding of "
                "@tensorflow-models/hand-pose-detection in static-image mode, as the hands page runs it.",
                [MODEL_PARAM,
                 _param("score", score, "minimum hand presence score (default 0.5, the library's)"),
                 _param("detect_score", score, "palm detection score cut, MediaPipe's min_detection_confidence "
                                               "(default 0.5, the library's); the hands page's slider"),
                 _param("max_det", {"type": "integer", "minimum": 1, "maximum": 10}, "maximum hands (default 2)"),
                 _param("variant", {"type": "string", "enum": ["full", "lite"]}, "model pair (default full)")],
                "HandsResult")},
            "/api/v1/openapi.json": {"get": {"summary": "This document",
                                             "responses": {"200": {"description": "OpenAPI 3.1 document"}}}},
        },
        "components": {"schemas": SCHEMAS},
    }


def document() -> dict:
    return copy.deepcopy(_document())
