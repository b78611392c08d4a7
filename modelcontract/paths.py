"""Where installed models live: DATARAILROAD_MODELS, else models/ in the checkout. The
converters install there and the server reads from there."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def default_models_dir() -> Path:
    return Path(os.environ.get("DATARAILROAD_MODELS", ROOT / "models")).resolve()
