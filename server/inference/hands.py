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

Each step names the library file it mirrors (dist/shared/calculators/*.js, dist/tfjs/*.js).
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from .base import ModelUnavailable, Runner
from .gesture import classify_gesture
from .nms import non_max_suppression

VARIANTS = ("full", "lite")
# landmark .tflite output names (manifest server.note; TF.js renumbers them, see converters/handpose.py)
LANDMARK_TFLITE = {"landmarks": "Identity", "hand_flag": "Identity_1", "handedness": "Identity_2",
                   "world_landmarks": "Identity_3"}
DEFAULT_MAX_HANDS = 2  # the library's DEFAULT_MPHANDS_MODEL_CONFIG.maxHands
SWAP = {"Left": "Right", "Right": "Left"}  # static/js/hands.js: the person's hand on an unmirrored picture


# ---------------------------------------------------------------------------- geometry helpers

def ssd_anchors(config: dict) -> np.ndarray:
    """create_ssd_anchors.js -> [N, 4] (x_center, y_center, width, height)."""
    def scale_of(i, n):
        return config["minScale"] + (config["maxScale"] - config["minScale"]) * i / (n - 1) if n > 1 \
            else (config["minScale"] + config["maxScale"]) * 0.5

    strides = config["strides"]
    anchors, layer = [], 0
    while layer < config["numLayers"]:
        heights, widths, ratios, scales = [], [], [], []
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            scale = scale_of(last, len(strides))
            if last == 0 and config.get("reduceBoxesInLowestLayer"):
                ratios += [1.0, 2.0, 0.5]
                scales += [0.1, scale, scale]
            else:
                for r in config["aspectRatios"]:
                    ratios.append(r)
                    scales.append(scale)
                if config.get("interpolatedScaleAspectRatio", 1.0) > 0:
                    nxt = 1.0 if last == len(strides) - 1 else scale_of(last + 1, len(strides))
                    scales.append(math.sqrt(scale * nxt))
                    ratios.append(config["interpolatedScaleAspectRatio"])
            last += 1
        for r, s in zip(ratios, scales):
            heights.append(s / math.sqrt(r))
            widths.append(s * math.sqrt(r))
        if config.get("featureMapHeight"):
            fh, fw = config["featureMapHeight"][layer], config["featureMapWidth"][layer]
        else:
            fh = math.ceil(config["inputSizeHeight"] / strides[layer])
            fw = math.ceil(config["inputSizeWidth"] / strides[layer])
        for y in range(fh):
            for x in range(fw):
                for a in range(len(heights)):
                    w, h = (1.0, 1.0) if config.get("fixedAnchorSize") else (widths[a], heights[a])
                    anchors.append(((x + config["anchorOffsetX"]) / fw, (y + config["anchorOffsetY"]) / fh, w, h))
        layer = last
    return np.asarray(anchors, dtype=np.float64)


def normalize_radians(angle: float) -> float:
    return angle - 2 * math.pi * math.floor((angle + math.pi) / (2 * math.pi))


def pad_roi(roi: dict, out_w: int, out_h: int) -> dict:
    """image_utils.padRoi with keepAspectRatio: widens the ROI to the tensor's aspect ratio
    (in place) and returns the letterbox padding as fractions."""
    tensor_aspect = out_h / out_w
    roi_aspect = roi["height"] / roi["width"]
    vertical = horizontal = 0.0
    if tensor_aspect > roi_aspect:
        roi["width"], roi["height"] = roi["width"], roi["width"] * tensor_aspect
        vertical = (1 - roi_aspect / tensor_aspect) / 2
    else:
        roi["width"], roi["height"] = roi["height"] / tensor_aspect, roi["height"]
        horizontal = (1 - tensor_aspect / roi_aspect) / 2
    return {"top": vertical, "left": horizontal, "right": horizontal, "bottom": vertical}


def projective_transform(roi: dict, width: int, height: int, out_w: int, out_h: int) -> np.ndarray:
    """get_rotated_sub_rect_to_rect_transformation_matrix + image_utils.getProjectiveTransformMatrix:
    the 8 tf.image.transform coefficients mapping output pixels to image pixels (float32, as the
    library's tensor2d holds them)."""
    a, b = roi["width"], roi["height"]
    c, d = math.cos(roi["rotation"]), math.sin(roi["rotation"])
    e, f = roi["xCenter"], roi["yCenter"]
    g, h = 1.0 / width, 1.0 / height
    m00, m01, m03 = a * c * g, -b * d * g, (-0.5 * a * c + 0.5 * b * d + e) * g
    m10, m11, m13 = a * d * h, b * c * h, (-0.5 * b * c - 0.5 * a * d + f) * h
    return np.asarray([(1 / out_w) * m00 * width, (1 / out_h) * m01 * width, m03 * width,
                       (1 / out_w) * m10 * height, (1 / out_h) * m11 * height, m13 * height, 0, 0],
                      dtype=np.float32)


def image_transform(image: np.ndarray, coeffs: np.ndarray, out_w: int, out_h: int) -> np.ndarray:
    """tf.image.transform(image, coeffs, 'bilinear', 'constant', fillValue 0) of an HxWx3 uint8
    image -> float32 [out_h, out_w, 3] (tfjs-backend-cpu Transform: no half-pixel offset,
    out-of-image neighbours read as 0)."""
    a0, a1, a2, b0, b1, b2 = (float(v) for v in coeffs[:6])
    ys, xs = np.meshgrid(np.arange(out_h, dtype=np.float64), np.arange(out_w, dtype=np.float64), indexing="ij")
    in_x = a0 * xs + a1 * ys + a2
    in_y = b0 * xs + b1 * ys + b2
    x0, y0 = np.floor(in_x), np.floor(in_y)
    fx, fy = in_x - x0, in_y - y0
    h, w = image.shape[:2]

    def read(yy, xx):
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        yi = np.clip(yy, 0, h - 1).astype(np.int64)
        xi = np.clip(xx, 0, w - 1).astype(np.int64)
        return np.where(inside[..., None], image[yi, xi].astype(np.float64), 0.0)

    top = (1 - fx)[..., None] * read(y0, x0) + fx[..., None] * read(y0, x0 + 1)
    bottom = (1 - fx)[..., None] * read(y0 + 1, x0) + fx[..., None] * read(y0 + 1, x0 + 1)
    return ((1 - fy)[..., None] * top + fy[..., None] * bottom).astype(np.float32)


def crop_tensor(image: np.ndarray, norm_rect: dict | None, out_w: int, out_h: int):
    """convert_image_to_tensor.js (keepAspectRatio, zero border, float range [0, 1])."""
    height, width = image.shape[:2]
    if norm_rect is None:
        roi = {"xCenter": 0.5 * width, "yCenter": 0.5 * height, "width": float(width), "height": float(height),
               "rotation": 0.0}
    else:
        roi = {"xCenter": norm_rect["xCenter"] * width, "yCenter": norm_rect["yCenter"] * height,
               "width": norm_rect["width"] * width, "height": norm_rect["height"] * height,
               "rotation": norm_rect["rotation"]}
    padding = pad_roi(roi, out_w, out_h)
    pixels = image_transform(image, projective_transform(roi, width, height, out_w, out_h), out_w, out_h)
    # shift_image_value: x * (1/255) + 0 in float32
    return (pixels * np.float32(1 / 255) + np.float32(0))[None], padding


def transform_rect(rect: dict, width: int, height: int, cfg: dict) -> dict:
    """transform_rect.transformNormalizedRect (no extra rotation in these configs)."""
    w, h, rotation = rect["width"], rect["height"], rect["rotation"]
    if rotation == 0:
        x_center = rect["xCenter"] + w * cfg["shiftX"]
        y_center = rect["yCenter"] + h * cfg["shiftY"]
    else:
        x_shift = (width * w * cfg["shiftX"] * math.cos(rotation)
                   - height * h * cfg["shiftY"] * math.sin(rotation)) / width
        y_shift = (width * w * cfg["shiftX"] * math.sin(rotation)
                   + height * h * cfg["shiftY"] * math.cos(rotation)) / height
        x_center, y_center = rect["xCenter"] + x_shift, rect["yCenter"] + y_shift
    if cfg.get("squareLong"):
        long_side = max(w * width, h * height)
        w, h = long_side / width, long_side / height
    elif cfg.get("squareShort"):
        short_side = min(w * width, h * height)
        w, h = short_side / width, short_side / height
    return {"xCenter": x_center, "yCenter": y_center, "width": w * cfg["scaleX"], "height": h * cfg["scaleY"],
            "rotation": rotation}


def _bbox(rect: dict) -> tuple[float, float, float, float]:
    x_min = rect["xCenter"] - rect["width"] / 2
    y_min = rect["yCenter"] - rect["height"] / 2
    return x_min, y_min, x_min + rect["width"], y_min + rect["height"]


def overlap_similarity(r1: dict, r2: dict) -> float:
    a, b = _bbox(r1), _bbox(r2)
    if a[2] < b[0] or b[2] < a[0] or a[3] < b[1] or b[3] < a[1]:
        return 0.0
    inter = max(min(a[2], b[2]) - max(a[0], b[0]), 0) * max(min(a[3], b[3]) - max(a[1], b[1]), 0)
    norm = r1["width"] * r1["height"] + r2["width"] * r2["height"] - inter
    return inter / norm if norm > 0 else 0.0


def associate_rects(rects: list[dict], min_similarity: float) -> list[dict]:
    """association_norm_rect.calculateAssociationNormRect with one list."""
    result: list[dict] = []
    for cur in rects:
        result = [prev for prev in result if overlap_similarity(cur, prev) <= min_similarity]
        result.append(cur)
    return result


# ---------------------------------------------------------------------------- runner

class HandsRunner(Runner):
    task = "handpose"

    def __init__(self, manifest: dict, folder: Path):
        super().__init__(manifest, folder)
        if manifest.get("outputs", {}).get("format") != "mediapipe-hands":
            raise ValueError("not a mediapipe-hands manifest")
        self.anchors_cfg, self.decode_cfg = manifest["anchors"], manifest["decode"]
        self.pipeline = manifest["pipeline"]
        self.anchors = ssd_anchors(self.anchors_cfg).astype(np.float32)
        self.detector_size = tuple(manifest["input"]["shape"][1:3])  # (h, w)
        self.landmark_size = tuple(manifest["landmark_input"]["shape"][1:3])
        self.labels = list(manifest.get("labels") or ["Left", "Right"])
        self.variants = [v for v in VARIANTS if f"detector_{v}" in manifest["server"]["models"]]
        self._models: dict[str, tuple] = {}
        self.defaults = {"score": float(self.pipeline.get("hand_presence_threshold", 0.5)),
                         "max_det": DEFAULT_MAX_HANDS, "variant": self.variants[0] if self.variants else "full"}
        self.models(self.defaults["variant"])  # load the default pair now

    def models(self, variant: str):
        if variant not in self._models:
            files = self.manifest["server"]["models"]
            if f"detector_{variant}" not in files or f"landmark_{variant}" not in files:
                raise ModelUnavailable(f"{self.id} has no {variant} models")
            detector = self.load_tflite(files[f"detector_{variant}"])
            landmark = self.load_tflite(files[f"landmark_{variant}"])
            missing = set(LANDMARK_TFLITE.values()) - set(landmark.output_keys)
            if missing:
                raise ModelUnavailable(f"{self.id}: landmark model lacks outputs {sorted(missing)}")
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
        cfg = self.decode_cfg
        a = self.anchors
        ax, ay, aw, ah = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
        off = cfg["boxCoordOffset"]
        if cfg["reverseOutputOrder"]:
            xc, yc, w, h = (regressors[:, off + i] for i in range(4))
        else:
            yc, xc, h, w = (regressors[:, off + i] for i in range(4))
        f32 = np.float32
        xc = xc / f32(cfg["xScale"]) * aw + ax
        yc = yc / f32(cfg["yScale"]) * ah + ay
        if cfg.get("applyExponentialOnBoxSize"):
            h = np.exp(h / f32(cfg["hScale"])) * ah
            w = np.exp(w / f32(cfg["wScale"])) * aw
        else:
            h = h / f32(cfg["hScale"]) * ah
            w = w / f32(cfg["wScale"]) * ah  # sic: the library scales w by the anchor height
        y_min, x_min = yc - h / f32(2), xc - w / f32(2)
        y_max, x_max = yc + h / f32(2), xc + w / f32(2)
        keypoints = []
        for k in range(cfg["numKeypoints"]):
            o = cfg["keypointCoordOffset"] + k * cfg["numValuesPerKeypoint"]
            kx, ky = (regressors[:, o], regressors[:, o + 1]) if cfg["reverseOutputOrder"] \
                else (regressors[:, o + 1], regressors[:, o])
            keypoints.append((kx / f32(cfg["xScale"]) * aw + ax, ky / f32(cfg["yScale"]) * ah + ay))
        if cfg.get("sigmoidScore"):
            clip = cfg.get("scoreClippingThresh")
            if clip is not None:
                logits = np.clip(logits, f32(-clip), f32(clip))
            scores = (1 / (1 + np.exp(-logits.astype(np.float64)))).astype(np.float32)
        else:
            scores = logits
        keep = np.ones(len(scores), bool)
        # The palm score cut: the library's fixed minScoreThresh, or the page's slider, which
        # moves that cut by shifting the score logit (static/js/hands.js) — the same thing.
        threshold = cfg.get("minScoreThresh") if detect_score is None else detect_score
        if threshold is not None:
            keep &= ~(scores < threshold)
        keep &= ~((x_max - x_min) < 0) & ~((y_max - y_min) < 0)
        candidates = np.flatnonzero(keep)
        if candidates.size == 0:
            return []
        # non_max_suppression.js: sort by score (stable), then tf.image.nonMaxSuppression(maxHands, 0.3)
        order = candidates[np.argsort(-scores[candidates].astype(np.float64), kind="stable")]
        boxes = np.stack([y_min[order], x_min[order], y_max[order], x_max[order]], 1)
        selected = non_max_suppression(boxes, scores[order], max_hands,
                                       self.pipeline["nms"]["minSuppressionThreshold"])
        palms = []
        lr, tb = padding["left"] + padding["right"], padding["top"] + padding["bottom"]
        for j in sorted(int(s) for s in selected):  # filter() keeps the sorted order
            i = int(order[j])
            bx_min = (float(x_min[i]) - padding["left"]) / (1 - lr)
            by_min = (float(y_min[i]) - padding["top"]) / (1 - tb)
            palms.append({
                "score": float(scores[i]),
                "box": {"xMin": bx_min, "yMin": by_min,
                        "width": (float(x_max[i]) - float(x_min[i])) / (1 - lr),
                        "height": (float(y_max[i]) - float(y_min[i])) / (1 - tb)},
                "keypoints": [((float(kx[i]) - padding["left"]) / (1 - lr), (float(ky[i]) - padding["top"]) / (1 - tb))
                              for kx, ky in keypoints],
            })
        return palms

    def palm_to_roi(self, palm: dict, width: int, height: int) -> dict:
        """detection_to_rect (bounding box + rotation) then transform_rect (palm -> hand)."""
        cfg = self.pipeline["palm_to_roi"]
        box = palm["box"]
        start = palm["keypoints"][cfg["rotationVectorStartKeypointIndex"]]
        end = palm["keypoints"][cfg["rotationVectorEndKeypointIndex"]]
        x0, y0 = start[0] * width, start[1] * height
        x1, y1 = end[0] * width, end[1] * height
        target = math.pi * cfg["rotationVectorTargetAngleDegree"] / 180
        rect = {"xCenter": box["xMin"] + box["width"] / 2, "yCenter": box["yMin"] + box["height"] / 2,
                "width": box["width"], "height": box["height"],
                "rotation": normalize_radians(target - math.atan2(-(y1 - y0), x1 - x0))}
        return transform_rect(rect, width, height, cfg)

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
        raw = outputs[LANDMARK_TFLITE["landmarks"]].reshape(cfg["numLandmarks"], -1).astype(np.float64)
        lx, ly = raw[:, 0] / cfg["inputImageWidth"], raw[:, 1] / cfg["inputImageHeight"]
        lx = (lx - padding["left"]) / (1 - padding["left"] - padding["right"])
        ly = (ly - padding["top"]) / (1 - padding["top"] - padding["bottom"])
        dx, dy = lx - 0.5, ly - 0.5
        c, s = math.cos(rect["rotation"]), math.sin(rect["rotation"])
        nx = (c * dx - s * dy) * rect["width"] + rect["xCenter"]
        ny = (s * dx + c * dy) * rect["height"] + rect["yCenter"]
        keypoints = np.stack([nx * width, ny * height], 1)
        # calculate_world_landmark_projection: metres, rotated like the ROI (z unchanged)
        world = outputs[LANDMARK_TFLITE["world_landmarks"]].reshape(cfg["numLandmarks"], -1)[:, :3].astype(np.float64)
        wx, wy = world[:, 0].copy(), world[:, 1].copy()
        world[:, 0], world[:, 1] = c * wx - s * wy, s * wx + c * wy
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
        rects = associate_rects([self.palm_to_roi(p, width, height) for p in palms],
                                self.pipeline["min_similarity_threshold"])
        found = [self.hand_landmarks(image, r, landmark, min_score) for r in rects]
        t2 = time.perf_counter()
        return [h for h in found if h is not None], {"palm": (t1 - t0) * 1e3, "landmarks": (t2 - t1) * 1e3}

    def __call__(self, image: np.ndarray, max_hands: int | None = None, score: float | None = None,
                 variant: str | None = None, detect_score: float | None = None) -> dict:
        """The hands page's result for a still image (static/js/hands.js): handedness swapped
        to the person's hand (MediaPipe labels assume a mirrored picture; the model's label
        stays in model_handedness), the gesture from gesture.js's rules (world landmarks for
        the hand's shape)."""
        variant = variant or self.defaults["variant"]
        found, times = self.estimate(image, max_hands, score, variant, detect_score)
        t2 = time.perf_counter()
        hands = []
        for hand in found:
            model_label = hand["handedness"]
            hands.append({"handedness": SWAP.get(model_label, model_label), "model_handedness": model_label,
                          "score": hand["score"],
                          "gesture": classify_gesture(hand["keypoints"], hand["world"]),
                          "keypoints": [[float(x), float(y)] for x, y in hand["keypoints"]]})
        height, width = image.shape[:2]
        return {"model": self.id, "variant": variant, "image": {"width": width, "height": height}, "hands": hands,
                "timing_ms": {"palm": round(times["palm"], 3), "landmarks": round(times["landmarks"], 3),
                              "postprocess": round((time.perf_counter() - t2) * 1e3, 3)}}
