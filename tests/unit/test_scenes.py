"""converters/scenes: synthetic scenes whose ground truth is what was drawn, written in the
label format Ultralytics' trainer reads. Training itself is tests/convert/test_yolo_tasks.py's."""
from __future__ import annotations

import json

import numpy as np
import pytest

from converters.errors import ConverterError
from converters.scenes import dataset, draw, train


def same_truth(a, b) -> bool:
    if isinstance(a, dict) and "depth" in a:  # an array compares pixel by pixel
        return np.array_equal(a["depth"], b["depth"]) and a["objects"] == b["objects"]
    return a == b


@pytest.mark.parametrize("task", train.TASKS)
def test_a_seed_gives_one_scene(task):
    a, truth_a = dataset.scene(task, 7, 128)
    b, truth_b = dataset.scene(task, 7, 128)
    c, _ = dataset.scene(task, 8, 128)
    assert a.shape == (128, 128, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b) and same_truth(truth_a, truth_b) and not np.array_equal(a, c)


def test_the_truth_is_where_the_pixels_changed():
    """Each segment polygon covers pixels that differ from the background drawn under it."""
    rng_seed = 3
    image, truth = dataset.scene("segment", rng_seed, 256)
    plain = draw.background(np.random.default_rng(rng_seed), 256)
    assert truth
    import cv2

    for obj in truth:
        inside = np.zeros((256, 256), np.uint8)
        cv2.fillPoly(inside, [np.round(np.asarray(obj["polygon"])).astype(np.int32)], 1)
        eroded = cv2.erode(inside, np.ones((5, 5), np.uint8)).astype(bool)
        changed = np.abs(image.astype(int) - plain.astype(int)).sum(-1) > 30
        assert changed[eroded].mean() > 0.95


def test_label_lines_are_normalised_and_shaped_per_task():
    for task, width in (("segment", None), ("semantic", None), ("pose", 5 + 3 * len(draw.KEYPOINT_NAMES)),
                        ("obb", 9)):
        for seed in range(20):
            _, truth = dataset.scene(task, seed, 256)
            for line in dataset.label_lines(task, truth, 256):
                values = [float(v) for v in line.split()]
                assert values[0] == int(values[0]) and 0 <= values[0] < len(draw.NAMES[task])
                coords = values[1:5] + [v for i, v in enumerate(values[5:]) if i % 3 != 2] if task == "pose" \
                    else values[1:]
                assert all(0 <= v <= 1 for v in coords)
                if task == "pose":
                    assert all(v == 2 for v in values[7::3])  # every keypoint drawn is visible
                if width:
                    assert len(values) == width
                else:
                    assert len(values) % 2 == 1 and len(values) >= 7


def test_pose_keypoints_mirror_with_flip_idx():
    """A figure's left hand is left of its right hand (upright, leaning at most 0.3 rad), as
    flip_idx assumes."""
    for seed in range(30):
        _, truth = dataset.scene("pose", seed, 256)
        for obj in truth:
            kp = np.asarray(obj["keypoints"])
            assert kp[1, 0] < kp[2, 0] and kp[3, 0] < kp[4, 0] and kp[0, 1] < kp[3, 1]
    assert sorted(draw.FLIP_IDX) == list(range(len(draw.KEYPOINT_NAMES)))


def test_dataset_folders_and_yaml(tmp_path):
    data = dataset.write("pose", tmp_path / "pose", train=3, val=2, size=96)
    spec = json.loads(data.read_text())
    assert spec["kpt_shape"] == draw.KPT_SHAPE and spec["flip_idx"] == draw.FLIP_IDX
    assert len(list((tmp_path / "pose/images/train").glob("*.png"))) == 3
    assert len(list((tmp_path / "pose/labels/val").glob("*.txt"))) == 2
    folder = dataset.write("classify", tmp_path / "cls", train=4, val=2, size=64)
    assert sorted(p.name for p in (folder / "train").iterdir()) == sorted(draw.CLASSIFY_NAMES)
    assert sum(1 for _ in (folder / "val").rglob("*.png")) == 2


def test_training_settings_and_cache_key():
    assert train.settings("obb")["model"] == "yolov8n-obb.yaml"
    assert train.settings("segment", epochs=2)["epochs"] == 2
    assert train.settings("semantic")["model"] == "yolo26n-sem.yaml"
    assert train.settings("depth", imgsz=96)["model"] == "yolo26n-depth.yaml"
    assert train.settings("depth", imgsz=96)["imgsz"] == 96
    assert train.key(train.settings("pose")) != train.key(train.settings("pose", epochs=1))
    assert train.key(train.settings("semantic")) != train.key(train.settings("segment"))
    for task in train.TASKS:  # every task has its architecture, defaults and scene size
        assert {"imgsz", "train", "val", "epochs"} <= set(train.settings(task)) and task in train.SCENE_SIZE
    with pytest.raises(ConverterError, match="no synthetic scenes"):
        train.settings("detect")
