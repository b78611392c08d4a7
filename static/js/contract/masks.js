// Instance masks of a YOLO segmentation head, as Ultralytics' process_mask makes them; the twin
// of modelcontract/masks.py (tests/unit/test_task_decode_twin.py holds the two together):
// logits = coefficients @ prototypes (done on the backend, decode.js), zeroed outside the box
// at the prototypes' resolution (rounded half to even, as torch), upsampled bilinearly to the
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
  const cropped = (y, x) => (x >= x1 && x < x2 && y >= y1 && y < y2 ? logits[y * mw + x] : 0);
  const rows = bottom - top;
  const cols = right - left;
  const ys = bilinearAxis(inH, mh, top, rows);
  const xs = bilinearAxis(inW, mw, left, cols);
  const mask = new Uint8Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const fy = ys.frac[r];
    for (let c = 0; c < cols; c++) {
      const fx = xs.frac[c];
      const upper = f32(f32(cropped(ys.lo[r], xs.lo[c]) * f32(1 - fx)) + f32(cropped(ys.lo[r], xs.hi[c]) * fx));
      const lower = f32(f32(cropped(ys.hi[r], xs.lo[c]) * f32(1 - fx)) + f32(cropped(ys.hi[r], xs.hi[c]) * fx));
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
  const key = (x, y) => y * (cols + 1) + x;
  const edges = new Map();   // vertex -> the steps leaving it, the part on their right
  const add = (x, y, step) => {
    const k = key(x, y);
    if (!edges.has(k)) edges.set(k, []);
    edges.get(k).push(step);
  };
  const starts = [];
  for (let y = 0; y < rows; y++) {
    for (let x = 0; x < cols; x++) {
      if (!at(x, y)) continue;
      if (!at(x, y - 1)) { add(x, y, [1, 0]); starts.push([x, y]); }
      if (!at(x + 1, y)) add(x + 1, y, [0, 1]);
      if (!at(x, y + 1)) add(x + 1, y + 1, [-1, 0]);
      if (!at(x - 1, y)) add(x, y + 1, [0, -1]);
    }
  }
  const used = new Set();    // top edges already walked, by their start vertex
  const loops = [];
  for (const [sx, sy] of starts) {
    if (used.has(key(sx, sy))) continue;
    const points = [[sx, sy]];
    let [x, y] = [sx, sy];
    let step = [1, 0];
    for (;;) {
      if (step[0] === 1 && step[1] === 0) used.add(key(x, y));
      x += step[0];
      y += step[1];
      if (x === sx && y === sy) break;
      const options = edges.get(key(x, y));
      // two parts touching at a corner: turn right, keeping them apart
      const turn = options.length === 1 ? options[0] : [-step[1], step[0]];
      if (turn[0] !== step[0] || turn[1] !== step[1]) points.push([x, y]);
      step = turn;
    }
    if (step[0] === 1 && step[1] === 0) points.shift();   // the start lies inside a straight run
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
