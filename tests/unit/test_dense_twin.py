"""The dense formats ("yolo-semantic", "yolo-depth"): static/js/tensor/dense.js decodeDense (TF.js in
Node) and static/js/contract/dense.js's summaries against modelcontract/dense.py on the same
outputs, the map encoding the API sends, and the class map against Ultralytics' own postprocess
(ops.scale_masks + argmax) on the same logits.
Agreement with predict() on trained weights is tests/convert/test_dense_tasks.py's."""
from __future__ import annotations

import numpy as np
import pytest

from harness.node import JS, TFJS_PRELUDE, js_url, run_node
from modelcontract import dense
from modelcontract.geometry import Transform, letterbox_geometry

SIDE = 160


def smooth(rng, shape, cells=5) -> np.ndarray:
    """Random blobs: a coarse random grid resized up (logits of real-looking regions)."""
    import cv2

    coarse = rng.normal(0, 2, (cells, cells, shape[2])).astype(np.float32)
    return np.stack([cv2.resize(coarse[:, :, k], shape[1::-1], interpolation=cv2.INTER_CUBIC)
                     for k in range(shape[2])], -1)


def letterbox(width: int, height: int) -> Transform:
    new_w, new_h, left, top = letterbox_geometry(width, height, SIDE, SIDE)
    return Transform(new_w / width, new_h / height, left, top)


CASES = [(853, 640, 4), (480, 640, 19), (300, 300, 2)]


def js_maps(cases: list[dict]) -> list[dict]:
    script = TFJS_PRELUDE + f"""
const dense = await import({js_url(JS / 'contract' / 'dense.js')});
const {{decodeDense}} = await import({js_url(JS / 'tensor' / 'dense.js')});
const out = [];
for (const c of req) {{
  const manifest = {{outputs: {{format: c.format}}, labels: c.labels}};
  const tensor = tf.tensor(c.values, c.shape);
  const map = await decodeDense(manifest, [tensor], {{transform: c.transform, width: c.width, height: c.height}});
  tensor.dispose();
  const summary = c.format === 'yolo-semantic' ? dense.semanticSummary(map, c.labels) : dense.depthSummary(map);
  out.push({{values: Array.from(map.values), summary}});
}}
console.log(JSON.stringify(out));
"""
    return run_node(script, cases)


def payload(fmt, value, transform, width, height, labels):
    return {"format": fmt, "values": value.ravel().tolist(), "shape": list(value.shape), "width": width,
            "height": height, "labels": labels,
            "transform": {"scaleX": transform.scale_x, "scaleY": transform.scale_y,
                          "offsetX": transform.offset_x, "offsetY": transform.offset_y}}


def test_class_maps_and_depth_maps_are_the_same_in_both():
    rng = np.random.default_rng(3)
    cases, python = [], []
    for width, height, nc in CASES:
        logits = smooth(rng, (SIDE, SIDE, nc))[None]
        labels = [f"c{i}" for i in range(nc)]
        transform = letterbox(width, height)
        cases.append(payload("yolo-semantic", logits, transform, width, height, labels))
        classes = dense.class_map(logits, transform, width, height)
        python.append((classes, dense.semantic_summary(classes, labels)))
        depth = np.exp(smooth(rng, (SIDE, SIDE, 1)) * 0.3)[None]
        stretch = Transform(SIDE / width, SIDE / height, 0, 0)
        cases.append(payload("yolo-depth", depth, stretch, width, height, ["depth"]))
        values = dense.depth_map(depth, width, height)
        python.append((values, dense.depth_summary(values)))
    for (values, summary), js in zip(python, js_maps(cases)):
        got = np.asarray(js["values"]).reshape(values.shape)
        if values.dtype == np.uint8:
            # a pixel whose two best logits tie to within float rounding may go either way
            assert (got == values).mean() >= 0.9999
            assert len(np.unique(values)) > 1, "a map of one class tests nothing"
            assert [c["class_id"] for c in js["summary"]["classes"]] == [c["class_id"] for c in summary["classes"]]
            for a, b in zip(js["summary"]["classes"], summary["classes"]):
                assert abs(a["share"] - b["share"]) <= 1e-4
        else:
            np.testing.assert_allclose(got, values, rtol=1e-5, atol=1e-6)
            for key in ("min", "max", "mean"):
                assert js["summary"][key] == pytest.approx(summary[key], rel=1e-5)


def test_class_map_is_ultralytics_postprocess():
    """Ultralytics' SemanticSegmentationPredictor on logits at the input size: scale_masks
    (crop the letterbox's padding, bilinear to the photo) then argmax."""
    torch = pytest.importorskip("torch")
    from ultralytics.utils import ops

    rng = np.random.default_rng(5)
    for width, height, nc in CASES:
        logits = smooth(rng, (SIDE, SIDE, nc))[None]
        theirs = ops.scale_masks(torch.from_numpy(logits).permute(0, 3, 1, 2), (height, width))[0].argmax(0).numpy()
        ours = dense.class_map(logits, letterbox(width, height), width, height)
        assert (ours == theirs).mean() >= 0.9995


def test_depth_map_is_ultralytics_resize():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    depth = np.exp(smooth(np.random.default_rng(7), (SIDE, SIDE, 1)) * 0.3)[None]
    for width, height, _ in CASES:
        theirs = F.interpolate(torch.from_numpy(depth).permute(0, 3, 1, 2), (height, width), mode="bilinear",
                               align_corners=True)[0, 0].numpy()
        np.testing.assert_allclose(dense.depth_map(depth, width, height), theirs, rtol=1e-5)


def test_maps_survive_their_encoding():
    rng = np.random.default_rng(9)
    classes = rng.integers(0, 19, (37, 53)).astype(np.uint8)
    entry = dense.result("yolo-semantic", classes, [str(i) for i in range(19)])["semantic"]
    assert entry["map"]["encoding"] == "png"
    assert (dense.decode_map(entry) == classes).all()
    assert sum(c["pixels"] for c in entry["classes"]) == classes.size
    depth = rng.uniform(0.5, 9.5, (37, 53)).astype(np.float32)
    entry = dense.result("yolo-depth", depth, ["depth"])["depth"]
    assert entry["map"]["encoding"] == "png16"
    step = (entry["max"] - entry["min"]) / dense.DEPTH_LEVELS
    assert np.abs(dense.decode_map(entry) - depth).max() <= step / 2 + 1e-6
