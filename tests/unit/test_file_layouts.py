"""static/js/tensor/ultralytics-graph.js on every layout an Ultralytics .tflite comes in (and the
half floats of a float16 .onnx), with a
stand-in for LiteRT.js that records what it was fed and answers given arrays: NCHW (the LiteRT
export) or NHWC (the TensorFlow export) input; the head as rows x anchors or transposed; NMS
inside ([1, N, 6 + extras], as fractions of the input or in pixels); prototypes NHWC or NCHW;
uint8 input and outputs with their scale and zero point. Each is held to what Ultralytics' own
LiteRT backend makes of it (ultralytics/nn/backends/litert.py), written out here in numpy."""
from __future__ import annotations

import numpy as np
import pytest

from harness.node import JS, TFJS_PRELUDE, js_url, run_node

RUN = TFJS_PRELUDE + """
const {UltralyticsGraph} = await import(%s);
const out = [];
for (const c of req.cases) {
  let fed = null;
  const standIn = {
    runtime: 'litert', accelerator: 'wasm', inputs: [{name: 'x', shape: c.graphInput, dtype: c.inputDtype}],
    async predict(x) {
      fed = {shape: x.shape, dtype: x.dtype, data: Array.from(await x.data())};
      return c.outputs.map((o) => tf.tensor(o.data, o.shape, o.dtype));
    },
    dispose() {},
  };
  try {
    const graph = new UltralyticsGraph(standIn, c.manifest);
    const x = tf.tensor(c.x.data, c.x.shape);
    const got = await graph.predict(x);
    out.push({fed, outputs: await Promise.all(got.map(async (t) => ({shape: t.shape, data: Array.from(await t.data())})))});
    tf.dispose([x, ...got]);
  } catch (e) {
    out.push({error: e.message});
  }
}
process.stdout.write(JSON.stringify(out));
""" % js_url(JS / "tensor/ultralytics-graph.js")

H, W, NC = 8, 12, 3
RNG = np.random.default_rng(0)
X = RNG.random((1, H, W, 3), dtype=np.float32)


def tensor(a, dtype="float32"):
    a = np.asarray(a)
    return {"data": a.ravel().tolist(), "shape": list(a.shape), "dtype": dtype}


def manifest(task="detect", layout="NHWC", end2end=False, kpt=None, io=None):
    return {"ultralytics_task": task, "input": {"shape": [1, H, W, 3]}, "labels": [f"c{i}" for i in range(NC)],
            **({"kpt_shape": kpt} if kpt else {}),
            "file_io": {"layout": layout, "end2end": end2end, **(io or {})}}


def run(cases):
    payload = [{"manifest": c["manifest"], "graphInput": c.get("graph_input", [1, H, W, 3]),
                "inputDtype": c.get("input_dtype", "float32"), "x": tensor(X),
                "outputs": [tensor(*o) if isinstance(o, tuple) else tensor(o) for o in c["outputs"]]} for c in cases]
    return run_node(RUN, {"cases": payload})


def array(out):
    return np.asarray(out["data"], np.float32).reshape(out["shape"])


def test_nhwc_input_is_fed_as_it_is_and_nchw_transposed():
    head = RNG.random((1, 4 + NC, 20), dtype=np.float32)
    nhwc, nchw = run([{"manifest": manifest(layout="NHWC"), "outputs": [head]},
                      {"manifest": manifest(layout="NCHW"), "graph_input": [1, 3, H, W], "outputs": [head]}])
    assert np.allclose(array(nhwc["fed"]), X) and np.allclose(array(nchw["fed"]), X.transpose(0, 3, 1, 2))


def test_a_head_as_fractions_reads_in_pixels_whichever_way_it_is_laid():
    head = RNG.random((1, 4 + NC + 17 * 3, 20), dtype=np.float32)
    want = head.copy()
    want[:, [0, 2]] *= W
    want[:, [1, 3]] *= H
    want[:, 4 + NC::3] *= W
    want[:, 5 + NC::3] *= H
    pose = manifest("pose", kpt=[17, 3])
    rows, transposed = run([{"manifest": pose, "outputs": [head]},
                            {"manifest": pose, "outputs": [head.transpose(0, 2, 1)]}])
    assert np.allclose(array(rows["outputs"][0]), want, atol=1e-5)
    assert np.allclose(array(transposed["outputs"][0]), want, atol=1e-5)


def detections_as_head(dets: np.ndarray, nc: int, obb: bool = False) -> np.ndarray:
    """[1, N, 6 + extras] after NMS -> [1, 4 + nc + extras, N]: cx, cy, w, h, the score at its class."""
    d = dets[0]
    if obb:
        xywh = d[:, :4]
    else:
        x1, y1, x2, y2 = d[:, 0], d[:, 1], d[:, 2], d[:, 3]
        xywh = np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], 1)
    scores = (np.round(d[:, 5])[:, None] == np.arange(nc)[None]) * d[:, 4:5]
    return np.concatenate([xywh, scores, d[:, 6:]], 1).T[None]


@pytest.mark.parametrize("task, extras, kpt", [("detect", 0, None), ("pose", 5 * 3, [5, 3]), ("obb", 1, None),
                                                ("segment", 4, None)])
def test_detections_after_nms_read_as_a_head_for_the_pages_decode(task, extras, kpt):
    n = 7
    dets = RNG.random((1, n, 6 + extras), dtype=np.float32)
    dets[0, :, 5] = RNG.integers(0, NC, n)
    dets[0, :, 2:4] += dets[0, :, 0:2]   # x2 > x1, y2 > y1
    dets[0, -2:, 4:6] = 0                # padding rows
    prototypes = RNG.random((1, 4, 6, extras or 1), dtype=np.float32)
    outputs = [dets] + ([prototypes] if task == "segment" else [])
    # The TensorFlow export gives fractions of the input; the LiteRT export pixels.
    scaled = dets.copy()
    scaled[..., [0, 2]] *= W
    scaled[..., [1, 3]] *= H
    if kpt:
        scaled[..., 6::3] *= W
        scaled[..., 7::3] *= H
    nchw_outputs = [scaled] + ([prototypes.transpose(0, 3, 1, 2)] if task == "segment" else [])
    tf_export, litert_export = run([
        {"manifest": manifest(task, "NHWC", True, kpt), "outputs": outputs},
        {"manifest": manifest(task, "NCHW", True, kpt), "graph_input": [1, 3, H, W], "outputs": nchw_outputs}])
    want = detections_as_head(scaled, NC, obb=task == "obb")
    for got in (tf_export, litert_export):
        assert "error" not in got, got
        assert np.allclose(array(got["outputs"][0]), want, atol=1e-4)
        if task == "segment":
            assert np.allclose(array(got["outputs"][1]), prototypes)


def test_uint8_input_is_quantized_and_uint8_outputs_dequantized():
    scale_in, zero_in = 1 / 255, 3
    head = RNG.integers(0, 256, (1, 4 + NC, 20)).astype(np.uint8)
    scale_out, zero_out = 0.02, 100
    io = {"input": {"dtype": "uint8", "scale": scale_in, "zeroPoint": zero_in},
          "outputs": [{"shape": list(head.shape), "dtype": "uint8", "scale": scale_out, "zeroPoint": zero_out}]}
    [got] = run([{"manifest": manifest(io=io), "input_dtype": "uint8", "outputs": [(head, "int32")]}])
    assert np.array_equal(array(got["fed"]), np.clip(np.round(X / scale_in + zero_in), 0, 255))
    real = (head.astype(np.float32) - zero_out) * scale_out
    real[:, [0, 2]] *= W
    real[:, [1, 3]] *= H
    assert np.allclose(array(got["outputs"][0]), real, atol=1e-4)


def test_a_head_of_the_wrong_size_and_an_input_of_another_layout_say_why():
    wrong_head, wrong_input = run([
        {"manifest": manifest(), "outputs": [RNG.random((1, 9, 20), dtype=np.float32)]},
        {"manifest": manifest(layout="NHWC"), "graph_input": [1, 3, H, W], "outputs": []}])
    assert "not the 7 rows its metadata's task and classes make" in wrong_head["error"]
    assert f"not the [1,{H},{W},3] its metadata says" in wrong_input["error"]


def test_half_floats_convert_as_numpy_converts_them():
    """A float16 .onnx (export half=True on a GPU) is fed and read through toHalf / fromHalf."""
    values = np.concatenate([np.linspace(-70000, 70000, 501), np.linspace(-1, 1, 999), RNG.random(500) * 1e-5,
                             [0.0, -0.0, 6.1e-5, 5.96e-8, 65504, 65520, np.inf, -np.inf]]).astype(np.float32)
    script = """
    const {toHalf, fromHalf} = await import(%s);
    const halves = req.map(toHalf);
    process.stdout.write(JSON.stringify({halves, back: halves.map(fromHalf).map(String)}));
    """ % js_url(JS / "runtime/onnx.js")
    got = run_node(script, [float(v) if np.isfinite(v) else (1e39 if v > 0 else -1e39) for v in values])
    with np.errstate(over="ignore"):   # 70000 is past float16's largest: infinity, as in JS
        want = values.astype(np.float16)
    assert got["halves"] == want.view(np.uint16).tolist()
    assert np.array_equal(np.array(got["back"], dtype=np.float64).astype(np.float32), want.astype(np.float32))


def test_float16_outputs_read_the_same_decoded_or_as_bits():
    """ONNX Runtime Web gives float16 outputs as a Float16Array where the browser has one
    (decoded already), else as their bits in a Uint16Array: both read as the same floats."""
    values = np.array([412.5, 0.73, -3.25, 0.0], np.float16)
    script = TFJS_PRELUDE + """
    const {OnnxGraph} = await import(%s);
    class Tensor {
      constructor(type, data, dims) { Object.assign(this, {type, data, dims}); }
      dispose() {}
    }
    const out = [];
    for (const decoded of [false, true]) {
      const data = decoded ? Float32Array.from(req.floats) : Uint16Array.from(req.bits);
      let fed = null;
      const session = {outputNames: ['output0'], async run(feeds) { fed = feeds.images; return {output0: new Tensor('float16', data, [1, 4])}; }};
      const graph = new OnnxGraph(session, 'wasm', {name: 'images', shape: [1, 4], dtype: 'float16'}, {Tensor});
      const [y] = await graph.predict(tf.tensor([req.floats]));
      out.push({read: Array.from(await y.data()), fed: Array.from(fed.data), fedType: fed.type});
    }
    process.stdout.write(JSON.stringify(out));
    """ % js_url(JS / "runtime/onnx.js")
    got = run_node(script, {"floats": values.astype(float).tolist(), "bits": values.view(np.uint16).tolist()})
    for case in got:
        assert case["read"] == values.astype(float).tolist()
        assert case["fed"] == values.view(np.uint16).tolist() and case["fedType"] == "float16"
