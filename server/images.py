"""Safe decoding of uploaded images, in memory only.

- Formats: JPEG, PNG, WebP (what the pages accept); anything else -> 415.
- Pixel limit (app.config MAX_IMAGE_PIXELS) checked from the header, before any pixel is
  decoded: a decompression bomb (e.g. a 20000x20000 PNG of a few KB) -> 413.
- Aspect-ratio limit (MAX_ASPECT_RATIO, 100:1) also from the header: a 600x1 or 16384x1
  strip is no photo any model here can read -> 422 (code image_aspect_ratio).
- Memory: one request holds at most request_memory_bound(pixels) above the idle worker:
  MAX_DECODE_BYTES_PER_PIXEL (16) per pixel plus REQUEST_BASE_BYTES (64 MiB): 674 MiB at the
  40 M pixel limit (tests/cluster/test_memory_bounds.py measures a worker). Measured at 40 M pixels:
  JPEG 6 bytes a pixel, PNG 7 (Pillow's buffer + the array, converted by bands), WebP 15
  (Pillow's WebP opener allocates libwebp's animation canvases, 8, before any pixel).
  Preprocessing is output-sized whatever the shape (modelcontract/geometry.py).
- JPEGs (RGB or grey, complete, i.e. ending in the EOI marker) and still WebPs are decoded
  by OpenCV (libjpeg-turbo, libwebp): the same pixels as Pillow's (tests/unit/test_images_fast.py)
  in half the time, straight into one array. Everything else goes through Pillow.
- Truncated or corrupt data -> 422. Empty -> 400.
- EXIF orientation applied, like the pages' createImageBitmap(file, {imageOrientation:
  'from-image'}); a malformed EXIF block is ignored (browsers do the same).
- Returned as HxWx3 uint8 RGB. Alpha: fully transparent pixels read as black, as the pages
  see them (drawImage onto a cleared canvas, then getImageData); the rest keeps its colour.
  16-bit samples keep their high byte. Embedded ICC profiles are not applied (Chromium
  converts to sRGB: photos with a non-sRGB profile can differ slightly from the page).
"""
from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import ExifTags, Image

from .errors import Problem
from .limits import MAX_ASPECT_RATIO

FORMATS = ("JPEG", "PNG", "WEBP")
MIME_TYPES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/webp": "WEBP"}
# Peak memory of one request above the idle worker (see the module docstring).
MAX_DECODE_BYTES_PER_PIXEL = 16
REQUEST_BASE_BYTES = 64 << 20
JPEG_EOI = b"\xff\xd9"
BAND_BYTES = 4 << 20  # to_rgb converts this much of Pillow's buffer at a time


def request_memory_bound(pixels: int) -> int:
    return MAX_DECODE_BYTES_PER_PIXEL * pixels + REQUEST_BASE_BYTES

# Pillow's own bomb warning (past ~89 MP) is noise here: MAX_IMAGE_PIXELS is checked below.
# Set once at import: warnings.catch_warnings() per call is not thread-safe.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


@dataclass
class DecodedImage:
    rgb: np.ndarray   # HxWx3 uint8
    format: str
    width: int
    height: int


def decode(data: bytes, max_pixels: int) -> DecodedImage:
    if not data:
        raise Problem(400, "empty_image", "the image is empty (0 bytes)")
    try:
        im = Image.open(io.BytesIO(data), formats=FORMATS)
    except Image.DecompressionBombError:  # far past any limit of ours: Pillow refuses to open it
        raise Problem(413, "image_too_large", f"the image has more pixels than the limit of {max_pixels} "
                                              "(DATARAILROAD_MAX_IMAGE_PIXELS)") from None
    except Image.UnidentifiedImageError:
        raise Problem(415, "unsupported_media_type", "not a JPEG, PNG or WebP image") from None
    except Exception as exc:  # a header the plugin itself cannot parse
        raise Problem(422, "unprocessable_image", f"the image header could not be read: {exc}") from None
    with im:
        width, height = im.size
        if width <= 0 or height <= 0:
            raise Problem(422, "unprocessable_image", f"the image has no pixels ({width}x{height})")
        if width * height > max_pixels:
            raise Problem(413, "image_too_large",
                          f"image is {width}x{height} = {width * height} pixels; the limit is {max_pixels} "
                          "(DATARAILROAD_MAX_IMAGE_PIXELS)")
        if max(width, height) > MAX_ASPECT_RATIO * min(width, height):
            raise Problem(422, "image_aspect_ratio",
                          f"image is {width}x{height}; the longer side may be at most {MAX_ASPECT_RATIO} times "
                          "the shorter")
        fmt = im.format
        rgb = decode_fast(data, im)
        if rgb is None:
            try:
                im.load()
            except Exception as exc:  # truncated / corrupt data, whatever the plugin raises
                raise Problem(422, "unprocessable_image",
                              f"the {fmt} image could not be decoded (truncated or corrupt): {exc}") from None
            try:
                rgb = to_rgb(im)
            except Exception as exc:  # an exotic mode Pillow cannot convert
                raise Problem(422, "unprocessable_image",
                              f"the {fmt} image could not be converted to RGB: {exc}") from None
        rgb = orient(rgb, exif_orientation(im))
    return DecodedImage(rgb=rgb, format=fmt, width=rgb.shape[1], height=rgb.shape[0])


def decode_fast(data: bytes, im: Image.Image) -> np.ndarray | None:
    """A complete RGB or grey JPEG, or a still WebP, decoded by OpenCV (the same
    libjpeg-turbo / libwebp decoding as Pillow's: the same pixels, tests/unit/test_images_fast.py)
    straight into one array; None for Pillow to decode: other JPEG colour spaces (CMYK),
    animations, and JPEG data not ending in EOI, where only Pillow reports truncation
    (OpenCV pads the image). A WebP OpenCV cannot decode also goes to Pillow."""
    if im.format == "JPEG" and im.mode in ("RGB", "L") and data.endswith(JPEG_EOI):
        flags = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION
    elif im.format == "WEBP" and not getattr(im, "is_animated", False):
        flags = cv2.IMREAD_UNCHANGED  # BGR, or BGRA when the file has alpha
    else:
        return None
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if pixels is None or pixels.shape[:2] != (im.height, im.width) or pixels.ndim != 3:
        return None  # Pillow decodes it or says what is wrong
    if pixels.shape[2] == 4:  # transparent pixels read as black, as on the pages
        rgb = np.ascontiguousarray(pixels[..., 2::-1])
        rgb[pixels[..., 3] == 0] = 0
        return rgb
    return cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB, dst=pixels)  # in place: one array


def exif_orientation(im: Image.Image) -> int:
    """The EXIF Orientation tag (1..8; 1 when absent or malformed: browsers ignore bad EXIF)."""
    try:
        return int(im.getexif().get(ExifTags.Base.Orientation, 1))
    except Exception:
        return 1


def orient(rgb: np.ndarray, orientation: int) -> np.ndarray:
    """Apply an EXIF orientation as PIL.ImageOps.exif_transpose does (2..8), on the array."""
    flips = {2: lambda a: a[:, ::-1], 3: lambda a: a[::-1, ::-1], 4: lambda a: a[::-1],
             5: lambda a: a.transpose(1, 0, 2), 6: lambda a: np.rot90(a, -1),
             7: lambda a: a.transpose(1, 0, 2)[::-1, ::-1], 8: lambda a: np.rot90(a, 1)}
    if orientation not in flips:
        return rgb
    return np.ascontiguousarray(flips[orientation](rgb))


def to_rgb(im: Image.Image) -> np.ndarray:
    """A loaded image -> HxWx3 uint8, converted a band of rows at a time: besides Pillow's
    own buffer only the result is full-size (a whole-image convert() or tobytes() would add
    one or two more copies: 23 bytes a pixel for an RGBA PNG instead of 7)."""
    width, height = im.size
    rgb = np.empty((height, width, 3), np.uint8)
    rows = max(1, BAND_BYTES // (4 * width))
    for top in range(0, height, rows):
        band = im.crop((0, top, width, min(top + rows, height)))
        rgb[top:top + band.height] = band_to_rgb(band)
    return rgb


def band_to_rgb(im: Image.Image) -> np.ndarray:
    mode = im.mode
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        grey = (np.asarray(im) >> 8).clip(0, 255).astype(np.uint8)
        return grey[..., None]  # broadcast to the three channels
    has_alpha = mode in ("RGBA", "LA", "PA", "RGBa", "La") or (mode == "P" and "transparency" in im.info)
    if has_alpha:
        rgba = np.asarray(im if mode == "RGBA" else im.convert("RGBA"))
        rgb = rgba[..., :3].copy()
        rgb[rgba[..., 3] == 0] = 0
        return rgb
    return np.asarray(im if mode == "RGB" else im.convert("RGB"))
