"""Where things are: the checkout, the shared folder (DATARAILROAD_SHARED, a test-only
location knob), its weights and hand fixtures, the repo's gesture photos, test-artifacts/ and
the pages' JS."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("DATARAILROAD_SHARED", ROOT.parent / "shared"))
YOLOV5N_WEIGHTS = SHARED / "models" / "yolov5n.pt"
HAND_FIXTURES = SHARED / "fixtures" / "hands"
GESTURE_FIXTURES = ROOT / "tests" / "fixtures" / "gestures"   # in the repo: see its README
ARTIFACTS = ROOT / "test-artifacts"
JS = ROOT / "static" / "js"
