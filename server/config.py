"""Configuration from environment variables, with defaults that work from a checkout."""
from __future__ import annotations

import os
from pathlib import Path

from modelcontract.limits import DEFAULT_MAX_IMAGE_PIXELS, DEFAULT_MAX_UPLOAD_BYTES, DEFAULT_MAX_VIDEO_FRAMES
from modelcontract.paths import ROOT, default_models_dir


def from_env() -> dict:
    """Flask config keys read from the environment (DATARAILROAD_*)."""
    env = os.environ
    return {
        "MODELS_DIR": default_models_dir(),
        "NODE_MODULES_DIR": Path(env.get("DATARAILROAD_NODE_MODULES", ROOT / "node_modules")).resolve(),
        # Upload limit (bytes): Flask answers 413 past it.
        "MAX_CONTENT_LENGTH": int(env.get("DATARAILROAD_MAX_UPLOAD_BYTES", DEFAULT_MAX_UPLOAD_BYTES)),
        # Decoded image limit (pixels): guards against decompression bombs.
        "MAX_IMAGE_PIXELS": int(env.get("DATARAILROAD_MAX_IMAGE_PIXELS", DEFAULT_MAX_IMAGE_PIXELS)),
        # Frames in one uploaded video (POST /api/v1/track): 413 past it.
        "MAX_VIDEO_FRAMES": int(env.get("DATARAILROAD_MAX_VIDEO_FRAMES", DEFAULT_MAX_VIDEO_FRAMES)),
        "HOST": env.get("DATARAILROAD_HOST", "127.0.0.1"),
        "PORT": int(env.get("DATARAILROAD_PORT", 8000)),
    }
