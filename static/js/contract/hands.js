// MediaPipe Hands in the page: the steps of @tensorflow-models/hand-pose-detection 2.0.1
// (runtime 'tfjs', dist/tfjs/detector.js and dist/shared/calculators/*.js), written as small
// functions. These are its pure steps (geometry, detection decoding, landmark projection, the
// output names); tensor/hands.js runs them around two models (HandPipeline: the crops and
// NMS in TF.js), so every browser backend gives the library's answers, and the palm score
// threshold is a plain parameter. modelcontract/hands.py is the numpy twin of these steps
// (its still-image path); the palm anchors are anchors.js.
//
// Every number comes from the model's manifest (anchors, decode, pipeline, input sizes,
// output names); each function names the library calculator it follows.

// ---------------------------------------------------------------- geometry

// image_utils.normalizeRadians
export function normalizeRadians(angle) {
  return angle - 2 * Math.PI * Math.floor((angle + Math.PI) / (2 * Math.PI));
}

// image_utils.getRoi: a normalised rect (or the whole image) in pixels.
export function roiOf(imageSize, normRect) {
  if (!normRect) {
    return {xCenter: 0.5 * imageSize.width, yCenter: 0.5 * imageSize.height, width: imageSize.width,
            height: imageSize.height, rotation: 0};
  }
  return {xCenter: normRect.xCenter * imageSize.width, yCenter: normRect.yCenter * imageSize.height,
          width: normRect.width * imageSize.width, height: normRect.height * imageSize.height,
          rotation: normRect.rotation};
}

// image_utils.padRoi (keepAspectRatio): the ROI widened to the tensor's aspect ratio, and
// the letterbox padding as fractions of the tensor. -> {roi, padding}
export function padRoi(roi, size) {
  const tensorAspect = size.height / size.width;
  const roiAspect = roi.height / roi.width;
  if (tensorAspect > roiAspect) {
    const vertical = (1 - roiAspect / tensorAspect) / 2;
    return {roi: {...roi, height: roi.width * tensorAspect}, padding: {top: vertical, bottom: vertical, left: 0, right: 0}};
  }
  const horizontal = (1 - tensorAspect / roiAspect) / 2;
  return {roi: {...roi, width: roi.height / tensorAspect}, padding: {top: 0, bottom: 0, left: horizontal, right: horizontal}};
}

// get_rotated_sub_rect_to_rect_transformation_matrix + image_utils.getProjectiveTransformMatrix:
// the 8 tf.image.transform coefficients that map a pixel of the output tensor to the image.
export function projectiveTransform(roi, imageSize, size) {
  const {width: a, height: b, xCenter: e, yCenter: f} = roi;
  const c = Math.cos(roi.rotation);
  const d = Math.sin(roi.rotation);
  const g = 1 / imageSize.width;
  const h = 1 / imageSize.height;
  const m00 = a * c * g;
  const m01 = -b * d * g;
  const m03 = (-0.5 * a * c + 0.5 * b * d + e) * g;
  const m10 = a * d * h;
  const m11 = b * c * h;
  const m13 = (-0.5 * b * c - 0.5 * a * d + f) * h;
  return [(1 / size.width) * m00 * imageSize.width, (1 / size.height) * m01 * imageSize.width, m03 * imageSize.width,
          (1 / size.width) * m10 * imageSize.height, (1 / size.height) * m11 * imageSize.height, m13 * imageSize.height, 0, 0];
}

// split_detection_result.js: the TF.js palm graph's one output [anchors, 1 + numCoords]
// holds the score logit first, then the box and keypoint coordinates.
export function splitDetections(data, numCoords) {
  const n = data.length / (numCoords + 1);
  const logits = new Float32Array(n);
  const boxes = new Float32Array(n * numCoords);
  for (let i = 0; i < n; i++) {
    logits[i] = data[i * (numCoords + 1)];
    boxes.set(data.subarray(i * (numCoords + 1) + 1, (i + 1) * (numCoords + 1)), i * numCoords);
  }
  return {logits, boxes};
}

// tensors_to_detections.js: sigmoid scores (logits clipped), the box and keypoints of every
// anchor scoring at least `minScore`, relative to the letterboxed tensor. Only candidates are
// decoded (the library decodes all anchors, then drops the rest: same result).
export function decodeDetections(logits, boxes, anchors, cfg, minScore) {
  const detections = [];
  for (let i = 0; i < cfg.numBoxes; i++) {
    let logit = logits[i];
    if (cfg.sigmoidScore && cfg.scoreClippingThresh != null) {
      logit = Math.min(Math.max(logit, -cfg.scoreClippingThresh), cfg.scoreClippingThresh);
    }
    const score = cfg.sigmoidScore ? 1 / (1 + Math.exp(-logit)) : logit;
    if (minScore != null && score < minScore) continue;
    const a = anchors[i];
    const o = i * cfg.numCoords;
    const at = (k) => boxes[o + k];
    const [x, y, w, h] = cfg.reverseOutputOrder
      ? [at(cfg.boxCoordOffset), at(cfg.boxCoordOffset + 1), at(cfg.boxCoordOffset + 2), at(cfg.boxCoordOffset + 3)]
      : [at(cfg.boxCoordOffset + 1), at(cfg.boxCoordOffset), at(cfg.boxCoordOffset + 3), at(cfg.boxCoordOffset + 2)];
    const xCenter = x / cfg.xScale * a.w + a.x;
    const yCenter = y / cfg.yScale * a.h + a.y;
    // sic: the library scales w by the anchor height too (anchors here are fixed 1x1).
    const height = cfg.applyExponentialOnBoxSize ? Math.exp(h / cfg.hScale) * a.h : h / cfg.hScale * a.h;
    const width = cfg.applyExponentialOnBoxSize ? Math.exp(w / cfg.wScale) * a.w : w / cfg.wScale * a.h;
    const box = {xMin: xCenter - width / 2, yMin: yCenter - height / 2, xMax: xCenter + width / 2, yMax: yCenter + height / 2};
    box.width = box.xMax - box.xMin;
    box.height = box.yMax - box.yMin;
    if (box.width < 0 || box.height < 0) continue;
    const keypoints = [];
    for (let k = 0; k < cfg.numKeypoints; k++) {
      const p = o + cfg.keypointCoordOffset + k * cfg.numValuesPerKeypoint;
      const [kx, ky] = cfg.reverseOutputOrder ? [boxes[p], boxes[p + 1]] : [boxes[p + 1], boxes[p]];
      keypoints.push({x: kx / cfg.xScale * a.w + a.x, y: ky / cfg.yScale * a.h + a.y});
    }
    detections.push({score, box, keypoints});
  }
  return detections;
}

// remove_detection_letterbox.js: from the letterboxed tensor back to the image (0..1).
export function removeDetectionLetterbox(detection, padding) {
  const lr = padding.left + padding.right;
  const tb = padding.top + padding.bottom;
  const b = detection.box;
  const xMin = (b.xMin - padding.left) / (1 - lr);
  const yMin = (b.yMin - padding.top) / (1 - tb);
  const width = b.width / (1 - lr);
  const height = b.height / (1 - tb);
  return {
    score: detection.score,
    box: {xMin, yMin, width, height, xMax: xMin + width, yMax: yMin + height},
    keypoints: detection.keypoints.map((k) => ({x: (k.x - padding.left) / (1 - lr), y: (k.y - padding.top) / (1 - tb)})),
  };
}

// transform_rect.transformNormalizedRect (the configs here add no rotation).
export function transformRect(rect, imageSize, cfg) {
  const {width, height, rotation} = rect;
  let xCenter = rect.xCenter;
  let yCenter = rect.yCenter;
  if (rotation === 0) {
    xCenter += width * cfg.shiftX;
    yCenter += height * cfg.shiftY;
  } else {
    const W = imageSize.width;
    const H = imageSize.height;
    xCenter += (W * width * cfg.shiftX * Math.cos(rotation) - H * height * cfg.shiftY * Math.sin(rotation)) / W;
    yCenter += (W * width * cfg.shiftX * Math.sin(rotation) + H * height * cfg.shiftY * Math.cos(rotation)) / H;
  }
  let w = width;
  let h = height;
  if (cfg.squareLong || cfg.squareShort) {
    const side = (cfg.squareLong ? Math.max : Math.min)(width * imageSize.width, height * imageSize.height);
    w = side / imageSize.width;
    h = side / imageSize.height;
  }
  return {xCenter, yCenter, width: w * cfg.scaleX, height: h * cfg.scaleY, rotation};
}

// detection_to_rect (bounding box, rotated so the start -> end keypoint points at the target
// angle) then transform_rect: the palm's box grown into the hand's square ROI.
export function palmToRoi(palm, imageSize, cfg) {
  const start = palm.keypoints[cfg.rotationVectorStartKeypointIndex];
  const end = palm.keypoints[cfg.rotationVectorEndKeypointIndex];
  const dx = (end.x - start.x) * imageSize.width;
  const dy = (end.y - start.y) * imageSize.height;
  const target = Math.PI * cfg.rotationVectorTargetAngleDegree / 180;
  const rect = {xCenter: palm.box.xMin + palm.box.width / 2, yCenter: palm.box.yMin + palm.box.height / 2,
                width: palm.box.width, height: palm.box.height,
                rotation: normalizeRadians(target - Math.atan2(-dy, dx))};
  return transformRect(rect, imageSize, cfg);
}

// The landmarks the library tracks a hand by (wrist, thumb CMC..IP, and each finger's MCP and
// PIP: steadier than the tips): hand_detector's slice(0, 4), (5, 7), (9, 11), (13, 15), (17, 19).
const TRACKED = [0, 1, 2, 3, 5, 6, 9, 10, 13, 14, 17, 18];

// tfjs/calculators/hand_landmarks_to_rect.js on the TRACKED subset (normalised landmarks):
// the smallest rect around them, rotated so wrist -> middle of the finger bases points up.
export function landmarksToRect(landmarks, imageSize) {
  const pts = TRACKED.map((i) => landmarks[i]);
  const [wrist, indexMcp, middleMcp, ringMcp] = [pts[0], pts[4], pts[6], pts[8]];
  const x1 = ((indexMcp.x + ringMcp.x) / 2 + middleMcp.x) / 2 * imageSize.width;
  const y1 = ((indexMcp.y + ringMcp.y) / 2 + middleMcp.y) / 2 * imageSize.height;
  const rotation = normalizeRadians(Math.PI / 2 - Math.atan2(-(y1 - wrist.y * imageSize.height), x1 - wrist.x * imageSize.width));
  const reverse = normalizeRadians(-rotation);
  const xs = pts.map((p) => p.x);
  const ys = pts.map((p) => p.y);
  const cx = (Math.max(...xs) + Math.min(...xs)) / 2;
  const cy = (Math.max(...ys) + Math.min(...ys)) / 2;
  const projected = pts.map((p) => {
    const ox = (p.x - cx) * imageSize.width;
    const oy = (p.y - cy) * imageSize.height;
    return [ox * Math.cos(reverse) - oy * Math.sin(reverse), ox * Math.sin(reverse) + oy * Math.cos(reverse)];
  });
  const pxs = projected.map((p) => p[0]);
  const pys = projected.map((p) => p[1]);
  const [minX, maxX, minY, maxY] = [Math.min(...pxs), Math.max(...pxs), Math.min(...pys), Math.max(...pys)];
  const pcx = (maxX + minX) / 2;
  const pcy = (maxY + minY) / 2;
  return {
    xCenter: (pcx * Math.cos(rotation) - pcy * Math.sin(rotation) + imageSize.width * cx) / imageSize.width,
    yCenter: (pcx * Math.sin(rotation) + pcy * Math.cos(rotation) + imageSize.height * cy) / imageSize.height,
    width: (maxX - minX) / imageSize.width,
    height: (maxY - minY) / imageSize.height,
    rotation,
  };
}

// association_norm_rect.js with one list: a later rect replaces earlier ones it overlaps
// by more than `minSimilarity` (IoU of the axis-aligned boxes).
export function associateRects(rects, minSimilarity) {
  const bbox = (r) => ({xMin: r.xCenter - r.width / 2, yMin: r.yCenter - r.height / 2,
                        xMax: r.xCenter - r.width / 2 + r.width, yMax: r.yCenter - r.height / 2 + r.height});
  const similarity = (r1, r2) => {
    const a = bbox(r1);
    const b = bbox(r2);
    if (a.xMax < b.xMin || b.xMax < a.xMin || a.yMax < b.yMin || b.yMax < a.yMin) return 0;
    const inter = Math.max(Math.min(a.xMax, b.xMax) - Math.max(a.xMin, b.xMin), 0)
      * Math.max(Math.min(a.yMax, b.yMax) - Math.max(a.yMin, b.yMin), 0);
    const union = r1.width * r1.height + r2.width * r2.height - inter;
    return union > 0 ? inter / union : 0;
  };
  let result = [];
  for (const rect of rects) {
    result = result.filter((prev) => similarity(rect, prev) <= minSimilarity);
    result.push(rect);
  }
  return result;
}

// tensors_to_landmarks + remove_landmark_letterbox + calculate_landmark_projection: the
// landmark model's crop-pixel output -> normalised image landmarks {x, y, z}.
export function projectLandmarks(raw, rect, padding, cfg) {
  const dims = raw.length / cfg.numLandmarks;
  const lr = padding.left + padding.right;
  const tb = padding.top + padding.bottom;
  const c = Math.cos(rect.rotation);
  const s = Math.sin(rect.rotation);
  const out = [];
  for (let i = 0; i < cfg.numLandmarks; i++) {
    const x = (raw[i * dims] / cfg.inputImageWidth - padding.left) / (1 - lr) - 0.5;
    const y = (raw[i * dims + 1] / cfg.inputImageHeight - padding.top) / (1 - tb) - 0.5;
    const z = raw[i * dims + 2] / cfg.inputImageWidth / (cfg.normalizeZ || 1) / (1 - lr);
    out.push({x: (c * x - s * y) * rect.width + rect.xCenter, y: (s * x + c * y) * rect.height + rect.yCenter,
              z: z * rect.width});
  }
  return out;
}

// calculate_world_landmark_projection: metres, rotated like the ROI (z unchanged).
export function projectWorldLandmarks(raw, rect, numLandmarks) {
  const dims = raw.length / numLandmarks;
  const c = Math.cos(rect.rotation);
  const s = Math.sin(rect.rotation);
  const out = [];
  for (let i = 0; i < numLandmarks; i++) {
    const [x, y, z] = [raw[i * dims], raw[i * dims + 1], raw[i * dims + 2]];
    out.push({x: c * x - s * y, y: s * x + c * y, z});
  }
  return out;
}

// ---------------------------------------------------------------- the models' output names

// Output names per model and role, from the manifest: the TF.js graphs answer to the names
// the library asks for (outputs.library_landmark_request: landmarks, hand flag, handedness,
// world landmarks; the palm graph has one output), the .tflite files to their own
// (server.outputs; the converter records them).
export function outputNames(manifest, litert) {
  if (litert) {
    const names = (manifest.server || {}).outputs;
    if (!names || !names.detector || !names.landmark) {
      throw new Error(`${manifest.id}'s manifest does not name the .tflite outputs (rebuild the model)`);
    }
    return names;
  }
  const tensors = (manifest.outputs || {}).tensors || [];
  const detector = tensors.filter((t) => t.model === 'detector');
  const request = (manifest.outputs || {}).library_landmark_request || [];
  if (detector.length !== 1 || request.length !== 4) throw new Error(`${manifest.id}'s manifest lacks the TF.js output names`);
  const [landmarks, handflag, handedness, worldLandmarks] = request;
  return {detector: {detections: detector[0].name},
          landmark: {landmarks, handflag, handedness, world_landmarks: worldLandmarks}};
}
