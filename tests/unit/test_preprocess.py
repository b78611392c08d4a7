"""modelcontract/geometry.py is the manifest's input contract; check it against TF's own resize
and check the geometry round-trips."""
from __future__ import annotations

import numpy as np
import pytest

from modelcontract.geometry import Transform, letterbox_geometry, prepare, resize_bilinear


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


# ---------------------------------------------------------------------------- bounded work, fast path

def old_resize_then_crop(image, spec):
    """The centre crop as it was: resize the whole image to new_h x new_w, then cut."""
    from modelcontract.geometry import center_crop_geometry

    _, dst_h, dst_w, _ = spec["shape"]
    new_w, new_h, left, top = center_crop_geometry(image.shape[1], image.shape[0], dst_w, dst_h,
                                                   spec.get("crop_fraction", 1.0))
    return resize_bilinear(image, new_h, new_w)[top:top + dst_h, left:left + dst_w]


@pytest.mark.parametrize("shape", [(1080, 810), (37, 53), (1, 40), (40, 1), (3, 2), (224, 224), (256, 300), (1, 1)])
@pytest.mark.parametrize("crop_fraction", [0.875, 1.0])
def test_center_crop_window_equals_resize_then_crop(shape, crop_fraction):
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    image = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
    spec = {"shape": [1, 224, 224, 3], "resize": "center-crop", "crop_fraction": crop_fraction}
    x, _ = prepare(image, spec)
    assert np.array_equal(x[0], old_resize_then_crop(image, spec))  # bit for bit


def test_opencv_fast_resize_matches_the_exact_one():
    from modelcontract.geometry import FAST_RESIZE_MAX_PIXELS, resize_fast

    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(100):
        in_h, in_w, out_h, out_w = (int(v) for v in rng.integers(1, 300, 4))
        image = rng.integers(0, 256, (in_h, in_w, 3), dtype=np.uint8)
        worst = max(worst, float(np.abs(resize_fast(image, out_h, out_w) - resize_bilinear(image, out_h, out_w)).max()))
    assert worst < 0.02  # on 0..255: < 1e-4 after the usual / 255
    from harness.photos import decoded, photo_bytes

    for name in ("bus.jpg", "zidane.jpg"):
        image = decoded(photo_bytes(name))
        for size in ((640, 480), (360, 640), (224, 224), (1500, 1200)):
            diff = np.abs(resize_fast(image, *size) - resize_bilinear(image, *size)).max()
            assert diff < 1e-3, (name, size, diff)
    big = np.zeros((FAST_RESIZE_MAX_PIXELS // 1000 + 1, 1000, 3), np.uint8)  # past the budget: exact path
    assert np.array_equal(resize_fast(big, 64, 48), resize_bilinear(big, 64, 48))


SPECS = {
    "center-crop": {"shape": [1, 224, 224, 3], "resize": "center-crop", "crop_fraction": 0.875, "scale": 1 / 255},
    "letterbox": {"shape": [1, 640, 640, 3], "resize": "letterbox", "pad_value": 114, "scale": 1 / 255},
    "stretch": {"shape": [1, 192, 192, 3], "resize": "stretch", "scale": 1 / 255},
}


@pytest.mark.parametrize("shape", [(1, 600), (1, 16384), (16384, 1), (1, 200_000)])
@pytest.mark.parametrize("resize", list(SPECS))
def test_work_follows_the_model_input_not_the_resized_image(shape, resize):
    """The issue's 600x1 took 1.6 GB in the centre crop (a 134400x224 float32 resize first).
    Now the memory a prepare allocates is a few model inputs, whatever the aspect ratio."""
    import tracemalloc

    image = np.full((*shape, 3), 200, np.uint8)
    spec = SPECS[resize]
    _, h, w, _ = spec["shape"]
    tracemalloc.start()
    try:
        x, transform = prepare(image, spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert x.shape == (1, h, w, 3) and np.isfinite(x).all()
    assert peak < 8 * h * w * 3 * 4 + image.nbytes, peak  # a few float32 model inputs
    if resize != "letterbox":
        assert np.allclose(x, 200 / 255, atol=1e-6)
