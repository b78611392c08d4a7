// An Ultralytics .tflite or .onnx in the converter's layout. Ultralytics' LiteRT export
// (format=litert or tflite, 8.4.83 on) takes an NCHW input and gives the boxes (and pose
// keypoints) as fractions of the input size and segmentation prototypes as NCHW; its older
// TensorFlow export (onnx2tf, what years of .tflite files are) takes NHWC and gives NHWC
// prototypes, weights often int8; its ONNX export takes NCHW and gives input pixels. Each,
// exported with nms=True (or from an NMS-free head), gives detections after NMS instead of
// the head: [1, N, 6 + extras], x1, y1, x2, y2 (OBB: cx, cy, w, h), score, class, then the
// task's extras. The converter's graphs take NHWC and give the raw head in input pixels and
// NHWC prototypes, which tensor/decode.js reads. This wrapper moves between them around the
// runner it is given, a LiteRtGraph (runtime/litert.js) or OnnxGraph (runtime/onnx.js), so one
// decode (and one NMS) serves every file. It mirrors Ultralytics' own LiteRT and ONNX backends
// (ultralytics/nn/backends/); its scales are contract/ultralytics_litert.js's.
// A semantic model's class logits and a depth model's map come NCHW ([1, C, H, W]) and leave
// NHWC; the ONNX export of a semantic model gives its class map ([1, H, W], argmax inside),
// which leaves one-hot, so tensor/dense.js's resize and argmax give the same classes back.
import {detectionScale, extrasOf, headScale} from '../contract/ultralytics_litert.js';

const tf = globalThis.tf;

export class UltralyticsGraph {
  // graph: a LiteRtGraph or OnnxGraph of the file; manifest: runtime/model-file.js userManifest's (its file_io
  // says the file's layout; an installed model's is the LiteRT export's).
  constructor(graph, manifest) {
    this.graph = graph;
    this.runtime = graph.runtime;
    this.accelerator = graph.accelerator;
    this.task = manifest.ultralytics_task;
    this.classify = this.task === 'classify';
    this.dense = this.task === 'semantic' || this.task === 'depth';
    const [, height, width] = manifest.input.shape;
    this.size = [height, width];
    this.nc = manifest.labels.length;
    this.kptShape = manifest.kpt_shape || null;
    const io = manifest.file_io || {layout: 'NCHW'};
    this.nhwc = io.layout === 'NHWC';
    this.end2end = Boolean(io.end2end);
    // Boxes and keypoints as fractions of the input: the .tflite exports' heads, and the
    // TensorFlow export's detections after NMS too. An .onnx gives input pixels throughout.
    const pixels = io.units === 'pixels';
    this.headInFractions = !pixels;
    this.detectionsInFractions = !pixels && this.nhwc;
    this.inputQuantization = io.input && io.input.dtype === 'uint8' ? io.input : null;
    // a .tflite's quantized outputs (an .onnx's uint8 output is a class map: no scale)
    this.outputQuantization = (io.outputs || []).filter((o) => o.dtype === 'uint8' && o.scale != null);
    // An installed classifier's two outputs (probabilities, features), told apart by shape.
    this.shapeOf = Object.fromEntries(((manifest.outputs || {}).tensors || []).filter((t) => t.shape).map((t) => [t.name, t.shape.join()]));
    this.inputs = [{name: 'x', shape: manifest.input.shape, dtype: 'float32'}];
    this.graphInput = graph.inputs[0];
    const expected = this.nhwc ? [1, height, width, 3] : [1, 3, height, width];
    if (this.graphInput.shape.join() !== expected.join()) {
      throw new Error(`its input is [${this.graphInput.shape}], not the [${expected}] its metadata says`);
    }
  }

  // feed: [1, H, W, 3] -> the manifest's outputs in order: [head(, prototypes)], or a
  // classifier's in the order of `outputNames` (a dropped file's one output as it is).
  async predict(feed, outputNames) {
    const x = feed instanceof tf.Tensor ? feed : Array.isArray(feed) ? feed[0] : Object.values(feed)[0];
    const fed = tf.tidy(() => {
      const laid = this.nhwc ? x : tf.transpose(x, [0, 3, 1, 2]);
      const q = this.inputQuantization;
      return q ? laid.div(q.scale).add(q.zeroPoint).round().clipByValue(0, 255).cast('int32') : laid;
    });
    let outputs;
    try {
      outputs = await this.graph.predict(fed);
    } finally {
      if (fed !== x) fed.dispose();
    }
    try {
      return tf.tidy(() => {
        const real = outputs.map((t) => this.dequantized(t));
        if (this.classify) return this.classifierOutputs(real, outputNames);
        return this.dense ? this.denseOutputs(real) : this.detectorOutputs(real);
      });
    } finally {
      tf.dispose(outputs);
    }
  }

  // A uint8 output (a quantized file's) as the real values its scale and zero point say.
  dequantized(t) {
    const q = this.outputQuantization.find((o) => o.shape.join() === t.shape.join());
    return q ? t.toFloat().sub(q.zeroPoint).mul(q.scale) : t;
  }

  classifierOutputs(outputs, names) {
    if (!names || outputs.length === 1) return [outputs[0].clone()];
    return names.map((name) => {
      const found = outputs.find((t) => t.shape.join() === this.shapeOf[name]);
      if (!found) throw new Error(`the .tflite has no output shaped [${this.shapeOf[name]}] for ${name}`);
      return found.clone();
    });
  }

  // A dense model's one output -> [1, H, W, C]: logits or depth NHWC, a class map one-hot.
  denseOutputs([out]) {
    if (out.rank === 3) {
      return [tf.equal(out.toInt().expandDims(3), tf.range(0, this.nc, 1, 'int32').reshape([1, 1, 1, -1])).toFloat()];
    }
    if (out.rank !== 4) throw new Error(`the model gives [${out.shape}], not the [1, C, H, W] map its metadata's task makes`);
    return [this.nhwc ? out.clone() : out.transpose([0, 2, 3, 1])];
  }

  // [head, prototypes?] in any order -> [head [1, 4 + nc + extras, A] in pixels, prototypes NHWC].
  detectorOutputs(outputs) {
    const head = outputs.find((t) => t.rank === 3);
    if (!head) throw new Error(`the model gives no [1, rows, anchors] head (it gives ${outputs.map((t) => `[${t.shape}]`).join(', ')})`);
    const prototypes = outputs.find((t) => t.rank === 4);
    const extras = extrasOf(this.task, this.kptShape, prototypes ? prototypes.shape[this.nhwc ? 3 : 1] : 0);
    const out = [this.end2end ? this.headOfDetections(head, extras) : this.headInPixels(head, extras)];
    if (prototypes) out.push(this.nhwc ? prototypes.clone() : prototypes.transpose([0, 2, 3, 1]));
    return out;
  }

  // The raw head, [1, rows, A] or (some exports) [1, A, rows], in pixels.
  headInPixels(head, extras) {
    const rows = 4 + this.nc + extras;
    const [, a, b] = head.shape;
    if (a !== rows && b !== rows) throw new Error(`the model's head is [${head.shape}], not the ${rows} rows its metadata's task and classes make`);
    const columns = a === rows ? head : head.transpose([0, 2, 1]);
    if (!this.headInFractions) return columns.clone();
    const scale = headScale(rows, this.size, this.nc, this.kptShape);
    return columns.mul(tf.tensor3d(scale, [1, rows, 1]));
  }

  // Detections after NMS [1, N, 6 + extras] -> the raw head's layout, each detection an anchor
  // whose one class scores its score: the page's decode, NMS and tracking then serve it as
  // they serve the head (NMS keeps what NMS kept).
  headOfDetections(head, extras) {
    const columns = 6 + extras;
    if (head.shape[2] !== columns) throw new Error(`the model gives [${head.shape}], not the [1, N, ${columns}] detections after NMS its metadata says`);
    const scale = detectionScale(columns, this.size, this.kptShape);
    const rows = (this.detectionsInFractions ? head.mul(tf.tensor3d(scale, [1, 1, columns])) : head).squeeze([0]);
    const box = rows.slice([0, 0], [-1, 4]);
    let xywh = box;
    if (this.task !== 'obb') {   // x1, y1, x2, y2 -> cx, cy, w, h (OBB gives cx, cy, w, h)
      const [x1, y1, x2, y2] = tf.split(box, 4, 1);
      xywh = tf.concat([x1.add(x2).div(2), y1.add(y2).div(2), x2.sub(x1), y2.sub(y1)], 1);
    }
    // One-hot by comparison: tf.oneHot wants at least two classes.
    const classes = rows.slice([0, 5], [-1, 1]).round().toInt();
    const scores = tf.equal(classes, tf.range(0, this.nc, 1, 'int32').expandDims(0)).toFloat()
      .mul(rows.slice([0, 4], [-1, 1]));
    const parts = [xywh, scores, ...(extras ? [rows.slice([0, 6], [-1, extras])] : [])];
    return tf.concat(parts, 1).transpose().expandDims(0);
  }

  dispose() {
    this.graph.dispose();
  }
}
