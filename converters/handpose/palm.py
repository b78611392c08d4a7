"""The palm detector: the library's anchor, decode and pipeline constants (recorded in the
manifest so a non-library consumer, the server runner, decodes exactly the same way; tests
compare them with the library), its input and TF.js output contract, and the decode of its
best palm."""
from __future__ import annotations

import numpy as np

from .. import parity

# The library's own constants (dist/tfjs/constants.js).
ANCHORS = {
    "reduceBoxesInLowestLayer": False, "interpolatedScaleAspectRatio": 1.0,
    "featureMapHeight": [], "featureMapWidth": [], "numLayers": 4,
    "minScale": 0.1484375, "maxScale": 0.75, "inputSizeHeight": 192, "inputSizeWidth": 192,
    "anchorOffsetX": 0.5, "anchorOffsetY": 0.5, "strides": [8, 16, 16, 16],
    "aspectRatios": [1.0], "fixedAnchorSize": True,
}
DECODE = {
    "applyExponentialOnBoxSize": False, "flipVertically": False, "ignoreClasses": [],
    "numClasses": 1, "numBoxes": 2016, "numCoords": 18, "boxCoordOffset": 0,
    "keypointCoordOffset": 4, "numKeypoints": 7, "numValuesPerKeypoint": 2,
    "sigmoidScore": True, "scoreClippingThresh": 100.0, "reverseOutputOrder": True,
    "xScale": 192.0, "yScale": 192.0, "hScale": 192.0, "wScale": 192.0, "minScoreThresh": 0.5,
}
PIPELINE = {
    "nms": {"minSuppressionThreshold": 0.3, "overlapType": "intersection-over-union"},
    "palm_to_roi": {"rotationVectorStartKeypointIndex": 0, "rotationVectorEndKeypointIndex": 2,
                    "rotationVectorTargetAngleDegree": 90,
                    "shiftX": 0, "shiftY": -0.5, "scaleX": 2.6, "scaleY": 2.6, "squareLong": True},
    "landmarks_to_roi": {"shiftX": 0, "shiftY": -0.1, "scaleX": 2.0, "scaleY": 2.0, "squareLong": True},
    "hand_presence_threshold": 0.5,
    "min_similarity_threshold": 0.5,
    "landmarks": {"numLandmarks": 21, "inputImageWidth": 224, "inputImageHeight": 224, "normalizeZ": 0.4},
}

DETECTOR_INPUT = {
    "name": "input_1", "shape": [1, 192, 192, 3], "layout": "NHWC", "dtype": "float32", "color": "RGB",
    "range": [0.0, 1.0], "resize": "letterbox", "pad_value": 0,
    "scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
}
# TF.js output contract: (name, shape, meaning).
DETECTOR_OUTPUTS = [("Identity", [1, 2016, 19],
                     "per anchor: [score logit, cx, cy, w, h, 7 x (kx, ky)], offsets in 192-px units "
                     "from the anchor centre (anchors: see 'anchors'; decode: see 'decode')")]

def anchor_centres(config: dict = ANCHORS) -> np.ndarray:
    """[N, 2] anchor centres (x, y), normalised (modelcontract.anchors; with fixedAnchorSize
    every anchor is 1x1, so only the centres matter)."""
    from modelcontract.anchors import ssd_anchors

    return ssd_anchors(config)[:, :2]


def best_palm(raw: np.ndarray) -> dict:
    """The highest-scoring palm of a [1,2016,19] detector output (library layout), decoded as
    the library does (modelcontract.hands, no score cut): score, box and 7 keypoints as
    fractions of the 192 input."""
    from modelcontract.anchors import ssd_anchors
    from modelcontract.hands import decode_palms

    raw = np.asarray(raw, dtype=np.float32)[0]
    no_padding = {"top": 0.0, "left": 0.0, "right": 0.0, "bottom": 0.0}
    palms = decode_palms(raw[:, 1:], raw[:, 0], ssd_anchors(ANCHORS).astype(np.float32), DECODE, no_padding, 1,
                         PIPELINE["nms"]["minSuppressionThreshold"], detect_score=0.0)
    return palms[0]


def parity_detector(ref: dict, got: np.ndarray) -> dict:
    """The TF.js detector's joined output against the .tflite's two, logits and boxes apart."""
    expected = np.concatenate([ref["Identity_1"], ref["Identity"]], axis=-1)
    parts = {"logits": parity.compare(expected[..., :1], got[..., :1]),
             "boxes": parity.compare(expected[..., 1:], got[..., 1:])}
    worst = max(parts.values(), key=lambda p: p["relative"])
    return {"max_abs": worst["max_abs"], "relative": worst["relative"], "outputs": parts}
