// Detector outputs (TF.js tensors, in the manifest's order) -> the shared result schema:
// decode(manifest, outputs, frame, options). The formats and options are contract/decode.js's
// (the twin of modelcontract/decode.py); this reads the tensors, and for the raw heads picks
// the candidates and runs NMS on the backend, reading back only the kept anchors' rows.
import {outputIndex} from '../contract/manifest.js';
import {classMask, decodeOptions, nmsDetections, obbDetections, poseDetections, row, segmentDetections,
        topScores} from '../contract/decode.js';

const tf = globalThis.tf;

function tensorByKey(manifest, outputs, key) {
  return outputs[outputIndex(manifest, key)];
}

async function decodeNms(manifest, outputs, frame, options) {
  const rows = await Promise.all(
    ['boxes', 'scores', 'classes', 'valid_detections'].map((k) => tensorByKey(manifest, outputs, k).data()));
  return nmsDetections(manifest, rows, frame, options);
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
  const nm = protos.shape[3];
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
  return segmentDetections(manifest, c, coefficients, prototypes, protos.shape, frame);
}

async function decodePose(manifest, outputs, frame, options) {
  const nc = manifest.labels.length;
  const c = await rawCandidates(manifest, outputs[0], nc, options);
  let points;
  try {
    points = await keptColumns(c, 4 + nc);
  } finally {
    c.columns.dispose();
  }
  return poseDetections(manifest, c, points, outputs[0].shape[1] - 4 - nc, frame);
}

// [1, 4+nc+1, A]: read once; everything after the read in plain JS (contract/decode.js).
async function decodeObb(manifest, outputs, frame, options) {
  return obbDetections(manifest, await outputs[0].data(), outputs[0].shape, frame, options);
}

export async function decode(manifest, outputs, frame, options) {
  const format = manifest.outputs.format;
  options = decodeOptions(options);
  if (format === 'nms') return decodeNms(manifest, outputs, frame, options);
  if (format === 'yolo-raw') return decodeRaw(manifest, outputs, frame, options);
  if (format === 'yolo-seg') return decodeSegment(manifest, outputs, frame, options);
  if (format === 'yolo-pose') return decodePose(manifest, outputs, frame, options);
  if (format === 'yolo-obb') return decodeObb(manifest, outputs, frame, options);
  throw new Error(`unknown detector output format ${format}`);
}
