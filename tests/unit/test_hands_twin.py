"""static/js/contract/hands.js's and anchors.js's pure steps in Node against their numpy twins in
modelcontract (anchors.py, hands.py; both follow hand-pose-detection 2.0.1): SSD anchors, the ROI
crop's transform, palm -> hand ROI and ROI association, on the handpose manifest's own
configuration."""
from __future__ import annotations

import numpy as np
import pytest

from harness.node import js_url, run_node
from harness.paths import JS

RUNNER = """
import * as hp from %s;
import {ssdAnchors} from %s;
const {manifest, palm, size, rects} = req;
const anchors = ssdAnchors(manifest.anchors).map((a) => [a.x, a.y, a.w, a.h]);
const roi = hp.palmToRoi(palm, size, manifest.pipeline.palm_to_roi);
const {roi: padded, padding} = hp.padRoi(hp.roiOf(size, roi), {width: 224, height: 224});
const matrix = hp.projectiveTransform(padded, size, {width: 224, height: 224});
const kept = hp.associateRects(rects, manifest.pipeline.min_similarity_threshold);
process.stdout.write(JSON.stringify({anchors, roi, padding, matrix, kept}));
"""


def test_pipeline_steps_match_the_server_port():
    from modelcontract import hands
    from modelcontract.anchors import ssd_anchors

    manifest = {"anchors": {"reduceBoxesInLowestLayer": False, "interpolatedScaleAspectRatio": 1.0,
                            "featureMapHeight": [], "featureMapWidth": [], "numLayers": 4, "minScale": 0.1484375,
                            "maxScale": 0.75, "inputSizeHeight": 192, "inputSizeWidth": 192, "anchorOffsetX": 0.5,
                            "anchorOffsetY": 0.5, "strides": [8, 16, 16, 16], "aspectRatios": [1.0],
                            "fixedAnchorSize": True},
                "pipeline": {"palm_to_roi": {"rotationVectorStartKeypointIndex": 0, "rotationVectorEndKeypointIndex": 2,
                                             "rotationVectorTargetAngleDegree": 90, "shiftX": 0, "shiftY": -0.5,
                                             "scaleX": 2.6, "scaleY": 2.6, "squareLong": True},
                             "min_similarity_threshold": 0.5}}
    # A palm as the detector gives it (image fractions), tilted; a 1280x720 image.
    palm = {"box": {"xMin": 0.41, "yMin": 0.52, "width": 0.12, "height": 0.2},
            "keypoints": [{"x": 0.47, "y": 0.7}, {"x": 0.44, "y": 0.6}, {"x": 0.5, "y": 0.55}]}
    size = {"width": 1280, "height": 720}
    rects = [{"xCenter": 0.5, "yCenter": 0.5, "width": 0.2, "height": 0.3, "rotation": 0.1},
             {"xCenter": 0.52, "yCenter": 0.51, "width": 0.2, "height": 0.3, "rotation": 0.0},   # replaces the first
             {"xCenter": 0.8, "yCenter": 0.3, "width": 0.1, "height": 0.1, "rotation": 0.0}]
    js = run_node(RUNNER % (js_url(JS / "contract/hands.js"), js_url(JS / "contract/anchors.js")),
                  {"manifest": manifest, "palm": palm, "size": size, "rects": rects}, timeout=60)

    anchors = ssd_anchors(manifest["anchors"])
    assert anchors.shape == (2016, 4)
    np.testing.assert_allclose(js["anchors"], anchors, atol=1e-12)

    py_palm = {"box": palm["box"], "keypoints": [(k["x"], k["y"]) for k in palm["keypoints"]]}
    roi = hands.palm_to_roi(py_palm, 1280, 720, manifest["pipeline"]["palm_to_roi"])
    for key in ("xCenter", "yCenter", "width", "height", "rotation"):
        assert js["roi"][key] == pytest.approx(roi[key], abs=1e-12), key
    assert roi["rotation"] != 0

    pixels = {"xCenter": roi["xCenter"] * 1280, "yCenter": roi["yCenter"] * 720, "width": roi["width"] * 1280,
              "height": roi["height"] * 720, "rotation": roi["rotation"]}
    padding = hands.pad_roi(pixels, 224, 224)
    assert js["padding"] == pytest.approx(padding, abs=1e-12)
    np.testing.assert_allclose(js["matrix"], hands.projective_transform(pixels, 1280, 720, 224, 224), rtol=1e-6)

    kept = hands.associate_rects(rects, 0.5)
    assert len(kept) == len(js["kept"]) == 2
    assert js["kept"] == kept
