// Detector outputs -> the shared result schema, for both manifest formats (tensor/decode.js
// reads the outputs and runs the candidate selection and NMS in TF.js; these are the steps
// after it, in plain JavaScript):
//   "nms"       NMS inside the graph: boxes [1,N,4] x1,y1,x2,y2 / input size, scores, classes, valid
//   "yolo-raw"  raw head [1, 4+nc, A]: cx,cy,w,h in input pixels + per-class scores (decoded here)
//   "yolo-seg"  the same with nm mask coefficients, and prototypes [1, mh, mw, nm]: + "polygons"
//   "yolo-pose" the same with k keypoints (x, y[, visibility]) after the scores: + "keypoints"
//   "yolo-obb"  [1, 4+nc+1, A] with the angle last; rotated NMS: + "corners", "angle"
// Boxes come back in source-image pixels via the letterbox inverse. The twin of
// modelcontract/decode.py (tests/unit/test_decode_twin.py holds the two together).
//
// options: {score, iou, maxDet, classes}. classes (class ids, a Set or an array; empty or
// null = all) is one rule for both formats: a box of another class is no candidate. For
// "yolo-raw" it is dropped before NMS, so it neither suppresses a wanted box nor takes a
// maxDet place; the in-graph NMS of "nms" has already run, so there its rows are skipped
// before the cut.
import {cropLogits, instanceMask, maskRegion, outlines} from './masks.js';
import {corners, fastNms, regularize} from './rotated.js';

export function toSourceBox(box, transform, width, height) {
  const [x1, y1] = transform.toSource(box[0], box[1]);
  const [x2, y2] = transform.toSource(box[2], box[3]);
  const clamp = (v, hi) => Math.min(Math.max(v, 0), hi);
  return [clamp(x1, width), clamp(y1, height), clamp(x2, width), clamp(y2, height)];
}

// options with classes as a Set (null: every class).
export function decodeOptions(options) {
  return {...options, classes: options.classes ? new Set(options.classes) : null};  // a Set or an array
}

export function wanted(options, classId) {
  return !options.classes || options.classes.size === 0 || options.classes.has(classId);
}

// "nms": the graph's rows [boxes, scores, classes, valid] (TypedArrays) -> detections.
export function nmsDetections(manifest, [boxes, scores, classes, valid], frame, options) {
  const [, inH, inW] = manifest.input.shape;
  const detections = [];
  for (let i = 0; i < valid[0] && detections.length < options.maxDet; i++) {
    const classId = Math.round(classes[i]);
    if (scores[i] < options.score || !wanted(options, classId)) continue;
    const b = boxes.subarray(i * 4, i * 4 + 4);
    detections.push({class_id: classId, label: manifest.labels[classId], score: scores[i],
                     box: toSourceBox([b[0] * inW, b[1] * inH, b[2] * inW, b[3] * inH],
                                      frame.transform, frame.width, frame.height)});
  }
  return detections;
}

// 1 for each wanted class id below numClasses, else 0; null when every class is wanted.
export function classMask(options, numClasses) {
  if (!options.classes || options.classes.size === 0) return null;
  const mask = new Float32Array(numClasses);
  for (const c of options.classes) if (c >= 0 && c < numClasses) mask[c] = 1;
  return mask;
}

// The indices of the scores above `score`, best first (ties by index), at most maxDet.
export function topScores(scores, score, maxDet) {
  const above = Array.from(scores.keys()).filter((i) => scores[i] > score);
  return above.sort((i, j) => scores[j] - scores[i] || i - j).slice(0, maxDet);
}

// Anchor i of the candidates c ({kept, boxes, best, bestClass}: tensor/decode.js
// rawCandidates) -> its detection.
export function row(manifest, c, i, frame) {
  return {class_id: c.bestClass[i], label: manifest.labels[c.bestClass[i]], score: c.best[i],
          box: toSourceBox(Array.from(c.boxes.subarray(i * 4, i * 4 + 4)), frame.transform, frame.width, frame.height)};
}

export function toSourcePoint([x, y], frame) {
  const [sx, sy] = frame.transform.toSource(x, y);
  return [Math.min(Math.max(sx, 0), frame.width), Math.min(Math.max(sy, 0), frame.height)];
}

// "yolo-seg": the kept anchors' mask coefficients [kept x nm] and the prototypes
// [mh x mw x nm] (TypedArrays; protoShape [1, mh, mw, nm]) -> detections with their outlines.
export function segmentDetections(manifest, c, coefficients, prototypes, protoShape, frame) {
  const [, mh, mw, nm] = protoShape;
  const [, inH, inW] = manifest.input.shape;
  const found = [];
  c.kept.forEach((i, n) => {
    const box = Array.from(c.boxes.subarray(i * 4, i * 4 + 4));
    const region = maskRegion(mh, mw, box, [inW, inH]);
    if (!region) return;   // an empty box: an empty mask, which Ultralytics drops
    const m = instanceMask(cropLogits(coefficients.subarray(n * nm, (n + 1) * nm), prototypes, mw, region), region);
    if (!m.mask.includes(1)) return;   // an empty mask: Ultralytics drops the instance
    found.push({...row(manifest, c, i, frame),
                polygons: outlines(m.mask, m.rows, m.cols, [m.left, m.top])
                  .map((loop) => loop.map((p) => toSourcePoint(p, frame)))});
  });
  return found;
}

// "yolo-pose": the kept anchors' keypoint values [kept x width] -> detections with keypoints.
export function poseDetections(manifest, c, points, width, frame) {
  const [k, d] = manifest.kpt_shape;
  return c.kept.map((i, n) => ({...row(manifest, c, i, frame), keypoints: Array.from({length: k}, (_, j) => {
    const at = n * width + j * d;
    return [...toSourcePoint([points[at], points[at + 1]], frame), d === 3 ? points[at + 2] : 1];
  })}));
}

// "yolo-obb": the head's values (a TypedArray of shape [1, channels, anchors]) -> rotated
// detections: cx, cy, w, h, class scores, angle; rotated NMS.
export function obbDetections(manifest, data, [, channels, anchors], frame, options) {
  const agnostic = (manifest.nms || {}).agnostic !== false;
  const nc = channels - 5;
  const at = (ch, a) => data[ch * anchors + a];
  const candidates = [];
  for (let a = 0; a < anchors; a++) {
    let best = -Infinity;
    let cls = 0;
    for (let j = 0; j < nc; j++) if (at(4 + j, a) > best) { best = at(4 + j, a); cls = j; }
    if (best > Math.fround(options.score) && wanted(options, cls)) candidates.push({a, best, cls});
  }
  const boxes = candidates.map(({a, cls}) => {
    const shift = agnostic ? 0 : cls * 4096;
    return [at(0, a) + shift, at(1, a) + shift, at(2, a), at(3, a), at(channels - 1, a)];
  });
  const kept = fastNms(boxes, candidates.map((x) => x.best), options.iou).slice(0, options.maxDet);
  return kept.map((n) => {
    const {a, best, cls} = candidates[n];
    const box = regularize([at(0, a), at(1, a), at(2, a), at(3, a), at(channels - 1, a)]);
    const points = corners(box).map(([x, y]) => frame.transform.toSource(x, y));   // not clamped, as Ultralytics
    const xs = points.map((p) => p[0]);
    const ys = points.map((p) => p[1]);
    const clamp = (v, hi) => Math.min(Math.max(v, 0), hi);
    return {class_id: cls, label: manifest.labels[cls], score: best, corners: points, angle: box[4],
            box: [clamp(Math.min(...xs), frame.width), clamp(Math.min(...ys), frame.height),
                  clamp(Math.max(...xs), frame.width), clamp(Math.max(...ys), frame.height)]};
  });
}
