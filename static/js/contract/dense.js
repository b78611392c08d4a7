// A dense model's output -> a map of the photo, as Ultralytics' predictors make it; the twin
// of modelcontract/dense.py (tests/unit/test_dense_twin.py holds the two together).
//   "yolo-semantic"  class logits [1, h, w, nc] over the letterboxed input: cropped to the
//                    letterbox's content, resized to the photo (bilinear, half-pixel), argmax
//                    -> a class map (Uint8Array, one class id a pixel)
//   "yolo-depth"     a depth map [1, h, w, 1] over the stretched input: resized to the photo
//                    (bilinear, align_corners, as the depth predictor does) -> Float32Array
// The resize and argmax run on the backend; only the map is read back.
const tf = globalThis.tf;

export const DENSE_FORMATS = ['yolo-semantic', 'yolo-depth'];
export const DEPTH_LEVELS = 65535;   // the API's 16-bit PNG: depth = min + value * (max - min) / 65535

export function isDense(manifest) {
  return DENSE_FORMATS.includes(manifest.outputs.format);
}

// The letterbox's content in the input: rows x cols at (top, left), as dense.py reads the transform.
function contentRegion(transform, width, height) {
  return {top: Math.trunc(transform.offsetY), left: Math.trunc(transform.offsetX),
          rows: Math.round(transform.scaleY * height), cols: Math.round(transform.scaleX * width)};
}

// outputs: the model's one output tensor in an array; frame: {transform, width, height}.
// -> {values, width, height}: values a Uint8Array of class ids or a Float32Array of depths.
export async function decodeDense(manifest, outputs, frame) {
  const {width, height} = frame;
  const semantic = manifest.outputs.format === 'yolo-semantic';
  const map = tf.tidy(() => {
    const out = outputs[0];
    if (!semantic) return tf.image.resizeBilinear(out, [height, width], true).reshape([-1]);
    const {top, left, rows, cols} = contentRegion(frame.transform, width, height);
    const content = out.slice([0, top, left, 0], [1, rows, cols, -1]);
    // argMax takes the lower class on a tie, as numpy's argmax does
    return tf.image.resizeBilinear(content, [height, width], false, true).argMax(-1).reshape([-1]);
  });
  try {
    const data = await map.data();
    return {values: semantic ? Uint8Array.from(data) : data, width, height};
  } finally {
    map.dispose();
  }
}

// The classes a class map holds, most pixels first (= dense.py semantic_summary).
export function semanticSummary(map, labels) {
  const counts = new Map();
  for (const c of map.values) counts.set(c, (counts.get(c) || 0) + 1);
  const total = map.values.length;
  const classes = [...counts.keys()].sort((a, b) => counts.get(b) - counts.get(a) || a - b)
    .map((c) => ({class_id: c, label: labels[c] ?? String(c), pixels: counts.get(c),
                  share: Math.round(counts.get(c) / total * 1e6) / 1e6}));
  return {width: map.width, height: map.height, classes};
}

// {width, height, min, max, mean} of a depth map (= dense.py depth_summary).
export function depthSummary(map) {
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  for (const v of map.values) {
    if (v < min) min = v;
    if (v > max) max = v;
    sum += v;
  }
  return {width: map.width, height: map.height, min, max, mean: sum / map.values.length};
}

// A map's value at source pixel (x, y), or null outside it.
export function valueAt(map, x, y) {
  const col = Math.floor(x);
  const row = Math.floor(y);
  if (col < 0 || row < 0 || col >= map.width || row >= map.height) return null;
  return map.values[row * map.width + col];
}
