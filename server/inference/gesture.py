"""Transitional: the gesture rules moved to modelcontract.gesture. Kept only until tests/test_api.py
imports them from there."""
from modelcontract.gesture import classify_gesture, hand_features  # noqa: F401
