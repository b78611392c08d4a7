"""Hands runner: the pipeline of @tensorflow-models/hand-pose-detection 2.0.1 (runtime 'tfjs',
``estimateHands(image, {staticImageMode: true})``) in numpy, on the original MediaPipe
.tflite files the handpose converter installs (the TF.js files the page loads are the same
graphs: its parity is recorded in the manifest).

Why a port rather than ``mediapipe.solutions.hands``: the solution runs the same weights
but its own graph (weighted NMS, OpenCV warps, different ROI rounding), and the manifest's
end-to-end check measures it 2-5 px (up to 11 px) away from the library the page runs.
Porting the library's calculators (anchors, box decode, NMS, palm -> rotated ROI,
tf.image.transform crop, landmark projection) keeps the server within a fraction of a
pixel of the page, runs the converter's own artifacts with the same LiteRT runtime as the
other tasks, and needs no MediaPipe graph runtime in the server.

The library's steps (anchors, palm decoding, palm -> hand ROI and crop, landmark projection)
are modelcontract.anchors and modelcontract.hands; this module runs the models.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from modelcontract.anchors import ssd_anchors
from modelcontract.custom_gestures import GESTURE_SETS, normalise_hand
from modelcontract.gesture import classify_gesture
from modelcontract.hands import (DEFAULT_MAX_HANDS, HANDEDNESS, VARIANTS, associate_rects, crop_tensor,
                                 decode_palms, palm_to_roi, person_handedness, project_landmarks)

from ..settings import Settings
from .base import Runner, model_unavailable

# landmark .tflite output names (manifest server.note; TF.js renumbers them, see converters/handpose/__init__.py)
LANDMARK_TFLITE = {"landmarks": "Identity", "hand_flag": "Identity_1", "handedness": "Identity_2",
                   "world_landmarks": "Identity_3"}


class HandsRunner(Runner):
    task = "handpose"

    def __init__(self, manifest: dict, folder: Path, settings: Settings | None = None):
        super().__init__(manifest, folder, settings)
        if manifest.get("outputs", {}).get("format") != "mediapipe-hands":
            raise ValueError("not a mediapipe-hands manifest")
        self.anchors_cfg, self.decode_cfg = manifest["anchors"], manifest["decode"]
        self.pipeline = manifest["pipeline"]
        self.anchors = ssd_anchors(self.anchors_cfg).astype(np.float32)
        self.detector_size = tuple(manifest["input"]["shape"][1:3])  # (h, w)
        self.landmark_size = tuple(manifest["landmark_input"]["shape"][1:3])
        self.labels = list(manifest.get("labels") or HANDEDNESS)
        self.variants = [v for v in VARIANTS if f"detector_{v}" in manifest["server"]["models"]]
        self._models: dict[str, tuple] = {}
        self.defaults = {"score": float(self.pipeline.get("hand_presence_threshold", 0.5)),
                         "max_det": DEFAULT_MAX_HANDS, "variant": self.variants[0] if self.variants else "full"}
        self.models(self.defaults["variant"])  # load the default pair now

    def models(self, variant: str):
        if variant not in self._models:
            files = self.manifest["server"]["models"]
            if f"detector_{variant}" not in files or f"landmark_{variant}" not in files:
                raise model_unavailable(f"{self.id} has no {variant} models")
            detector = self.load_tflite(files[f"detector_{variant}"])
            landmark = self.load_tflite(files[f"landmark_{variant}"])
            missing = set(LANDMARK_TFLITE.values()) - set(landmark.output_keys)
            if missing:
                raise model_unavailable(f"{self.id}: landmark model lacks outputs {sorted(missing)}")
            self._models[variant] = (detector, landmark)
        return self._models[variant]

    # -- palm detection (tfjs/detector.js detectPalm) -------------------------------------------

    def detect_palms(self, image: np.ndarray, detector, max_hands: int,
                     detect_score: float | None = None) -> list[dict]:
        out_h, out_w = self.detector_size
        x, padding = crop_tensor(image, None, out_w, out_h)
        outputs = detector.run1(x)
        regressors = logits = None
        for value in outputs.values():
            if value.shape[-1] == 1:
                logits = value.reshape(-1).astype(np.float32)
            else:
                regressors = value.reshape(value.shape[-2], value.shape[-1]).astype(np.float32)
        return decode_palms(regressors, logits, self.anchors, self.decode_cfg, padding, max_hands,
                            self.pipeline["nms"]["minSuppressionThreshold"], detect_score)

    # -- landmarks (tfjs/detector.js handLandmarks) ---------------------------------------------

    def hand_landmarks(self, image: np.ndarray, rect: dict, landmark, min_score: float) -> dict | None:
        height, width = image.shape[:2]
        out_h, out_w = self.landmark_size
        x, padding = crop_tensor(image, rect, out_w, out_h)
        outputs = landmark.run1(x)
        hand_score = float(outputs[LANDMARK_TFLITE["hand_flag"]].reshape(-1)[0])
        if hand_score < min_score:
            return None
        handedness_score = float(outputs[LANDMARK_TFLITE["handedness"]].reshape(-1)[0])
        handedness = self.labels[0] if handedness_score >= 0.5 else self.labels[1]
        cfg = self.pipeline["landmarks"]
        n = cfg["numLandmarks"]
        keypoints, world = project_landmarks(outputs[LANDMARK_TFLITE["landmarks"]].reshape(n, -1),
                                             outputs[LANDMARK_TFLITE["world_landmarks"]].reshape(n, -1),
                                             rect, padding, cfg, width, height)
        return {"handedness": handedness, "score": hand_score, "keypoints": keypoints, "world": world}

    def estimate(self, image: np.ndarray, max_hands: int | None = None, score: float | None = None,
                 variant: str | None = None, detect_score: float | None = None) -> tuple[list[dict], dict]:
        """The library's estimateHands(image, {staticImageMode: true}): hands with the model's
        handedness label, score, keypoints [21, 2] (source px) and world landmarks [21, 3] (m)."""
        max_hands = self.defaults["max_det"] if max_hands is None else max_hands
        min_score = self.defaults["score"] if score is None else score
        detector, landmark = self.models(variant or self.defaults["variant"])
        height, width = image.shape[:2]
        t0 = time.perf_counter()
        palms = self.detect_palms(image, detector, max_hands, detect_score)
        t1 = time.perf_counter()
        rects = associate_rects([palm_to_roi(p, width, height, self.pipeline["palm_to_roi"]) for p in palms],
                                self.pipeline["min_similarity_threshold"])
        found = [self.hand_landmarks(image, r, landmark, min_score) for r in rects]
        t2 = time.perf_counter()
        return [h for h in found if h is not None], {"palm": (t1 - t0) * 1e3, "landmarks": (t2 - t1) * 1e3}

    def __call__(self, image: np.ndarray, max_hands: int | None = None, score: float | None = None,
                 variant: str | None = None, detect_score: float | None = None, custom: dict | None = None) -> dict:
        """The hands page's result for a still image (static/js/pages/hands.js): handedness swapped
        to the person's hand (MediaPipe labels assume a mirrored picture; the model's label
        stays in model_handedness), the gesture from gesture.js's rules (world landmarks for
        the hand's shape); with ``custom`` (a gesture set),
        each hand's nearest of your gestures (modelcontract.custom_gestures), or None."""
        variant = variant or self.defaults["variant"]
        found, times = self.estimate(image, max_hands, score, variant, detect_score)
        t2 = time.perf_counter()
        hands = []
        for hand in found:
            model_label = hand["handedness"]
            keypoints = [[float(x), float(y)] for x, y in hand["keypoints"]]
            result = {"handedness": person_handedness(model_label), "model_handedness": model_label,
                      "score": hand["score"], "gesture": classify_gesture(hand["keypoints"], hand["world"]),
                      "keypoints": keypoints}
            if custom is not None:
                result["custom"] = GESTURE_SETS.match(normalise_hand(keypoints, result["handedness"]), custom)
            hands.append(result)
        height, width = image.shape[:2]
        return {"model": self.id, "variant": variant, "image": {"width": width, "height": height}, "hands": hands,
                "timing_ms": {"palm": round(times["palm"], 3), "landmarks": round(times["landmarks"], 3),
                              "postprocess": round((time.perf_counter() - t2) * 1e3, 3)}}
