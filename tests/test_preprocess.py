"""server/preprocess.py is the manifest's input contract; check it against TF's own resize
and check the geometry round-trips."""
from __future__ import annotations

import numpy as np
import pytest

from server.preprocess import Transform, letterbox_geometry, prepare, resize_bilinear


@pytest.mark.parametrize("src,dst", [((37, 53), (64, 64)), ((480, 640), (213, 160)), ((10, 10), (10, 10))])
def test_resize_matches_tensorflow_half_pixel_bilinear(src, dst):
    import tensorflow as tf

    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, size=(*src, 3)).astype(np.uint8)
    ours = resize_bilinear(image, *dst)
    theirs = tf.image.resize(image[None].astype(np.float32), dst, method="bilinear", antialias=False)[0].numpy()
    # TF computes the sample positions in float32, we in float64: 0.01 on 0..255 is 4e-5.
    assert np.max(np.abs(ours - theirs)) < 1e-2


def test_letterbox_pads_and_maps_back():
    image = np.zeros((1080, 810, 3), np.uint8)
    image[100:200, 300:400] = 255  # a white square at x 300..400, y 100..200
    spec = {"shape": [1, 640, 640, 3], "resize": "letterbox", "pad_value": 114, "scale": 1 / 255}
    x, transform = prepare(image, spec)
    assert x.shape == (1, 640, 640, 3) and x.dtype == np.float32
    new_w, new_h, left, top = letterbox_geometry(810, 1080, 640, 640)
    assert (new_w, new_h, left, top) == (480, 640, 80, 0)
    assert np.allclose(x[0, 320, :left], 114 / 255) and np.allclose(x[0, 320, left + new_w:], 114 / 255)
    ys, xs = np.nonzero(x[0, :, :, 0] > 0.99)
    box = transform.to_source(np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], float))
    assert np.allclose(box, [300, 100, 400, 200], atol=2)


def test_center_crop_and_normalisation():
    image = np.full((300, 400, 3), 200, np.uint8)
    spec = {"shape": [1, 224, 224, 3], "resize": "center-crop", "crop_fraction": 0.875,
            "scale": 1.0, "mean": [127.0, 127.0, 127.0], "std": [128.0, 128.0, 128.0]}
    x, transform = prepare(image, spec)
    assert x.shape == (1, 224, 224, 3)
    assert np.allclose(x, (200 - 127) / 128, atol=1e-5)
    # The crop centre maps to the image centre.
    assert np.allclose(transform.to_source(np.array([112.0, 112.0])), [200, 150], atol=1.0)


def test_stretch_transform_inverse():
    t = Transform(0.5, 0.25, 0, 0)
    assert np.allclose(t.to_source(np.array([10.0, 10.0, 20.0, 20.0])), [20, 40, 40, 80])


def test_unknown_resize_is_rejected():
    with pytest.raises(ValueError):
        prepare(np.zeros((4, 4, 3), np.uint8), {"shape": [1, 4, 4, 3], "resize": "squash"})
