"""Limits and id rules shared by the API, its OpenAPI document, the pages and the converters."""
from __future__ import annotations

import re

# Detections per request: the API accepts up to MAX_DET; the detect page's own input stops
# at PAGE_MAX_DET (more boxes than that are unreadable on a frame). The defaults of the API
# and the detect page when the manifest's ``nms`` names none.
MAX_DET = 1000
PAGE_MAX_DET = 300
DEFAULT_MAX_DET = 100
DEFAULT_SCORE = 0.25
DEFAULT_IOU = 0.45
# Hands per request (the hands API's max_det).
MAX_HANDS = 10

# A model id: a folder name under the models folder and a URL path segment.
MODEL_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
MODEL_ID = re.compile(MODEL_ID_PATTERN)


def is_model_id(text: str) -> bool:
    return bool(MODEL_ID.fullmatch(text))


# A detector's class filter as a request sends it: class ids, comma-separated ("0,5"); an id
# the model does not have matches no box.
CLASS_IDS_PATTERN = r"[0-9]{1,6}(?:,[0-9]{1,6})*"
CLASS_IDS = re.compile(CLASS_IDS_PATTERN)
CLASS_IDS_MAX_LENGTH = 2048


def parse_class_ids(text: str) -> frozenset[int] | None:
    """"0,5" -> {0, 5}; None when the text breaks the rule."""
    if len(text) > CLASS_IDS_MAX_LENGTH or not CLASS_IDS.fullmatch(text):
        return None
    return frozenset(int(part) for part in text.split(","))


# Images: the longer side at most this many times the shorter (a 600x1 strip is refused
# before decoding, so preprocessing memory stays proportional to the model input).
MAX_ASPECT_RATIO = 100
# Defaults of the request body and decoded-size limits (the settings DATARAILROAD_MAX_UPLOAD_BYTES
# and DATARAILROAD_MAX_IMAGE_PIXELS override them: modelcontract/settings.py).
DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_IMAGE_PIXELS = 40_000_000
# Videos (POST /api/v1/track): frames in one upload (the setting DATARAILROAD_MAX_VIDEO_FRAMES
# overrides it; past it a 413, never a silently shortened answer), each frame within the image pixel
# limit. 600 frames: 20 s at 30 fps; about 50 s of one request for yolov5n at 640 (85 ms a frame
# on a 2-core machine).
DEFAULT_MAX_VIDEO_FRAMES = 600
# Processing every n-th frame of a video (its stride) at most this sparsely.
MAX_VIDEO_STRIDE = 30
# A counting line as a request sends it: "x1,y1,x2,y2" in source pixels (it may reach past the
# frame), plain decimals.
LINE_NUMBER = r"-?[0-9]{1,6}(?:\.[0-9]{1,6})?"
LINE_PATTERN = rf"{LINE_NUMBER}(?:,{LINE_NUMBER}){{3}}"
LINE = re.compile(LINE_PATTERN)
