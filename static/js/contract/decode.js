// Detector outputs -> the shared result schema, for both manifest formats:
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
import {outputIndex} from './manifest.js';
import {cropLogits, instanceMask, maskRegion, outlines} from './masks.js';
import {corners, fastNms, regularize} from './rotated.js';

const tf = globalThis.tf;

function tensorByKey(manifest, outputs, key) {
  return outputs[outputIndex(manifest, key)];
}

function toSourceBox(box, transform, width, height) {
  const [x1, y1] = transform.toSource(box[0], box[1]);
  const [x2, y2] = transform.toSource(box[2], box[3]);
  const clamp = (v, hi) => Math.min(Math.max(v, 0), hi);
  return [clamp(x1, width), clamp(y1, height), clamp(x2, width), clamp(y2, height)];
}

function wanted(options, classId) {
  return !options.classes || options.classes.size === 0 || options.classes.has(classId);
}

async function decodeNms(manifest, outputs, frame, options) {
  const [, inH, inW] = manifest.input.shape;
  const [boxes, scores, classes, valid] = await Promise.all(
    ['boxes', 'scores', 'classes', 'valid_detections'].map((k) => tensorByKey(manifest, outputs, k).data()));
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
function classMask(options, numClasses) {
  if (!options.classes || options.classes.size === 0) return null;
  const mask = new Float32Array(numClasses);
  for (const c of options.classes) if (c >= 0 && c < numClasses) mask[c] = 1;
  return mask;
}

// The indices of the scores above `score`, best first (ties by index), at most maxDet.
function topScores(scores, score, maxDet) {
  const above = Array.from(scores.keys()).filter((i) => scores[i] > score);
  return above.sort((i, j) => scores[j] - scores[i] || i - j).slice(0, maxDet);
}

// [1, 4+nc+extra, A] -> the anchors NMS keeps (per class unless the manifest says agnostic):
// {kept, columns (the head as a [4+nc+extra, A] tensor, for keptRows to gather from; the
// caller disposes it), boxes (x1,y1,x2,y2 per anchor), best, bestClass}. Only the boxes and
// scores are transposed: a segmentation head's 32 mask rows are read for the kept anchors
// alone. The twin of decode.py raw_candidates.
async function rawCandidates(manifest, head, nc, options) {
  const agnostic = (manifest.nms || {}).agnostic !== false;
  const mask = classMask(options, nc);
  const [columns, boxes, best, bestClass, nmsBoxes] = tf.tidy(() => {
    const columns = head.squeeze([0]);                          // [4+nc+extra, A]
    const rows = columns.slice([0, 0], [4 + nc, -1]).transpose();   // [A, 4+nc]
    const classScores = rows.slice([0, 4], [-1, nc]);
    const [cx, cy, w, h] = tf.split(rows.slice([0, 0], [-1, 4]), 4, 1);
    const xyxy = tf.concat([cx.sub(w.div(2)), cy.sub(h.div(2)), cx.add(w.div(2)), cy.add(h.div(2))], 1);
    const cls = classScores.argMax(1);
    // Per-class NMS in one call: shift each class's boxes far apart so they never overlap.
    const shift = agnostic ? tf.scalar(0) : cls.toFloat().mul(4096).expandDims(1);
    // Anchors of unwanted classes score -Infinity: NMS never takes them (nor lets them suppress).
    const scores = mask ? tf.where(tf.gather(tf.tensor1d(mask), cls).cast('bool'), classScores.max(1),
                                   tf.fill([rows.shape[0]], -Infinity)) : classScores.max(1);
    // NMS wants y1,x1,y2,x2.
    return [columns, xyxy, scores, cls, tf.gather(xyxy.add(shift), [1, 0, 3, 2], 1)];
  });
  let kept;
  try {
    // An IoU threshold of 1: no suppression (a model whose NMS ran inside it). TF.js's NMS
    // would still drop identical boxes (it suppresses at IoU >= the threshold).
    kept = options.iou >= 1 ? null
      : await tf.image.nonMaxSuppressionAsync(nmsBoxes, best, options.maxDet, options.iou, options.score);
    const [b, s, c] = await Promise.all([boxes.data(), best.data(), bestClass.data()]);
    const order = kept ? Array.from(await kept.data()) : topScores(s, options.score, options.maxDet);
    return {kept: order, columns, boxes: b, best: s, bestClass: c};
  } catch (error) {
    columns.dispose();
    throw error;
  } finally {
    tf.dispose([boxes, best, bestClass, nmsBoxes, kept].filter(Boolean));
  }
}

function row(manifest, c, i, frame) {
  return {class_id: c.bestClass[i], label: manifest.labels[c.bestClass[i]], score: c.best[i],
          box: toSourceBox(Array.from(c.boxes.subarray(i * 4, i * 4 + 4)), frame.transform, frame.width, frame.height)};
}

function toSourcePoint([x, y], frame) {
  const [sx, sy] = frame.transform.toSource(x, y);
  return [Math.min(Math.max(sx, 0), frame.width), Math.min(Math.max(sy, 0), frame.height)];
}

async function decodeRaw(manifest, outputs, frame, options) {
  const c = await rawCandidates(manifest, outputs[0], outputs[0].shape[1] - 4, options);
  c.columns.dispose();
  return c.kept.map((i) => row(manifest, c, i, frame));
}

// The head's rows of the kept anchors, from `from` on (`count` of them; -1: the rest):
// a [kept, count] tensor (the caller disposes it).
function keptRows(c, from, count = -1) {
  return tf.tidy(() => tf.gather(c.columns, c.kept, 1).slice([from, 0], [count, -1]).transpose());
}

// The same as a Float32Array [kept x (rows - from)].
async function keptColumns(c, from) {
  if (c.kept.length === 0) return new Float32Array(0);
  const picked = keptRows(c, from);
  try {
    return await picked.data();
  } finally {
    picked.dispose();
  }
}

async function decodeSegment(manifest, outputs, frame, options) {
  // head [1, 4+nc+nm, A] and prototypes [1, mh, mw, nm], told apart by rank
  const head = outputs.find((t) => t.rank === 3);
  const protos = outputs.find((t) => t.rank === 4);
  const nc = manifest.labels.length;
  const [, mh, mw, nm] = protos.shape;
  const [, inH, inW] = manifest.input.shape;
  const c = await rawCandidates(manifest, head, nc, options);
  let coefficients = new Float32Array(0);
  let prototypes = new Float32Array(0);
  try {
    if (c.kept.length) {
      const kept = keptRows(c, 4 + nc, nm);
      try {
        [coefficients, prototypes] = await Promise.all([kept.data(), protos.data()]);
      } finally {
        kept.dispose();
      }
    }
  } finally {
    c.columns.dispose();
  }
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

async function decodePose(manifest, outputs, frame, options) {
  const nc = manifest.labels.length;
  const [k, d] = manifest.kpt_shape;
  const c = await rawCandidates(manifest, outputs[0], nc, options);
  let points;
  try {
    points = await keptColumns(c, 4 + nc);
  } finally {
    c.columns.dispose();
  }
  const width = outputs[0].shape[1] - 4 - nc;
  return c.kept.map((i, n) => ({...row(manifest, c, i, frame), keypoints: Array.from({length: k}, (_, j) => {
    const at = n * width + j * d;
    return [...toSourcePoint([points[at], points[at + 1]], frame), d === 3 ? points[at + 2] : 1];
  })}));
}

async function decodeObb(manifest, outputs, frame, options) {
  // [1, 4+nc+1, A]: cx, cy, w, h, class scores, angle; everything after the read in plain JS
  const agnostic = (manifest.nms || {}).agnostic !== false;
  const [, channels, anchors] = outputs[0].shape;
  const nc = channels - 5;
  const data = await outputs[0].data();
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

export async function decode(manifest, outputs, frame, options) {
  const format = manifest.outputs.format;
  options = {...options, classes: options.classes ? new Set(options.classes) : null};  // a Set or an array
  if (format === 'nms') return decodeNms(manifest, outputs, frame, options);
  if (format === 'yolo-raw') return decodeRaw(manifest, outputs, frame, options);
  if (format === 'yolo-seg') return decodeSegment(manifest, outputs, frame, options);
  if (format === 'yolo-pose') return decodePose(manifest, outputs, frame, options);
  if (format === 'yolo-obb') return decodeObb(manifest, outputs, frame, options);
  throw new Error(`unknown detector output format ${format}`);
}
