"""The API's result objects as JSON Schema 2020-12: the OpenAPI document's components
(server/openapi.py), which tests validate real responses against. Plain data: a new result
property is one more entry in its schema's ``properties`` (the pages' result schema,
docs/server.md, plus ``model``, ``image`` and ``timing_ms``)."""
from __future__ import annotations

from modelcontract.gesture import GESTURES
from modelcontract.hands import HANDEDNESS, VARIANTS

NUMBER_01 = {"type": "number", "minimum": 0, "maximum": 1}
POINT = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}


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
                       "detections": {"type": "array", "items": {"$ref": "#/components/schemas/Detection"},
                                      "description": "empty for a semantic segmentation or depth model"},
                       "semantic": {"$ref": "#/components/schemas/SemanticMap"},
                       "depth": {"$ref": "#/components/schemas/DepthMap"},
                       "timing_ms": {"$ref": "#/components/schemas/Timing"}},
    },
    "EncodedMap": {
        "type": "object", "required": ["encoding", "data"], "additionalProperties": False,
        "description": "a map of the photo, one value a pixel, as a base64 greyscale PNG of the photo's size "
                       "(modelcontract/dense.py decode_map reads it back)",
        "properties": {"encoding": {"enum": ["png", "png16"],
                                    "description": "png: 8-bit, each value a class id; png16: 16-bit, depth = min + "
                                                   "value * (max - min) / 65535"},
                       "data": {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"}},
    },
    "SemanticMap": {
        "type": "object", "required": ["width", "height", "classes", "map"], "additionalProperties": False,
        "description": "a semantic segmentation model's class of every pixel (ultralytics_task semantic), as "
                       "Ultralytics' predict() makes it: logits cropped to the letterbox, resized, argmax",
        "properties": {"width": {"type": "integer", "minimum": 1}, "height": {"type": "integer", "minimum": 1},
                       "classes": {"type": "array", "description": "the classes present, most pixels first",
                                   "items": {"type": "object", "required": ["class_id", "label", "pixels", "share"],
                                             "additionalProperties": False,
                                             "properties": {"class_id": {"type": "integer", "minimum": 0},
                                                            "label": {"type": "string"},
                                                            "pixels": {"type": "integer", "minimum": 1},
                                                            "share": NUMBER_01}}},
                       "map": {"$ref": "#/components/schemas/EncodedMap"}},
    },
    "DepthMap": {
        "type": "object", "required": ["width", "height", "min", "max", "mean", "map"], "additionalProperties": False,
        "description": "a depth model's depth of every pixel (ultralytics_task depth), in the units it was trained "
                       "in (metres for a metric model), as predict() makes it (resized align_corners)",
        "properties": {"width": {"type": "integer", "minimum": 1}, "height": {"type": "integer", "minimum": 1},
                       "min": {"type": "number"}, "max": {"type": "number"}, "mean": {"type": "number"},
                       "map": {"$ref": "#/components/schemas/EncodedMap"}},
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
