"""The app's settings (server/settings.py: one typed, frozen object) and the Flask
config keys that mirror some of them."""
from __future__ import annotations

import dataclasses

from flask import Flask, current_app

from .settings import Settings

EXTENSION = "datarailroad.settings"

# Flask config key -> the setting it mirrors. Flask and the app's routes read these keys;
# create_app(config) with one of them overrides that setting (the tests' usual way).
MIRRORED = {"MODELS_DIR": "models", "MAX_CONTENT_LENGTH": "max_upload_bytes",
            "MAX_IMAGE_PIXELS": "max_image_pixels", "MAX_VIDEO_FRAMES": "max_video_frames"}


def with_config(settings: Settings, config: dict) -> Settings:
    """``settings`` with the mirrored keys of a Flask ``config`` applied (validated)."""
    changes = {name: config[key] for key, name in MIRRORED.items() if key in config}
    return dataclasses.replace(settings, **changes) if changes else settings


def flask_config(settings: Settings) -> dict:
    return {key: getattr(settings, name) for key, name in MIRRORED.items()}


def settings(app: Flask | None = None) -> Settings:
    """The settings create_app gave ``app`` (default: the current app)."""
    return (app or current_app).extensions[EXTENSION]
