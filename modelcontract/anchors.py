"""MediaPipe's SSD anchors (create_ssd_anchors.js of @tensorflow-models/hand-pose-detection
2.0.1, which static/js/contract/hands.js mirrors) from a manifest's ``anchors`` config."""
from __future__ import annotations

import math

import numpy as np


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
