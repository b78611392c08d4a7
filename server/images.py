"""Safe decoding of uploaded images, in memory only.

- Formats: JPEG, PNG, WebP (what the pages accept); anything else -> 415.
- Pixel limit (app.config MAX_IMAGE_PIXELS) checked from the header, before any pixel is
  decoded: a decompression bomb (e.g. a 20000x20000 PNG of a few KB) -> 413.
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

import numpy as np
from PIL import Image, ImageOps

FORMATS = ("JPEG", "PNG", "WEBP")
MIME_TYPES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/webp": "WEBP"}

# Pillow's own bomb warning (past ~89 MP) is noise here: MAX_IMAGE_PIXELS is checked below.
# Set once at import: warnings.catch_warnings() per call is not thread-safe.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


class ImageError(ValueError):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class DecodedImage:
    rgb: np.ndarray   # HxWx3 uint8
    format: str
    width: int
    height: int


def decode(data: bytes, max_pixels: int) -> DecodedImage:
    if not data:
        raise ImageError(400, "empty_image", "the image is empty (0 bytes)")
    try:
        im = Image.open(io.BytesIO(data), formats=FORMATS)
    except Image.DecompressionBombError as exc:
        raise ImageError(413, "image_too_large", f"image has too many pixels ({exc})") from None
    except Image.UnidentifiedImageError:
        raise ImageError(415, "unsupported_media_type", "not a JPEG, PNG or WebP image") from None
    except Exception as exc:  # a header the plugin itself cannot parse
        raise ImageError(422, "unprocessable_image", f"the image header could not be read: {exc}") from None
    with im:
        width, height = im.size
        if width <= 0 or height <= 0:
            raise ImageError(422, "unprocessable_image", f"the image has no pixels ({width}x{height})")
        if width * height > max_pixels:
            raise ImageError(413, "image_too_large",
                             f"image is {width}x{height} = {width * height} pixels; the limit is {max_pixels}")
        fmt = im.format
        try:
            im.load()
        except Exception as exc:  # truncated / corrupt data, whatever the plugin raises
            raise ImageError(422, "unprocessable_image",
                             f"the {fmt} image could not be decoded (truncated or corrupt): {exc}") from None
        try:
            oriented = ImageOps.exif_transpose(im)
        except Exception:  # malformed EXIF: decode as stored
            oriented = im
        try:
            rgb = to_rgb(oriented)
        except Exception as exc:  # an exotic mode Pillow cannot convert
            raise ImageError(422, "unprocessable_image", f"the {fmt} image could not be converted to RGB: {exc}") \
                from None
    return DecodedImage(rgb=rgb, format=fmt, width=rgb.shape[1], height=rgb.shape[0])


def to_rgb(im: Image.Image) -> np.ndarray:
    mode = im.mode
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        grey = (np.asarray(im, dtype=np.uint32) >> 8).clip(0, 255).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(grey[..., None], 3, axis=2))
    has_alpha = mode in ("RGBA", "LA", "PA", "RGBa", "La") or (mode == "P" and "transparency" in im.info)
    if has_alpha:
        rgba = np.asarray(im.convert("RGBA"))
        rgb = rgba[..., :3].copy()
        rgb[rgba[..., 3] == 0] = 0
        return rgb
    if mode != "RGB":
        im = im.convert("RGB")
    return np.ascontiguousarray(np.asarray(im, dtype=np.uint8))
