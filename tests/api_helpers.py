"""Moved to tests/helpers.py (functions) and tests/conftest.py (the api_models fixture); this
name stays only until the last importers have moved."""
from tests.conftest import api_models  # noqa: F401
from tests.helpers import decoded, encode, need, photo_bytes, png_bomb  # noqa: F401
