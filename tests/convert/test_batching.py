"""server/inference/litert.py dynamic batching (LiteRTModel.batch): concurrent runs of a
model stacked into one invoke give every caller its own answer, the same as run alone; a
graph with a fixed batch of 1 (yolov5n) runs them one by one."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest


@pytest.mark.parametrize("model_id", ["efficientnet-lite0", "yolov5n"])
def test_batched_runs_answer_each_caller(api_models, model_id):
    from server.inference.litert import LiteRTModel

    if model_id not in api_models:
        pytest.skip(f"{model_id} is not built here")
    path = api_models[model_id] / "model.tflite"
    alone = LiteRTModel(path, threads=1)
    batched = LiteRTModel(path, threads=1)
    batched.batch(4, 0.02)
    shape = json.loads((api_models[model_id] / "manifest.json").read_text())["input"]["shape"]
    rng = np.random.default_rng(0)
    inputs = [rng.random(shape, dtype=np.float32) for _ in range(6)]
    results: list = [None] * len(inputs)
    barrier = threading.Barrier(len(inputs))

    def call(i):
        barrier.wait()
        results[i] = batched.run1(inputs[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    sizes = {n for n, inst in batched._batcher._instances.items() if inst is not None}
    if model_id == "yolov5n":
        assert not sizes  # fixed batch of 1: one by one
    else:
        assert sizes and max(sizes) > 1  # some runs did share an invoke
    for x, got in zip(inputs, results):
        want = alone.run1(x)
        assert set(got) == set(want)
        for key in want:
            assert got[key].shape == want[key].shape
            assert np.allclose(got[key], want[key], rtol=1e-4, atol=1e-5), key
