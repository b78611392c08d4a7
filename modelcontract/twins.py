"""The data the JS/Python twins share, read once from twins.json beside this file: gesture
thresholds, shapes and table, handedness, tracker defaults, example-set kinds, answer-check
constants. The pages import the same file (static/js/contract/twins.json links to it), so a
number is written once; keys starting with "$" are comments."""
from __future__ import annotations

import json
from pathlib import Path

PATH = Path(__file__).with_name("twins.json")
TWINS: dict = json.loads(PATH.read_text(encoding="utf-8"))
