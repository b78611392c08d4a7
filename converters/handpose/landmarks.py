"""The hand landmark model: its input (the rotated hand crop a palm gives), its TF.js output
contract and the names the .tflite gives the same outputs, and the 21 keypoints."""
from __future__ import annotations

import numpy as np

from .. import parity
from .palm import DETECTOR_INPUT, PIPELINE

KEYPOINT_NAMES = [
    "wrist", "thumb_cmc", "thumb_mcp", "thumb_ip", "thumb_tip",
    "index_finger_mcp", "index_finger_pip", "index_finger_dip", "index_finger_tip",
    "middle_finger_mcp", "middle_finger_pip", "middle_finger_dip", "middle_finger_tip",
    "ring_finger_mcp", "ring_finger_pip", "ring_finger_dip", "ring_finger_tip",
    "pinky_finger_mcp", "pinky_finger_pip", "pinky_finger_dip", "pinky_finger_tip",
]

LANDMARK_INPUT = {
    "name": "input_1", "shape": [1, 224, 224, 3], "layout": "NHWC", "dtype": "float32", "color": "RGB",
    "range": [0.0, 1.0], "resize": "rotated-roi", "pad_value": 0,
    "scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
    "note": "a square hand ROI (from the palm detection, or the previous frame's landmarks), rotated so "
            "wrist -> middle-finger MCP points up, warped bilinearly to 224x224 with a zero border",
}

# TF.js output contract: (name, shape, meaning); signature keys sort into this order.
LANDMARK_OUTPUTS = [
    ("Identity", [1, 1], "handedness: sigmoid score, >= 0.5 -> 'Left' (mirrored-image convention)"),
    ("Identity_1", [1, 1], "hand presence score (sigmoid); the library drops the hand below 0.5"),
    ("Identity_2", [1, 63], "21 landmarks x (x, y, z) in 224-px crop units (z relative, same scale as x)"),
    ("Identity_3", [1, 63], "21 world landmarks x (x, y, z) in metres, origin at the hand's centre"),
]
# signature key -> tflite output name; sorted keys give Identity, Identity_1, Identity_2, Identity_3.
LANDMARK_KEYS = {"handedness": "Identity_2", "handflag": "Identity_1",
                 "landmarks": "Identity", "world_landmarks": "Identity_3"}

# role -> TF.js output name (the numbering LANDMARK_KEYS' sorted keys give).
TFJS_LANDMARK_ROLES = {"landmarks": "Identity_2:0", "handflag": "Identity_1:0", "handedness": "Identity:0",
                       "world_landmarks": "Identity_3:0"}


def hand_crop(image: np.ndarray, palm: dict, transform) -> np.ndarray:
    """The landmark model's input for a palm found on the letterboxed 192 input (``transform``
    maps that input back to ``image``): the library's rotated hand ROI, 224x224 in [0, 1]
    (modelcontract.hands.hand_crop)."""
    from modelcontract.hands import hand_crop as library_hand_crop

    size192 = DETECTOR_INPUT["shape"][1]
    height, width = image.shape[:2]
    scale = np.array([size192, size192])
    fraction = np.array([width, height])

    def to_image(xy):  # 192-input fractions -> image fractions
        return transform.to_source(np.asarray(xy, dtype=np.float64) * scale) / fraction

    box = palm["box"]
    x_min, y_min = to_image([box["xMin"], box["yMin"]])
    x_max, y_max = to_image([box["xMin"] + box["width"], box["yMin"] + box["height"]])
    on_image = {"box": {"xMin": x_min, "yMin": y_min, "width": x_max - x_min, "height": y_max - y_min},
                "keypoints": [tuple(to_image(k)) for k in palm["keypoints"]]}
    size = LANDMARK_INPUT["shape"][1]
    return library_hand_crop(image, on_image, PIPELINE["palm_to_roi"], size, size)[0]


def parity_landmark(ref: dict, got: dict) -> dict:
    """The TF.js landmark outputs against the .tflite's, matched through LANDMARK_KEYS."""
    parts = {}
    for (name, _, _), key in zip(LANDMARK_OUTPUTS, sorted(LANDMARK_KEYS)):
        parts[f"{name} ({key})"] = parity.compare(ref[LANDMARK_KEYS[key]], got[name])
    worst = max(parts.values(), key=lambda p: p["relative"])
    return {"max_abs": worst["max_abs"], "relative": worst["relative"], "outputs": parts}
