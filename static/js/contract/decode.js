// Detector outputs -> the shared result schema, for both manifest formats:
//   "nms"       NMS inside the graph: boxes [1,N,4] x1,y1,x2,y2 / input size, scores, classes, valid
//   "yolo-raw"  raw head [1, 4+nc, A]: cx,cy,w,h in input pixels + per-class scores (decoded here)
// Boxes come back in source-image pixels via the letterbox inverse. The twin of
// modelcontract/decode.py (tests/unit/test_decode_twin.py holds the two together).
//
// options: {score, iou, maxDet, classes}. classes (class ids, a Set or an array; empty or
// null = all) is one rule for both formats: a box of another class is no candidate. For
// "yolo-raw" it is dropped before NMS, so it neither suppresses a wanted box nor takes a
// maxDet place; the in-graph NMS of "nms" has already run, so there its rows are skipped
// before the cut.
import {outputIndex} from './manifest.js';

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

async function decodeRaw(manifest, outputs, frame, options) {
  // [1, 4+nc, A] -> per anchor: box (x1,y1,x2,y2) and best class; NMS on the backend.
  const agnostic = (manifest.nms || {}).agnostic !== false;
  const mask = classMask(options, outputs[0].shape[1] - 4);
  const [boxes, best, bestClass, nmsBoxes] = tf.tidy(() => {
    const rows = outputs[0].squeeze([0]).transpose();          // [A, 4+nc]
    const [cxcywh, classScores] = tf.split(rows, [4, rows.shape[1] - 4], 1);
    const [cx, cy, w, h] = tf.split(cxcywh, 4, 1);
    const xyxy = tf.concat([cx.sub(w.div(2)), cy.sub(h.div(2)), cx.add(w.div(2)), cy.add(h.div(2))], 1);
    const cls = classScores.argMax(1);
    // Per-class NMS in one call: shift each class's boxes far apart so they never overlap.
    const shift = agnostic ? tf.scalar(0) : cls.toFloat().mul(4096).expandDims(1);
    // Anchors of unwanted classes score -Infinity: NMS never takes them (nor lets them suppress).
    const scores = mask ? tf.where(tf.gather(tf.tensor1d(mask), cls).cast('bool'), classScores.max(1),
                                   tf.fill([rows.shape[0]], -Infinity)) : classScores.max(1);
    // NMS wants y1,x1,y2,x2.
    return [xyxy, scores, cls, tf.gather(xyxy.add(shift), [1, 0, 3, 2], 1)];
  });
  let kept;
  let idx, b, s, c;
  try {
    kept = await tf.image.nonMaxSuppressionAsync(nmsBoxes, best, options.maxDet, options.iou, options.score);
    [idx, b, s, c] = await Promise.all([kept.data(), boxes.data(), best.data(), bestClass.data()]);
  } finally {
    tf.dispose([boxes, best, bestClass, nmsBoxes, kept].filter(Boolean));
  }
  return Array.from(idx, (i) => ({class_id: c[i], label: manifest.labels[c[i]], score: s[i],
                                  box: toSourceBox(Array.from(b.subarray(i * 4, i * 4 + 4)), frame.transform,
                                                   frame.width, frame.height)}));
}

export async function decode(manifest, outputs, frame, options) {
  const format = manifest.outputs.format;
  options = {...options, classes: options.classes ? new Set(options.classes) : null};  // a Set or an array
  if (format === 'nms') return decodeNms(manifest, outputs, frame, options);
  if (format === 'yolo-raw') return decodeRaw(manifest, outputs, frame, options);
  throw new Error(`unknown detector output format ${format}`);
}
