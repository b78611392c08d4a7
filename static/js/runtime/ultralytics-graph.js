// An Ultralytics LiteRT .tflite in the converter's layout. Ultralytics' export (format=litert
// or tflite) takes an NCHW input and gives the boxes (and pose keypoints) as fractions of the
// input size and segmentation prototypes as NCHW; the converter's graphs take NHWC and give
// input pixels and NHWC prototypes, which decode.js reads. This wrapper moves between the two
// around LiteRtGraph (litert.js), so one decode serves both.

const tf = globalThis.tf;

// The head's scale per row: x rows by the input width, y rows by its height, the rest 1.
// Rows: cx, cy, w, h, nc class scores, then the task's: k keypoints of d values (x, y[, v]).
export function headScale(rows, [height, width], nc, kptShape) {
  const scale = new Float32Array(rows).fill(1);
  scale.set([width, height, width, height]);
  if (kptShape) {
    const [k, d] = kptShape;
    for (let i = 0; i < k; i++) {
      scale[4 + nc + i * d] = width;
      scale[4 + nc + i * d + 1] = height;
    }
  }
  return scale;
}

export class UltralyticsGraph {
  // graph: a LiteRtGraph of the file; manifest: model-file.js userManifest's.
  constructor(graph, manifest) {
    this.graph = graph;
    this.runtime = graph.runtime;
    this.accelerator = graph.accelerator;
    this.classify = manifest.ultralytics_task === 'classify';
    const [, height, width] = manifest.input.shape;
    this.size = [height, width];
    this.nc = manifest.labels.length;
    this.kptShape = manifest.kpt_shape || null;
    // An installed classifier's two outputs (probabilities, features), told apart by shape.
    this.shapeOf = Object.fromEntries(((manifest.outputs || {}).tensors || []).filter((t) => t.shape).map((t) => [t.name, t.shape.join()]));
    this.inputs = [{name: 'x', shape: manifest.input.shape, dtype: 'float32'}];
    this.graphInput = graph.inputs[0];
    const expected = [1, 3, height, width];
    if (this.graphInput.shape.join() !== expected.join()) {
      throw new Error(`its input is [${this.graphInput.shape}], not the [${expected}] its metadata says`);
    }
  }

  // feed: [1, H, W, 3] -> the manifest's outputs in order: [head(, prototypes)], or a
  // classifier's in the order of `outputNames` (a dropped file's one output as it is).
  async predict(feed, outputNames) {
    const x = feed instanceof tf.Tensor ? feed : Array.isArray(feed) ? feed[0] : Object.values(feed)[0];
    const nchw = tf.transpose(x, [0, 3, 1, 2]);
    let outputs;
    try {
      outputs = await this.graph.predict(nchw);
    } finally {
      nchw.dispose();
    }
    try {
      return tf.tidy(() => this.classify ? this.classifierOutputs(outputs, outputNames) : this.detectorOutputs(outputs));
    } finally {
      tf.dispose(outputs);
    }
  }

  classifierOutputs(outputs, names) {
    if (!names || outputs.length === 1) return [outputs[0].clone()];
    return names.map((name) => {
      const found = outputs.find((t) => t.shape.join() === this.shapeOf[name]);
      if (!found) throw new Error(`the .tflite has no output shaped [${this.shapeOf[name]}] for ${name}`);
      return found.clone();
    });
  }

  // [head [1, C, A], prototypes [1, nm, mh, mw]?] in any order -> [head in pixels, prototypes NHWC].
  detectorOutputs(outputs) {
    const head = outputs.find((t) => t.rank === 3);
    if (!head) throw new Error(`the model gives no [1, rows, anchors] head (it gives ${outputs.map((t) => `[${t.shape}]`).join(', ')})`);
    const scale = headScale(head.shape[1], this.size, this.nc, this.kptShape);
    const out = [head.mul(tf.tensor3d(scale, [1, scale.length, 1]))];
    const prototypes = outputs.find((t) => t.rank === 4);
    if (prototypes) out.push(prototypes.transpose([0, 2, 3, 1]));
    return out;
  }

  dispose() {
    this.graph.dispose();
  }
}
