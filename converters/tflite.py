"""The server artifact: a LiteRT (.tflite) flatbuffer of the same SavedModel.

The server runs it with LiteRT (ai-edge-litert) and the pages can run the very same file
with LiteRT.js (README, "LiteRT.js backends"). Same weights as the TF.js files.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def saved_model_to_tflite(saved_model_dir: Path, out_path: Path, allow_select_tf_ops: bool = False) -> Path:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir))
    ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if allow_select_tf_ops:
        ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    converter.target_spec.supported_ops = ops
    out_path.write_bytes(converter.convert())
    return out_path


def interpreter(model_path: Path, threads: int | None = None):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(model_path), num_threads=threads)
    interp.allocate_tensors()
    return interp


def _caller(interp, inputs: dict[str, np.ndarray] | list[np.ndarray]):
    """A no-argument call running ``interp`` once on ``inputs``; returns {output key: array}.
    Through the serving_default signature; a flatbuffer without signatures (ultralytics'
    export and MediaPipe write those) runs through its input/output tensors, keyed by name."""
    if not interp.get_signature_list():
        details = interp.get_input_details()
        arrays = inputs if isinstance(inputs, list) else [inputs[d["name"]] for d in details]
        arrays = [np.asarray(a, dtype=d["dtype"]) for d, a in zip(details, arrays)]

        def call():
            for detail, array in zip(details, arrays):
                interp.set_tensor(detail["index"], array)
            interp.invoke()
            return {d["name"]: np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()}
        return call
    runner = interp.get_signature_runner()
    if isinstance(inputs, list):
        inputs = dict(zip(list(runner.get_input_details()), inputs))
    return lambda: {k: np.asarray(v) for k, v in runner(**inputs).items()}


def run_tflite(model_path: Path, inputs: dict[str, np.ndarray] | list[np.ndarray]) -> dict[str, np.ndarray]:
    """One call of the model on ``inputs``; returns {output key: array}."""
    return _caller(interpreter(model_path), inputs)()


def call_ms(model_path: Path, inputs: dict[str, np.ndarray] | list[np.ndarray], threads: int,
            runs: int, warmup: int = 2) -> list[float]:
    """Wall time of each of ``runs`` calls (inputs in, outputs out), after ``warmup`` calls."""
    call = _caller(interpreter(model_path, threads), inputs)
    for _ in range(warmup):
        call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times
