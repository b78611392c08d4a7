"""modelcontract/ultralytics_litert.py, the server's reading of Ultralytics' own LiteRT file,
against its page twin (static/js/contract/ultralytics_litert.js, which
static/js/tensor/ultralytics-graph.js applies) and on a stand-in model."""
from __future__ import annotations

import numpy as np
import pytest

from harness.node import JS, js_url, run_node
from modelcontract import ultralytics_litert

CASES = [
    (4 + 3, (160, 160), 3, None),                  # detect
    (4 + 2 + 1, (320, 192), 2, None),              # obb: the angle row keeps 1
    (4 + 1 + 17 * 3, (640, 480), 1, [17, 3]),      # COCO pose, visibility rows keep 1
    (4 + 2 + 5 * 2, (96, 128), 2, [5, 2]),         # x, y only
]


def test_head_scale_is_the_pages():
    script = f"""
    const {{headScale}} = await import({js_url(JS / 'contract' / 'ultralytics_litert.js')});
    console.log(JSON.stringify(req.map(([rows, size, nc, kpt]) => Array.from(headScale(rows, size, nc, kpt)))));
    """
    js = run_node(script, [list(c) for c in CASES])
    for case, got in zip(CASES, js):
        assert ultralytics_litert.head_scale(*case).tolist() == got, case


@pytest.mark.parametrize("case", CASES)
def test_head_scale_scales_only_x_and_y(case):
    rows, (height, width), nc, kpt = case
    scale = ultralytics_litert.head_scale(*case)
    assert scale[:4].tolist() == [width, height, width, height]
    assert (scale[4:4 + nc] == 1).all()
    if kpt:
        k, d = kpt
        points = scale[4 + nc:].reshape(k, d)
        assert (points[:, 0] == width).all() and (points[:, 1] == height).all()
        assert (points[:, 2:] == 1).all()
    else:
        assert (scale[4 + nc:] == 1).all()


class StandIn:
    """Records what it was fed; answers a segmentation file's two outputs."""

    output_keys = ["output_0", "output_1"]

    def __init__(self, head, prototypes):
        self.fed, self.head, self.prototypes = None, head, prototypes

    def run1(self, x):
        self.fed = x
        return {"output_0": self.head, "output_1": self.prototypes}


def test_a_segmentation_file_reads_as_the_converters_layout():
    rng = np.random.default_rng(0)
    nc, anchors = 2, 21
    head = rng.random((1, 4 + nc + 32, anchors), dtype=np.float32)
    prototypes = rng.random((1, 32, 8, 12), dtype=np.float32)
    model = StandIn(head, prototypes)
    manifest = {"graph": "ultralytics-litert", "task": "detect", "labels": ["a", "b"],
                "input": {"shape": [1, 32, 48, 3]}}
    layout = ultralytics_litert.wrap(model, manifest)
    x = rng.random((1, 32, 48, 3), dtype=np.float32)
    out = layout.run1(x)
    assert model.fed.shape == (1, 3, 32, 48) and np.array_equal(model.fed, x.transpose(0, 3, 1, 2))
    assert np.allclose(out["output_0"][:, :4], head[:, :4] * np.array([48, 32, 48, 32])[None, :, None])
    assert np.array_equal(out["output_0"][:, 4:], head[:, 4:])
    assert np.array_equal(out["output_1"], prototypes.transpose(0, 2, 3, 1))
    assert layout.output_keys == model.output_keys


def test_other_manifests_keep_the_model_as_it_is():
    model = StandIn(None, None)
    assert ultralytics_litert.wrap(model, {"input": {"shape": [1, 8, 8, 3]}}) is model


def test_a_classifiers_outputs_pass_as_they_are():
    probabilities, features = np.full((1, 3), 0.5, np.float32), np.arange(8, dtype=np.float32)[None]
    out = ultralytics_litert.converter_outputs({"output_0": probabilities, "output_1": features}, (64, 64), 3)
    assert np.array_equal(out["output_0"], probabilities) and np.array_equal(out["output_1"], features)
