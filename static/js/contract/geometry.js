// The manifest's input contract in TF.js — the same arithmetic as modelcontract/geometry.py
// (bilinear with half-pixel centres, no antialiasing; Math.round; integer offsets).
// Work follows the model input, not the resized image: the centre crop computes only the
// pixels inside the crop (a 600x1 image would otherwise be resized to 134400x224 first).
const tf = globalThis.tf;

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

// The rows x cols window at (top, left) of an [h, w] bilinear resize of pixels ([H, W, 3], any
// dtype) -> float32 [rows, cols, 3], gathering only the neighbours the window needs; the
// float32 operations of geometry.py resize_bilinear(window=...), in the same order.
export function resizeWindow(pixels, h, w, top, left, rows, cols) {
  const [inH, inW] = pixels.shape;
  return tf.tidy(() => {
    const ys = bilinearAxis(h, inH, top, rows);
    const xs = bilinearAxis(w, inW, left, cols);
    const x0 = tf.tensor1d(xs.lo, 'int32');
    const x1 = tf.tensor1d(xs.hi, 'int32');
    const wx1 = tf.tensor3d(xs.frac, [1, cols, 1]);
    const wx0 = tf.sub(1, wx1);
    const lerpX = (ysIdx) => {
      const lines = tf.gather(pixels, tf.tensor1d(ysIdx, 'int32'), 0);
      return tf.gather(lines, x0, 1).toFloat().mul(wx0).add(tf.gather(lines, x1, 1).toFloat().mul(wx1));
    };
    const wy1 = tf.tensor3d(ys.frac, [rows, 1, 1]);
    return lerpX(ys.lo).mul(tf.sub(1, wy1)).add(lerpX(ys.hi).mul(wy1));
  });
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

// RGBA bytes of such an image (unresizedGeometry's g) -> the model input [1,H,W,3], in one
// pass straight into its array: the same float32 values as prepareInput's tensor path (pixel
// x scale and pad value x scale, each one float32 product: exact in a double, then rounded
// once on the store), without its four full passes (fromPixels, toFloat, pad, mul).
export function unresizedInput(rgba, width, height, g, spec) {
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
  return tf.tensor4d(values, [1, dstH, dstW, 3]);
}

// source (video, image, canvas, ImageBitmap or an int32/float [h,w,3] tensor) ->
// {input: [1,H,W,3] float32 tensor, transform, width, height}. The caller disposes input.
export function prepareInput(source, spec) {
  // A canvas that needs no resize, where TF.js computes on the CPU anyway (WASM, CPU; the
  // helper of LiteRT): one pass (a GPU backend does the tensor path on the GPU instead).
  const canvas = typeof HTMLCanvasElement === 'function' && source instanceof HTMLCanvasElement;
  const g = canvas && ['wasm', 'cpu'].includes(tf.getBackend()) && unresizedGeometry(source.width, source.height, spec);
  const ctx = g && source.getContext('2d', {willReadFrequently: true});   // null on a WebGL canvas
  if (ctx) {
    const {width, height} = source;
    const rgba = ctx.getImageData(0, 0, width, height).data;
    return {input: unresizedInput(rgba, width, height, g, spec), width, height,
            transform: makeTransform(g.newW / width, g.newH / height, g.left, g.top)};
  }
  const [, dstH, dstW] = spec.shape;
  const isTensor = source instanceof tf.Tensor;
  const {width, height} = isTensor ? {width: source.shape[1], height: source.shape[0]} : sourceSize(source);
  const resize = spec.resize || 'stretch';
  let transform;
  const input = tf.tidy(() => {
    const raw = isTensor ? source : tf.browser.fromPixels(source);
    let x;
    // Same-size resizes and identity normalisation are skipped: each op is a full pass.
    const resizeTo = (h, w) => {
      const pixels = raw.toFloat();
      return h === height && w === width ? pixels : tf.image.resizeBilinear(pixels, [h, w], false, true);
    };
    if (resize === 'letterbox') {
      const g = letterboxGeometry(width, height, dstW, dstH);
      x = tf.pad(resizeTo(g.newH, g.newW), [[g.top, dstH - g.newH - g.top], [g.left, dstW - g.newW - g.left], [0, 0]],
                 spec.pad_value || 0);
      transform = makeTransform(g.newW / width, g.newH / height, g.left, g.top);
    } else if (resize === 'center-crop') {
      const g = centerCropGeometry(width, height, dstW, dstH, spec.crop_fraction || 1);
      // One fused resize then a slice is ~4x faster than the gathered window on WASM, and
      // bounded while the resized image is at most FULL_RESIZE_LIMIT crops; past it (long
      // strips: a 600x1 image would be resized to 134400x224) only the crop is computed.
      x = g.newH * g.newW <= FULL_RESIZE_LIMIT * dstH * dstW
        ? tf.slice(resizeTo(g.newH, g.newW), [g.top, g.left, 0], [dstH, dstW, 3])
        : resizeWindow(raw, g.newH, g.newW, g.top, g.left, dstH, dstW);
      transform = makeTransform(g.newW / width, g.newH / height, -g.left, -g.top);
    } else if (resize === 'stretch') {
      x = resizeTo(dstH, dstW);
      transform = makeTransform(dstW / width, dstH / height, 0, 0);
    } else {
      throw new Error(`unknown resize method ${resize}`);
    }
    const scale = spec.scale ?? 1;
    if (scale !== 1) x = x.mul(scale);
    const mean = spec.mean || [0, 0, 0];
    const std = spec.std || [1, 1, 1];
    if (mean.some((v) => v !== 0)) x = x.sub(tf.tensor1d(mean));
    if (std.some((v) => v !== 1)) x = x.div(tf.tensor1d(std));
    return x.expandDims(0);
  });
  return {input, transform, width, height};
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
