"""Transitional: NMS moved to modelcontract.boxes. Kept only until tests/test_api.py imports it from there."""
from modelcontract.boxes import non_max_suppression  # noqa: F401
