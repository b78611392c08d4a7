// Instance masks of a YOLO segmentation head, as Ultralytics' process_mask makes them; the twin
// of modelcontract/masks.py (tests/unit/test_task_decode_twin.py holds the two together):
// logits = coefficients @ prototypes, zeroed outside the box at the prototypes' resolution
// (rounded half to even, as torch; cropLogits computes only the pixels inside), upsampled bilinearly to the
// model input over the box's window only, and > 0. outlines() traces each 4-connected part's
// outer boundary along pixel edges: filling the polygons gives back the mask exactly.
import {bilinearAxis} from './geometry.js';

const f32 = Math.fround;

// Rounds half to even (torch.round, numpy.round); Math.round rounds half up.
export function roundHalfEven(v) {
  const r = Math.round(v);
  return (r - v === 0.5 && r % 2 !== 0) ? r - 1 : r;
}

// The box (x1, y1, x2, y2 in input pixels) at the prototypes' resolution: the kept
// [x1, x2) x [y1, y2) of Ultralytics' crop_mask, in float32 as there.
export function cropWindow(box, [inW, inH], [mw, mh]) {
  const ratios = [f32(mw / inW), f32(mh / inH), f32(mw / inW), f32(mh / inH)];
  return box.map((v, i) => roundHalfEven(Math.max(f32(f32(v) * ratios[i]), 0)));
}

// One instance's mask logits [mh * mw]: its coefficients (Float32Array [nm]) times the
// prototypes (Float32Array [mh * mw * nm], NHWC) inside its crop window, zeros outside, which
// is all instanceMask reads. Only the window is computed: 20 instances at 640 px took 16 ms
// as one matMul over every prototype pixel on TF.js WASM (bench/mask_decode.py). Summed in
// doubles, so a logit may differ from numpy's float32 sum in its last bits.
export function cropLogits(coefficients, protos, mh, mw, box, [inW, inH]) {
  const nm = coefficients.length;
  const [x1, y1, x2, y2] = cropWindow(box, [inW, inH], [mw, mh]);
  const logits = new Float32Array(mh * mw);
  for (let y = Math.max(y1, 0); y < Math.min(y2, mh); y++) {
    for (let x = Math.max(x1, 0); x < Math.min(x2, mw); x++) {
      const at = (y * mw + x) * nm;
      let sum = 0;
      for (let k = 0; k < nm; k++) sum += coefficients[k] * protos[at + k];
      logits[y * mw + x] = sum;
    }
  }
  return logits;
}

// One instance's mask in input pixels: {mask (Uint8Array rows x cols), rows, cols, left, top},
// the window of the input that can hold mask pixels (the crop plus one prototype pixel a side).
// logits: Float32Array [mh * mw].
export function instanceMask(logits, mh, mw, box, [inW, inH]) {
  const [x1, y1, x2, y2] = cropWindow(box, [inW, inH], [mw, mh]);
  const sx = inW / mw;
  const sy = inH / mh;
  const left = Math.max(Math.floor((x1 - 1) * sx), 0);
  const top = Math.max(Math.floor((y1 - 1) * sy), 0);
  const right = Math.min(Math.ceil((x2 + 1) * sx), inW);
  const bottom = Math.min(Math.ceil((y2 + 1) * sy), inH);
  if (right <= left || bottom <= top) return {mask: new Uint8Array(0), rows: 0, cols: 0, left: 0, top: 0};
  const rows = bottom - top;
  const cols = right - left;
  const ys = bilinearAxis(inH, mh, top, rows);
  const xs = bilinearAxis(inW, mw, left, cols);
  // A prototype pixel outside the crop reads 0; which of each column's two samples fall inside
  // is worked out once, not per pixel.
  const inside = (v, lo, hi) => v >= lo && v < hi;
  const loIn = Uint8Array.from(xs.lo, (x) => inside(x, x1, x2));
  const hiIn = Uint8Array.from(xs.hi, (x) => inside(x, x1, x2));
  const mask = new Uint8Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const fy = ys.frac[r];
    const upperRow = inside(ys.lo[r], y1, y2) ? ys.lo[r] * mw : -1;
    const lowerRow = inside(ys.hi[r], y1, y2) ? ys.hi[r] * mw : -1;
    const at = (row, x, ok) => (row >= 0 && ok ? logits[row + x] : 0);
    for (let c = 0; c < cols; c++) {
      const fx = xs.frac[c];
      const lo = xs.lo[c];
      const hi = xs.hi[c];
      const upper = f32(f32(at(upperRow, lo, loIn[c]) * f32(1 - fx)) + f32(at(upperRow, hi, hiIn[c]) * fx));
      const lower = f32(f32(at(lowerRow, lo, loIn[c]) * f32(1 - fx)) + f32(at(lowerRow, hi, hiIn[c]) * fx));
      mask[r * cols + c] = f32(f32(upper * f32(1 - fy)) + f32(lower * fy)) > 0 ? 1 : 0;
    }
  }
  return {mask, rows, cols, left, top};
}

// The outer boundary of each 4-connected part of mask (rows x cols, 1 = in) as a polygon of
// pixel corners [[x, y], ...], clockwise on screen, straight runs merged, offset by
// [left, top]; parts in the order of their first row, then column.
export function outlines(mask, rows, cols, [left, top] = [0, 0]) {
  const at = (x, y) => (x >= 0 && y >= 0 && x < cols && y < rows && mask[y * cols + x] === 1);
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
    for (let x = 0; x < cols; x++) {
      if (mask[y * cols + x] !== 1) continue;
      if (!at(x, y - 1)) { add(x, y, 0); starts.push(y * width + x); }
      if (!at(x + 1, y)) add(x + 1, y, 1);
      if (!at(x, y + 1)) add(x + 1, y + 1, 2);
      if (!at(x - 1, y)) add(x, y + 1, 3);
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
    const points = [[sx, sy]];
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
      if (turn !== step) points.push([x, y]);
      step = turn;
    }
    if (step === 0) points.shift();   // the start lies inside a straight run
    let area2 = 0;
    for (let i = 0; i < points.length; i++) {
      const [px, py] = points[i];
      const [qx, qy] = points[(i + 1) % points.length];
      area2 += px * qy - qx * py;
    }
    if (area2 > 0) loops.push(points.map(([px, py]) => [px + left, py + top]));   // a hole runs the other way
  }
  return loops;
}
