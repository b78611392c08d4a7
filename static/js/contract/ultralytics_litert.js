// The arithmetic of reading an Ultralytics .tflite or .onnx as the converter's layout (the twin
// of modelcontract/ultralytics_litert.py; tests/unit/test_ultralytics_litert.py holds them
// together): the scales that turn boxes and keypoints given as fractions of the input into
// input pixels, and the task's values per detection. tensor/ultralytics-graph.js applies them.

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

// The same for detections after NMS: x1, y1, x2, y2, score, class, then keypoints.
export function detectionScale(columns, [height, width], kptShape) {
  const scale = new Float32Array(columns).fill(1);
  scale.set([width, height, width, height]);
  if (kptShape) {
    const [k, d] = kptShape;
    for (let i = 0; i < k; i++) {
      scale[6 + i * d] = width;
      scale[6 + i * d + 1] = height;
    }
  }
  return scale;
}

// The task's values per detection after the box and class scores: mask coefficients (as many
// as the prototypes have channels), keypoint values, or the OBB's angle.
export function extrasOf(task, kptShape, maskCoefficients) {
  return {segment: maskCoefficients, pose: kptShape ? kptShape[0] * kptShape[1] : 0, obb: 1}[task] || 0;
}
