// The manifest's input contract, its arithmetic without TF.js — the same as
// modelcontract/geometry.py (bilinear with half-pixel centres, no antialiasing; Math.round;
// integer offsets): the resize geometries, the transform back to source pixels, the bilinear
// neighbours of a resize window, the unresized fast path's values and the answer-check
// pattern. tensor/geometry.js prepareInput does the resize itself in TF.js.

// Centre crop: the largest full resize (in crops' worth of pixels) done before cutting.
export const FULL_RESIZE_LIMIT = 4;

export function letterboxGeometry(srcW, srcH, dstW, dstH) {
  const scale = Math.min(dstW / srcW, dstH / srcH);
  const newW = Math.max(1, Math.round(srcW * scale));
  const newH = Math.max(1, Math.round(srcH * scale));
  return {newW, newH, left: Math.floor((dstW - newW) / 2), top: Math.floor((dstH - newH) / 2)};
}

export function centerCropGeometry(srcW, srcH, dstW, dstH, cropFraction) {
  const scale = Math.max(dstW / cropFraction / srcW, dstH / cropFraction / srcH);
  const newW = Math.max(dstW, Math.round(srcW * scale));
  const newH = Math.max(dstH, Math.round(srcH * scale));
  return {newW, newH, left: Math.floor((newW - dstW) / 2), top: Math.floor((newH - dstH) / 2)};
}

// Maps model-input pixels back to source pixels: x_src = (x - offsetX) / scaleX.
export function makeTransform(scaleX, scaleY, offsetX, offsetY) {
  return {
    scaleX, scaleY, offsetX, offsetY,
    toSource(x, y) {
      return [(x - offsetX) / scaleX, (y - offsetY) / scaleY];
    },
  };
}

export function sourceSize(source) {
  return {
    width: source.videoWidth || source.naturalWidth || source.width,
    height: source.videoHeight || source.naturalHeight || source.height,
  };
}

// Source neighbours (lo, hi) and weight of hi for output indices start..start+count-1 of a
// half-pixel resize of one axis from inSize to outSize (= geometry.py bilinear_axis:
// float64 positions, float32 weights).
export function bilinearAxis(outSize, inSize, start, count) {
  const lo = new Int32Array(count);
  const hi = new Int32Array(count);
  const frac = new Float32Array(count);
  const ratio = inSize / outSize;
  for (let i = 0; i < count; i++) {
    const pos = Math.max(0, (start + i + 0.5) * ratio - 0.5);
    lo[i] = Math.min(Math.floor(pos), inSize - 1);
    hi[i] = Math.min(lo[i] + 1, inSize - 1);
    frac[i] = pos - lo[i];
  }
  return {lo, hi, frac};
}

// A width x height image that goes into the model input without a resize (a 640x480 camera
// frame letterboxed to 640x640, say) and without mean/std: its geometry, else null.
export function unresizedGeometry(width, height, spec) {
  const [, dstH, dstW] = spec.shape;
  const identity = (v, by) => !v || v.every((x) => x === by);
  if (!identity(spec.mean, 0) || !identity(spec.std, 1)) return null;
  const resize = spec.resize || 'stretch';
  const g = resize === 'letterbox' ? letterboxGeometry(width, height, dstW, dstH)
    : resize === 'stretch' ? {newW: dstW, newH: dstH, left: 0, top: 0} : null;
  return g && g.newW === width && g.newH === height ? g : null;
}

// RGBA bytes of such an image (unresizedGeometry's g) -> the model input's values [1,H,W,3]
// (Float32Array), in one pass straight into its array: the same float32 values as
// prepareInput's tensor path (pixel x scale and pad value x scale, each one float32 product:
// exact in a double, then rounded once on the store), without its four full passes
// (fromPixels, toFloat, pad, mul). tensor/geometry.js unresizedInput makes the tensor.
export function unresizedValues(rgba, width, height, g, spec) {
  const [, dstH, dstW] = spec.shape;
  const scale = Math.fround(spec.scale ?? 1);
  const values = new Float32Array(dstH * dstW * 3).fill(Math.fround(spec.pad_value || 0) * scale);
  for (let y = 0; y < height; y++) {
    let from = y * width * 4;
    let to = ((y + g.top) * dstW + g.left) * 3;
    for (let x = 0; x < width; x++, from += 4, to += 3) {
      values[to] = rgba[from] * scale;
      values[to + 1] = rgba[from + 1] * scale;
      values[to + 2] = rgba[from + 2] * scale;
    }
  }
  return values;
}

// ---- The answer-check pattern (answers.js; = geometry.py check_pattern) ----
// A colour ramp with two dark-centred discs, in integer arithmetic only, so Python and
// JavaScript make the same bytes; detectors find objects in it (see geometry.py).
export const CHECK_PATTERN = 'discs-v1';
const CHECK_DISCS = [[4, 4, 3, [230, 40, 40]], [12, 12, 3, [250, 250, 250]]];   // centre x, y, radius in 1/16 of the side
const CHECK_CORE = [20, 20, 20];

// -> Uint8Array of height x width x 3 RGB
export function checkPattern(height, width) {
  const pixels = new Uint8Array(height * width * 3);
  const side = Math.min(width, height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let colour = [96 + Math.floor((x * 64) / width), 128, 96 + Math.floor((y * 64) / height)];
      for (const [cx, cy, r, disc] of CHECK_DISCS) {
        const dx = x * 16 - cx * width;
        const dy = y * 16 - cy * height;
        const d2 = dx * dx + dy * dy;
        const r2 = (r * side) ** 2;
        if (d2 < r2) colour = d2 * 4 < r2 ? CHECK_CORE : disc;
      }
      pixels.set(colour, (y * width + x) * 3);
    }
  }
  return pixels;
}
