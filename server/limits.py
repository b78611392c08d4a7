"""The server's request limits and request syntax, shared by the API, its parameter parsing,
the image and video decoders, the settings' defaults and the OpenAPI document. (The model
contract's limits, which the converters and pages share too, are modelcontract/limits.py.)"""
from __future__ import annotations

import re

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
# and DATARAILROAD_MAX_IMAGE_PIXELS override them: server/settings.py).
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
