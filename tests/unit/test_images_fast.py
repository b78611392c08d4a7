"""server/images.py: the OpenCV JPEG/WebP path gives Pillow's pixels, EXIF orientation as
PIL.ImageOps.exif_transpose, and the header limits (pixels, aspect ratio) answer before any
pixel is decoded."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from server import images
from server.errors import Problem
from harness.photos import encode, photo_bytes


def pillow_rgb(data: bytes) -> np.ndarray:
    """The reference: Pillow decodes, exif_transpose, RGB, transparent pixels black (the
    decoder before the fast paths)."""
    with Image.open(io.BytesIO(data)) as im:
        oriented = ImageOps.exif_transpose(im)
        rgb = np.asarray(oriented.convert("RGB")).copy()
        if "A" in oriented.mode:
            rgb[np.asarray(oriented.getchannel("A")) == 0] = 0
        return rgb


def jpeg_variants() -> list[bytes]:
    bus = images.decode(photo_bytes("bus.jpg"), 10**9).rgb
    out = [photo_bytes("bus.jpg"), photo_bytes("zidane.jpg")]
    for size in ((810, 1080), (33, 17), (257, 255)):
        small = np.asarray(Image.fromarray(bus).resize(size))
        for subsampling in (0, 1, 2):
            for quality, progressive in ((40, False), (95, True)):
                out.append(encode(small, "JPEG", quality=quality, subsampling=subsampling, progressive=progressive))
    out.append(encode(bus[..., 0], "JPEG", quality=90))  # greyscale
    alpha = np.where(np.arange(bus.shape[1]) % 7 == 0, 0, 255).astype(np.uint8)[None, :].repeat(bus.shape[0], 0)
    for pixels in (bus, np.dstack([bus, alpha])):
        for options in ({"quality": 80}, {"quality": 30, "method": 6}, {"lossless": True}):
            out.append(encode(pixels, "WEBP", **options))
    return out


def test_fast_jpeg_and_webp_path_gives_pillows_pixels():
    for data in jpeg_variants():
        with Image.open(io.BytesIO(data)) as im:
            assert images.decode_fast(data, im) is not None  # the fast path is taken
        assert np.array_equal(images.decode(data, 10**9).rgb, pillow_rgb(data))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_as_pillow(orientation):
    rng = np.random.default_rng(orientation)
    rgb = rng.integers(0, 256, (24, 40, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = orientation
    for fmt in ("JPEG", "PNG", "WEBP"):
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, fmt, exif=exif.tobytes(), **({"quality": 95} if fmt == "JPEG" else {}))
        data = buf.getvalue()
        got = images.decode(data, 10**9)
        assert np.array_equal(got.rgb, pillow_rgb(data)), fmt
        assert (got.width, got.height) == ((24, 40) if orientation >= 5 else (40, 24))


def test_truncated_and_cmyk_jpegs_take_pillows_path():
    bus = photo_bytes("bus.jpg")
    with pytest.raises(Problem) as err:
        images.decode(bus[: len(bus) // 2], 10**9)
    assert err.value.status == 422
    cmyk = io.BytesIO()
    Image.open(io.BytesIO(bus)).convert("CMYK").save(cmyk, "JPEG", quality=90)
    data = cmyk.getvalue()
    with Image.open(io.BytesIO(data)) as im:
        assert images.decode_fast(data, im) is None
    assert np.array_equal(images.decode(data, 10**9).rgb, pillow_rgb(data))


@pytest.mark.parametrize("size,ok", [((100, 1), True), ((1, 100), True), ((101, 1), False), ((600, 1), False),
                                     ((1, 16384), False), ((16384, 1), False), ((1000, 10), True)])
def test_aspect_ratio_limit(size, ok):
    for fmt in ("PNG", "WEBP", "JPEG"):
        if fmt == "WEBP" and max(size) > 16383:
            continue
        data = encode(np.full((size[1], size[0], 3), 90, np.uint8), fmt)
        if ok:
            assert images.decode(data, 10**9).rgb.shape == (size[1], size[0], 3)
        else:
            with pytest.raises(Problem) as err:
                images.decode(data, 10**9)
            assert (err.value.status, err.value.code) == (422, "image_aspect_ratio")
            assert str(images.MAX_ASPECT_RATIO) in err.value.message


def test_modes_convert_like_before():
    """Alpha (transparent -> black), palette with transparency, 16-bit grey (high byte)."""
    rng = np.random.default_rng(2)
    rgba = rng.integers(0, 256, (20, 30, 4), dtype=np.uint8)
    rgba[::3, ::2, 3] = 0
    want = rgba[..., :3].copy()
    want[rgba[..., 3] == 0] = 0
    assert np.array_equal(images.decode(encode(rgba, "PNG"), 10**9).rgb, want)
    la = Image.fromarray(rgba[..., [0, 3]], "LA")
    buf = io.BytesIO()
    la.save(buf, "PNG")
    grey = np.repeat(rgba[..., :1], 3, axis=2)
    grey[rgba[..., 3] == 0] = 0
    assert np.array_equal(images.decode(buf.getvalue(), 10**9).rgb, grey)
    deep = (rng.integers(0, 65536, (10, 12))).astype(np.uint16)
    buf = io.BytesIO()
    Image.fromarray(deep).save(buf, "PNG")
    assert np.array_equal(images.decode(buf.getvalue(), 10**9).rgb, np.repeat((deep >> 8).astype(np.uint8)[..., None], 3, 2))
