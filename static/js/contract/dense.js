// A dense model's map of the photo, as Ultralytics' predictors make it; the twin of
// modelcontract/dense.py (tests/unit/test_dense_twin.py holds the two together): the formats,
// the letterbox's content region, a map's summary and its value at a pixel. The map itself
// comes from tensor/dense.js decodeDense (the resize and argmax run on the TF.js backend).

export const DENSE_FORMATS = ['yolo-semantic', 'yolo-depth'];
export const DEPTH_LEVELS = 65535;   // the API's 16-bit PNG: depth = min + value * (max - min) / 65535

export function isDense(manifest) {
  return DENSE_FORMATS.includes(manifest.outputs.format);
}

// The letterbox's content in the input: rows x cols at (top, left), as dense.py reads the transform.
export function contentRegion(transform, width, height) {
  return {top: Math.trunc(transform.offsetY), left: Math.trunc(transform.offsetX),
          rows: Math.round(transform.scaleY * height), cols: Math.round(transform.scaleX * width)};
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
