// The manifest's input contract in TF.js — the same arithmetic as server/preprocess.py
// (bilinear with half-pixel centres, no antialiasing; Math.round; integer offsets).
const tf = globalThis.tf;

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

// source (video, image, canvas, ImageBitmap or an int32/float [h,w,3] tensor) ->
// {input: [1,H,W,3] float32 tensor, transform, width, height}. The caller disposes input.
export function prepareInput(source, spec) {
  const [, dstH, dstW] = spec.shape;
  const isTensor = source instanceof tf.Tensor;
  const {width, height} = isTensor ? {width: source.shape[1], height: source.shape[0]} : sourceSize(source);
  const resize = spec.resize || 'stretch';
  let transform;
  const input = tf.tidy(() => {
    const pixels = (isTensor ? source : tf.browser.fromPixels(source)).toFloat();
    let x;
    // Same-size resizes and identity normalisation are skipped: each op is a full pass.
    const resizeTo = (h, w) => (h === height && w === width ? pixels
                                : tf.image.resizeBilinear(pixels, [h, w], false, true));
    if (resize === 'letterbox') {
      const g = letterboxGeometry(width, height, dstW, dstH);
      x = tf.pad(resizeTo(g.newH, g.newW), [[g.top, dstH - g.newH - g.top], [g.left, dstW - g.newW - g.left], [0, 0]],
                 spec.pad_value || 0);
      transform = makeTransform(g.newW / width, g.newH / height, g.left, g.top);
    } else if (resize === 'center-crop') {
      const g = centerCropGeometry(width, height, dstW, dstH, spec.crop_fraction || 1);
      x = tf.slice(resizeTo(g.newH, g.newW), [g.top, g.left, 0], [dstH, dstW, 3]);
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
