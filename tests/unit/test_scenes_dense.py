"""converters/scenes, the dense tasks: the depth scene's map is metric and consistent with what
was drawn, and the semantic and depth datasets are written the way Ultralytics' SemanticDataset
(polygon labels, no masks) and DepthDataset (16-bit PNGs beside the images) read them."""
from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from PIL import Image

from converters.scenes import dataset, draw, train

SIZE = train.SCENE_SIZE["depth"]


def inside(box, x: int, y: int) -> bool:
    x1, y1, x2, y2 = box
    return x1 <= x < x2 and y1 <= y < y2


@pytest.mark.parametrize("seed", range(10))
def test_the_depth_map_is_metric(seed):
    image, truth = dataset.scene("depth", seed, SIZE)
    depth = truth["depth"]
    assert depth.shape == image.shape[:2] == (SIZE, SIZE) and depth.dtype == np.float32
    assert np.isfinite(depth).all() and depth.min() > 1.0 and depth.max() <= 12.0
    assert 1 <= len(truth["objects"]) <= 4 and {o["kind"] for o in truth["objects"]} <= set(draw.DEPTH_KINDS)


@pytest.mark.parametrize("seed", range(20))
def test_objects_are_nearer_than_the_floor_behind_them(seed):
    """An object's centre is at its distance (a ball's bulges nearer), and the floor or wall just
    above its top is farther, unless a nearer object covers either spot."""
    _, truth = dataset.scene("depth", seed, SIZE)
    depth, objects = truth["depth"], truth["objects"]
    for obj in objects:
        x1, y1, x2, y2 = obj["box"]
        cx, cy, above = int((x1 + x2) / 2), int((y1 + y2) / 2), int(y1) - 2
        nearer = [o["box"] for o in objects if o["distance"] < obj["distance"]]
        if not any(inside(box, cx, cy) for box in nearer):
            if obj["kind"] == "box":
                assert depth[cy, cx] == pytest.approx(obj["distance"], rel=1e-4)
            else:
                assert obj["distance"] - 0.61 < depth[cy, cx] < obj["distance"]
        if above >= 0 and not any(inside(box, cx, above) for box in [o["box"] for o in objects if o is not obj]):
            assert depth[above, cx] > obj["distance"]


def test_floor_and_ceiling_recede_to_the_wall():
    """In a column no object crosses, depth grows up the floor to one band of wall and shrinks
    again up the ceiling: the room the scene's docstring draws."""
    for seed in range(10):
        _, truth = dataset.scene("depth", seed, SIZE)
        depth = truth["depth"]
        free = [x for x in range(SIZE) if not any(o["box"][0] - 1 <= x <= o["box"][2] + 1 for o in truth["objects"])]
        assert free
        for x in free:
            column = depth[:, x]
            wall = np.flatnonzero(column == column.max())
            top, bottom = wall[0], wall[-1]
            assert list(wall) == list(range(top, bottom + 1)) and 0 < top < bottom < SIZE - 1
            assert (np.diff(column[:top + 1]) >= 0).all() and (np.diff(column[bottom:]) <= 0).all()
            # the band is as high as the room at the wall's distance
            assert bottom - top + 1 == pytest.approx(draw.FOCAL * SIZE * (draw.CAMERA_HEIGHT + draw.CEILING)
                                                     / column.max(), abs=2)


def test_the_semantic_dataset_is_polygons_without_masks(tmp_path):
    """Ultralytics picks its polygon semantic dataset (and appends "background") when the YAML
    names no masks_dir and no masks/ folder is beside the images."""
    data = dataset.write("semantic", tmp_path / "sem", train=3, val=2, size=96)
    spec = json.loads(data.read_text())
    assert spec["names"] == {"0": "circle", "1": "square", "2": "triangle"} and "masks_dir" not in spec
    assert not (tmp_path / "sem" / "masks").exists()
    for label in (tmp_path / "sem/labels/train").glob("*.txt"):
        for line in label.read_text().splitlines():
            values = [float(v) for v in line.split()]
            assert int(values[0]) in (0, 1, 2) and len(values) % 2 == 1 and len(values) >= 7


def test_the_depth_dataset_is_16_bit_pngs_beside_the_images(tmp_path):
    data = dataset.write("depth", tmp_path / "depth", train=3, val=2, size=96)
    spec = json.loads(data.read_text())
    assert spec["depth_scale"] == dataset.DEPTH_SCALE and spec["max_depth"] > 12 and spec["names"] == {"0": "depth"}
    assert not (tmp_path / "depth/labels").exists()
    for split, count, offset in (("train", 3, 0), ("val", 2, 500_000)):
        images = sorted((tmp_path / "depth/images" / split).glob("*.png"))
        maps = sorted((tmp_path / "depth/depth" / split).glob("*.png"))
        assert [p.name for p in images] == [p.name for p in maps] and len(maps) == count
        for i, path in enumerate(maps):
            with Image.open(path) as png:  # what Ultralytics' verify_image_depth asks of a PNG
                assert png.format == "PNG" and png.mode in {"I", "I;16"} and png.size == (96, 96)
            raw = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
            assert raw.dtype == np.uint16 and raw.min() > 0  # 0 would be "no depth"
            _, truth = dataset.scene("depth", offset + i, 96)
            assert np.abs(dataset.read_depth(path) - truth["depth"]).max() <= 0.5 / dataset.DEPTH_SCALE + 1e-6
