// MediaPipe's SSD anchors for the palm detector (create_ssd_anchors.js of
// @tensorflow-models/hand-pose-detection 2.0.1) from a manifest's `anchors` config. Pure
// arithmetic, no TF.js; modelcontract/anchors.py is the Python twin.

// create_ssd_anchors.js -> [{x, y, w, h}] (normalised centres and sizes).
export function ssdAnchors(config) {
  const strides = config.strides;
  const scaleOf = (i, n) => (n > 1 ? config.minScale + (config.maxScale - config.minScale) * i / (n - 1)
    : (config.minScale + config.maxScale) * 0.5);
  const anchors = [];
  let layer = 0;
  while (layer < config.numLayers) {
    const ratios = [];
    const scales = [];
    let last = layer;
    while (last < strides.length && strides[last] === strides[layer]) {
      const scale = scaleOf(last, strides.length);
      if (last === 0 && config.reduceBoxesInLowestLayer) {
        ratios.push(1.0, 2.0, 0.5);
        scales.push(0.1, scale, scale);
      } else {
        for (const ratio of config.aspectRatios) {
          ratios.push(ratio);
          scales.push(scale);
        }
        if (config.interpolatedScaleAspectRatio > 0) {
          const next = last === strides.length - 1 ? 1.0 : scaleOf(last + 1, strides.length);
          scales.push(Math.sqrt(scale * next));
          ratios.push(config.interpolatedScaleAspectRatio);
        }
      }
      last += 1;
    }
    const sizes = ratios.map((r, i) => ({w: scales[i] * Math.sqrt(r), h: scales[i] / Math.sqrt(r)}));
    const fh = config.featureMapHeight.length ? config.featureMapHeight[layer] : Math.ceil(config.inputSizeHeight / strides[layer]);
    const fw = config.featureMapWidth.length ? config.featureMapWidth[layer] : Math.ceil(config.inputSizeWidth / strides[layer]);
    for (let y = 0; y < fh; y++) {
      for (let x = 0; x < fw; x++) {
        for (const size of sizes) {
          anchors.push({x: (x + config.anchorOffsetX) / fw, y: (y + config.anchorOffsetY) / fh,
                        w: config.fixedAnchorSize ? 1 : size.w, h: config.fixedAnchorSize ? 1 : size.h});
        }
      }
    }
    layer = last;
  }
  return anchors;
}
