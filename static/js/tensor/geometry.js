// The manifest's input contract in TF.js: a frame (video, image, canvas, ImageBitmap or a
// tensor) -> the model input tensor and the transform back to source pixels. The geometry
// and arithmetic are contract/geometry.js's (= modelcontract/geometry.py: bilinear with
// half-pixel centres, no antialiasing; Math.round; integer offsets). Work follows the model
// input, not the resized image: the centre crop computes only the pixels inside the crop (a
// 600x1 image would otherwise be resized to 134400x224 first).
import {FULL_RESIZE_LIMIT, bilinearAxis, centerCropGeometry, letterboxGeometry, makeTransform, sourceSize,
        unresizedGeometry, unresizedValues} from '../contract/geometry.js';

const tf = globalThis.tf;

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

// RGBA bytes of an image that needs no resize (contract/geometry.js unresizedGeometry's g) ->
// the model input [1,H,W,3]: unresizedValues, in one tensor.
export function unresizedInput(rgba, width, height, g, spec) {
  const [, dstH, dstW] = spec.shape;
  return tf.tensor4d(unresizedValues(rgba, width, height, g, spec), [1, dstH, dstW, 3]);
}

// source (video, image, canvas, ImageBitmap or an int32/float [h,w,3] tensor) ->
// {input: [1,H,W,3] float32 tensor, transform, width, height}. The caller disposes input.
export function prepareInput(source, spec) {
  // A canvas that needs no resize, where TF.js computes on the CPU anyway (WASM, CPU; the
  // helper of LiteRT): one pass (a GPU backend does the tensor path on the GPU instead).
  // A canvas is what has a 2D context to read (a tensor, video, image or bitmap has none).
  const canvas = typeof source.getContext === 'function';
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
