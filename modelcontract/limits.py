"""Limits and id rules of the model contract, shared by the converters, the pages and the API:
detection defaults and caps, and what a model id may be. The server's own request limits
(body and image sizes, videos, request syntax) are in server/limits.py."""
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
