"""The hand pipeline of @tensorflow-models/hand-pose-detection 2.0.1 (runtime 'tfjs',
``estimateHands(image, {staticImageMode: true})``) without its models: palm decoding, the
palm -> hand ROI and its rotated crop, landmark projection, ROI association, and the
handedness shown to people. The server's runner (server/inference/hands.py) and the handpose
converter's parity check use it; static/js/contract/hands.js is its twin in the browser.

Each step names the library file it mirrors (dist/shared/calculators/*.js, dist/tfjs/*.js).
"""
from __future__ import annotations

import math

import numpy as np

from .boxes import non_max_suppression
from .scores import sigmoid
from .twins import TWINS

VARIANTS = ("full", "lite")
DEFAULT_MAX_HANDS = 2  # the library's DEFAULT_MPHANDS_MODEL_CONFIG.maxHands
# The model's labels (MediaPipe's mirrored-selfie convention) and the person's hand on an
# unmirrored picture, as static/js/pages/hands.js shows it.
HANDEDNESS = tuple(TWINS["hands"]["handedness"])
SWAP: dict[str, str] = TWINS["hands"]["person_handedness"]


def person_handedness(model_label: str) -> str:
    return SWAP.get(model_label, model_label)


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


# ---------------------------------------------------------------------------- palms

def decode_palms(regressors: np.ndarray, logits: np.ndarray, anchors: np.ndarray, cfg: dict, padding: dict,
                 max_hands: int, nms_iou: float, detect_score: float | None = None) -> list[dict]:
    """tfjs/detector.js detectPalm after the model: tensors_to_detections (anchors, box and
    keypoint decode, sigmoid score), the score cut, non_max_suppression.js and the letterbox
    padding removed. regressors [N, numCoords], logits [N] (float32), anchors [N, 4] float32.
    Palms (score, box {xMin, yMin, width, height}, keypoints [(x, y)]) in image fractions."""
    ax, ay, aw, ah = anchors[:, 0], anchors[:, 1], anchors[:, 2], anchors[:, 3]
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
        scores = sigmoid(logits).astype(np.float32)
    else:
        scores = logits
    keep = np.ones(len(scores), bool)
    # The palm score cut: the library's fixed minScoreThresh, or the page's slider, which
    # moves that cut by shifting the score logit (static/js/pages/hands.js) — the same thing.
    threshold = cfg.get("minScoreThresh") if detect_score is None else detect_score
    if threshold is not None:
        keep &= ~(scores < threshold)
    keep &= ~((x_max - x_min) < 0) & ~((y_max - y_min) < 0)
    candidates = np.flatnonzero(keep)
    if candidates.size == 0:
        return []
    # non_max_suppression.js: sort by score (stable), then tf.image.nonMaxSuppression(maxHands, iou)
    order = candidates[np.argsort(-scores[candidates].astype(np.float64), kind="stable")]
    boxes = np.stack([y_min[order], x_min[order], y_max[order], x_max[order]], 1)
    selected = non_max_suppression(boxes, scores[order], max_hands, nms_iou)
    palms = []
    lr, tb = padding["left"] + padding["right"], padding["top"] + padding["bottom"]
    for j in sorted(int(s) for s in selected):  # filter() keeps the sorted order
        i = int(order[j])
        palms.append({
            "score": float(scores[i]),
            "box": {"xMin": (float(x_min[i]) - padding["left"]) / (1 - lr),
                    "yMin": (float(y_min[i]) - padding["top"]) / (1 - tb),
                    "width": (float(x_max[i]) - float(x_min[i])) / (1 - lr),
                    "height": (float(y_max[i]) - float(y_min[i])) / (1 - tb)},
            "keypoints": [((float(kx[i]) - padding["left"]) / (1 - lr), (float(ky[i]) - padding["top"]) / (1 - tb))
                          for kx, ky in keypoints],
        })
    return palms


def palm_to_roi(palm: dict, width: int, height: int, cfg: dict) -> dict:
    """detection_to_rect (bounding box + rotation) then transform_rect (palm -> hand), with the
    manifest's pipeline.palm_to_roi config."""
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


def hand_crop(image: np.ndarray, palm: dict, palm_cfg: dict, out_w: int, out_h: int):
    """The landmark model's input for a palm: its hand ROI, rotated and cropped like the library
    ([1, out_h, out_w, 3] in [0, 1]), with the ROI and the crop's padding."""
    height, width = image.shape[:2]
    roi = palm_to_roi(palm, width, height, palm_cfg)
    x, padding = crop_tensor(image, roi, out_w, out_h)
    return x, roi, padding


# ---------------------------------------------------------------------------- landmarks

def project_landmarks(raw: np.ndarray, world: np.ndarray, rect: dict, padding: dict, cfg: dict,
                      width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """The landmark model's raw landmarks [numLandmarks, >=2] (crop pixels) and world landmarks
    [numLandmarks, >=3] (metres) -> image keypoints [n, 2] (source px) and world [n, 3] rotated
    like the ROI (calculate_landmark_projection, calculate_world_landmark_projection)."""
    raw = np.asarray(raw, dtype=np.float64)
    lx, ly = raw[:, 0] / cfg["inputImageWidth"], raw[:, 1] / cfg["inputImageHeight"]
    lx = (lx - padding["left"]) / (1 - padding["left"] - padding["right"])
    ly = (ly - padding["top"]) / (1 - padding["top"] - padding["bottom"])
    dx, dy = lx - 0.5, ly - 0.5
    c, s = math.cos(rect["rotation"]), math.sin(rect["rotation"])
    nx = (c * dx - s * dy) * rect["width"] + rect["xCenter"]
    ny = (s * dx + c * dy) * rect["height"] + rect["yCenter"]
    keypoints = np.stack([nx * width, ny * height], 1)
    world = np.asarray(world, dtype=np.float64)[:, :3].copy()
    wx, wy = world[:, 0].copy(), world[:, 1].copy()
    world[:, 0], world[:, 1] = c * wx - s * wy, s * wx + c * wy
    return keypoints, world
