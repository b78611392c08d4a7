"""Where installed models live: DATARAILROAD_MODELS (modelcontract/settings.py), else models/
in the checkout. The converters install there and the server reads from there."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def default_models_dir() -> Path:
    from .settings import load  # settings imports ROOT from here

    return load().models
