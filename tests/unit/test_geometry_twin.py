"""static/js/tensor/geometry.js prepareInput (TF.js, Node, CPU backend) against modelcontract/geometry.py
prepare on the same pixels: the same model input and the same transform, for each resize
mode, normal photos and the degenerate strips (600x1, 1x600) whose centre crop used to be
resized at full scale first."""
from __future__ import annotations

import numpy as np

from modelcontract.geometry import prepare
from harness.node import TFJS_PRELUDE, js_url, run_node
from harness.paths import JS

RUNNER = TFJS_PRELUDE + """
const {prepareInput} = await import(%s);
const out = [];
for (const c of req) {
  const pixels = tf.tensor3d(c.pixels, c.shape, 'int32');
  const before = tf.memory().numTensors;
  const {input, transform} = prepareInput(pixels, c.spec);
  out.push({shape: input.shape, values: Array.from(input.dataSync()),
            transform: [transform.scaleX, transform.scaleY, transform.offsetX, transform.offsetY],
            leaked: tf.memory().numTensors - before - 1});
  input.dispose();
  pixels.dispose();
}
process.stdout.write(JSON.stringify(out));
"""

SPECS = [
    {"shape": [1, 224, 224, 3], "resize": "center-crop", "crop_fraction": 0.875,
     "mean": [127.0, 127.0, 127.0], "std": [128.0, 128.0, 128.0]},
    {"shape": [1, 32, 24, 3], "resize": "center-crop", "crop_fraction": 1.0, "scale": 1 / 255},
    {"shape": [1, 64, 64, 3], "resize": "letterbox", "pad_value": 114, "scale": 1 / 255},
    {"shape": [1, 48, 40, 3], "resize": "stretch", "scale": 1 / 255, "mean": [0.0, 0.5, 0.0],
     "std": [1.0, 1.0, 0.25]},
]
SHAPES = [(37, 53), (120, 90), (1, 600), (600, 1), (3, 2), (24, 32)]


def test_prepare_input_is_prepare():
    rng = np.random.default_rng(11)
    images = [rng.integers(0, 256, (*shape, 3), dtype=np.uint8) for shape in SHAPES]
    cases = [{"pixels": img.ravel().tolist(), "shape": list(img.shape), "spec": spec}
             for img in images for spec in SPECS]
    results = iter(run_node(RUNNER % js_url(JS / "tensor/geometry.js"), cases))
    for img in images:
        for spec in SPECS:
            got = next(results)
            want, transform = prepare(img, spec)
            assert got["shape"] == list(want.shape)
            values = np.asarray(got["values"], np.float32).reshape(want.shape)
            # Centre crop of a strip (past FULL_RESIZE_LIMIT): the crop window alone, the same
            # float32 operations in the same order (bit for bit on TF.js's CPU backend). Else
            # tf.image.resizeBilinear (+ slice) vs the window / OpenCV, both float32.
            strip = min(img.shape[:2]) == 1
            tolerance = 0 if spec["resize"] == "center-crop" and strip else 1e-5
            assert np.abs(values - want).max() <= tolerance, (img.shape, spec["resize"])
            assert np.allclose(got["transform"], [transform.scale_x, transform.scale_y,
                                                  transform.offset_x, transform.offset_y], rtol=1e-12, atol=0)
            assert got["leaked"] == 0


UNRESIZED_RUNNER = TFJS_PRELUDE + """
const {prepareInput, unresizedInput} = await import(%s);
const {unresizedGeometry} = await import(%s);
const out = [];
for (const c of req) {
  const [h, w] = c.shape;
  const g = unresizedGeometry(w, h, c.spec);
  if (!g) { out.push(null); continue; }
  const rgba = new Uint8ClampedArray(h * w * 4);
  c.pixels.forEach((v, i) => { rgba[Math.floor(i / 3) * 4 + (i %% 3)] = v; });
  const fast = unresizedInput(rgba, w, h, g, c.spec);
  const pixels = tf.tensor3d(c.pixels, c.shape, 'int32');
  const tensorPath = prepareInput(pixels, c.spec).input;
  out.push({fast: Array.from(fast.dataSync()), tensorPath: Array.from(tensorPath.dataSync()), shape: fast.shape});
  tf.dispose([fast, pixels, tensorPath]);
}
process.stdout.write(JSON.stringify(out));
"""


def test_unresized_input_is_the_tensor_path_and_prepare_bit_for_bit():
    """The one-pass input of a canvas that needs no resize (a 640x480 frame into a 640x640
    letterbox) is the tensor path's and Python's, to the bit; it declines other cases."""
    rng = np.random.default_rng(12)
    letterbox = {"shape": [1, 64, 64, 3], "resize": "letterbox", "pad_value": 114, "scale": 1 / 255}
    stretch = {"shape": [1, 48, 40, 3], "resize": "stretch", "scale": 1 / 255}
    cases = [((48, 64), letterbox, True), ((64, 40), letterbox, True), ((64, 64), letterbox, True),
             ((48, 40), stretch, True), ((47, 70), letterbox, False), ((48, 64), stretch, False),
             ((48, 40), SPECS[3], False), ((64, 64), SPECS[0], False)]
    images = [rng.integers(0, 256, (*shape, 3), dtype=np.uint8) for shape, _, _ in cases]
    results = run_node(UNRESIZED_RUNNER % (js_url(JS / "tensor/geometry.js"), js_url(JS / "contract/geometry.js")),
                       [{"pixels": img.ravel().tolist(), "shape": list(img.shape), "spec": spec}
                        for img, (_, spec, _) in zip(images, cases)])
    for img, (shape, spec, applies), got in zip(images, cases, results):
        assert (got is not None) == applies, (shape, spec)
        if not applies:
            continue
        want, _ = prepare(img, spec)
        fast = np.asarray(got["fast"], np.float32).reshape(want.shape)
        assert np.array_equal(fast, np.asarray(got["tensorPath"], np.float32).reshape(want.shape)), shape
        assert np.array_equal(fast, want), shape
