// Instance masks of a YOLO segmentation head, as Ultralytics' process_mask makes them in
// predict() today (upsampled, then cropped: ultralytics #24272); the twin of
// modelcontract/masks.py (tests/unit/test_task_decode_twin.py holds the two together):
// logits = coefficients @ prototypes (cropLogits computes only the prototype pixels the box's
// upsampling reads), upsampled bilinearly to the model input inside the box only, > 0 and in
// the box (x1 <= column < x2, y1 <= row < y2, float32). outlines() traces each 4-connected
// part's outer boundary along pixel edges: filling the polygons gives back the mask exactly.
import {bilinearAxis} from './geometry.js';

const f32 = Math.fround;

// The input pixels Ultralytics' crop_mask keeps of a box (x1, y1, x2, y2 in input pixels):
// [left, top, right, bottom), within the input.
export function cropWindow(box, [inW, inH]) {
  const clamp = (v, hi) => Math.min(Math.max(Math.ceil(f32(v)), 0), hi);
  return [clamp(box[0], inW), clamp(box[1], inH), clamp(box[2], inW), clamp(box[3], inH)];
}

// The box's region in input pixels and the bilinear taps of its columns and rows:
// {left, top, cols, rows, xs, ys} (xs, ys: geometry.js bilinearAxis), or null for an empty
// region. cropLogits and instanceMask both take it.
export function maskRegion(mh, mw, box, [inW, inH]) {
  const [left, top, right, bottom] = cropWindow(box, [inW, inH]);
  if (right <= left || bottom <= top) return null;
  const cols = right - left;
  const rows = bottom - top;
  return {left, top, cols, rows, xs: bilinearAxis(inW, mw, left, cols), ys: bilinearAxis(inH, mh, top, rows)};
}

// One instance's mask logits over the prototype pixels its region's upsampling reads:
// {values (Float32Array rows x width), x0, y0, width}, its coefficients (Float32Array [nm])
// times the prototypes (Float32Array [mh * mw * nm], NHWC) there. 20 instances at 640 px
// took 16 ms as one matMul over every prototype pixel on TF.js WASM (bench/mask_decode.py);
// a full [mh * mw] array per instance (100 KB at 640 px) only made garbage. Summed in
// doubles, so a logit may differ from numpy's float32 sum in its last bits.
export function cropLogits(coefficients, protos, mw, region) {
  const nm = coefficients.length;
  const {xs, ys} = region;
  const x0 = xs.lo[0];
  const y0 = ys.lo[0];
  const width = xs.hi[region.cols - 1] - x0 + 1;
  const height = ys.hi[region.rows - 1] - y0 + 1;
  const values = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const at = ((y + y0) * mw + x + x0) * nm;
      let sum = 0;
      for (let k = 0; k < nm; k++) sum += coefficients[k] * protos[at + k];
      values[y * width + x] = sum;
    }
  }
  return {values, x0, y0, width};
}

// All of a [mh * mw] logits array as cropLogits' answer.
export function wholeLogits(values, mw) {
  return {values, x0: 0, y0: 0, width: mw};
}

// One instance's mask in input pixels over its region (maskRegion; null: empty):
// {mask (Uint8Array rows x cols), rows, cols, left, top}. logits: cropLogits' (or
// wholeLogits') for that region. Each prototype row the region reads is interpolated across
// once (a 4x upsampling reads each about four times), then the rows down: the same float32
// sums as interpolating each pixel from its four neighbours.
export function instanceMask(logits, region) {
  if (!region) return {mask: new Uint8Array(0), rows: 0, cols: 0, left: 0, top: 0};
  const {rows, cols} = region;
  const {lo: xLo, hi: xHi, frac: xFrac} = region.xs;
  const {lo: yLo, hi: yHi, frac: yFrac} = region.ys;
  const {values, x0, y0, width} = logits;
  const first = yLo[0];
  const last = yHi[rows - 1];
  const across = new Float32Array((last - first + 1) * cols);
  for (let y = first; y <= last; y++) {
    const from = (y - y0) * width - x0;
    const to = (y - first) * cols;
    for (let c = 0; c < cols; c++) {
      const fx = xFrac[c];
      across[to + c] = f32(values[from + xLo[c]] * f32(1 - fx)) + f32(values[from + xHi[c]] * fx);
    }
  }
  const mask = new Uint8Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const fy = yFrac[r];
    const keepUpper = f32(1 - fy);
    const upper = (yLo[r] - first) * cols;
    const lower = (yHi[r] - first) * cols;
    const to = r * cols;
    for (let c = 0; c < cols; c++) {
      mask[to + c] = f32(f32(across[upper + c] * keepUpper) + f32(across[lower + c] * fy)) > 0 ? 1 : 0;
    }
  }
  return {mask, rows, cols, left: region.left, top: region.top};
}

// The outer boundary of each 4-connected part of mask (rows x cols, 1 = in) as a polygon of
// pixel corners [[x, y], ...], clockwise on screen, straight runs merged, offset by
// [left, top]; parts in the order of their first row, then column.
export function outlines(mask, rows, cols, [left, top] = [0, 0]) {
  // the mask in a border of zeros: a pixel's neighbours need no bounds checks
  const pw = cols + 2;
  const padded = new Uint8Array(pw * (rows + 2));
  for (let y = 0; y < rows; y++) padded.set(mask.subarray(y * cols, (y + 1) * cols), (y + 1) * pw + 1);
  const width = cols + 1;    // pixel corners per row
  // The steps leaving each corner, the part on their right: at most two (two parts touching
  // at a corner), as step codes 0 right, 1 down, 2 left, 3 up (typed arrays: no allocation
  // per edge, the bulk of the time on a large mask).
  const first = new Int8Array(width * (rows + 1)).fill(-1);
  const second = new Int8Array(width * (rows + 1)).fill(-1);
  const add = (x, y, step) => {
    const k = y * width + x;
    if (first[k] < 0) first[k] = step;
    else second[k] = step;
  };
  const starts = [];
  for (let y = 0; y < rows; y++) {
    for (let x = 0, p = (y + 1) * pw + 1; x < cols; x++, p++) {
      if (padded[p] !== 1) continue;
      if (padded[p - pw] !== 1) { add(x, y, 0); starts.push(y * width + x); }
      if (padded[p + 1] !== 1) add(x + 1, y, 1);
      if (padded[p + pw] !== 1) add(x + 1, y + 1, 2);
      if (padded[p - 1] !== 1) add(x, y + 1, 3);
    }
  }
  const DX = [1, 0, -1, 0];
  const DY = [0, 1, 0, -1];
  const used = new Uint8Array(width * (rows + 1));   // top edges already walked, by their start
  const loops = [];
  for (const start of starts) {
    if (used[start]) continue;
    const sx = start % width;
    const sy = (start - sx) / width;
    const points = [[sx + left, sy + top]];
    let [x, y] = [sx, sy];
    let step = 0;
    for (;;) {
      if (step === 0) used[y * width + x] = 1;
      x += DX[step];
      y += DY[step];
      if (x === sx && y === sy) break;
      const k = y * width + x;
      // two parts touching at a corner: turn right, keeping them apart
      const turn = second[k] < 0 ? first[k] : (step + 1) & 3;
      if (turn !== step) points.push([x + left, y + top]);
      step = turn;
    }
    if (step === 0) points.shift();   // the start lies inside a straight run
    let area2 = 0;
    for (let i = 0; i < points.length; i++) {
      const [px, py] = points[i];
      const [qx, qy] = points[(i + 1) % points.length];
      area2 += px * qy - qx * py;
    }
    if (area2 > 0) loops.push(points);   // a hole runs the other way (the offset moves no area)
  }
  return loops;
}
