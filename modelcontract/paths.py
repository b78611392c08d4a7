"""The checkout's root: the defaults of the settings' folders (modelcontract/settings.py:
models/, node_modules/, certs/) are inside it."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
