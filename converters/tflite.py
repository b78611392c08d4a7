"""The server artifact: a LiteRT (.tflite) flatbuffer of the same SavedModel.

LiteRT (ai-edge-litert) was the fastest CPU runtime measured for these models and the
lightest to serve (see README, "Server runtime"). Same weights as the TF.js files.
"""
from __future__ import annotations

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


def run_tflite(model_path: Path, inputs: dict[str, np.ndarray] | list[np.ndarray]) -> dict[str, np.ndarray]:
    """One call through the serving_default signature; returns {output key: array}.
    A flatbuffer without signatures (ultralytics' export writes those) runs through its
    input/output tensors instead, keyed by tensor name."""
    interp = interpreter(model_path)
    if not interp.get_signature_list():
        details = interp.get_input_details()
        arrays = inputs if isinstance(inputs, list) else [inputs[d["name"]] for d in details]
        for detail, array in zip(details, arrays):
            interp.set_tensor(detail["index"], np.asarray(array, dtype=detail["dtype"]))
        interp.invoke()
        return {d["name"]: np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()}
    runner = interp.get_signature_runner()
    if isinstance(inputs, list):
        keys = list(runner.get_input_details())
        inputs = dict(zip(keys, inputs))
    return {k: np.asarray(v) for k, v in runner(**inputs).items()}
