"""Transitional: the input contract moved to modelcontract.geometry. Kept only until
tests/test_api.py and tests/test_convert_handpose.py import it from there."""
from modelcontract.geometry import Transform, prepare, resize_bilinear  # noqa: F401
