"""How many prompt tokens an image costs a Qwen2-VL-style model, from the image's header alone.

Qwen2-VL resizes every image so both sides are multiples of 28 and its area lies within
``[min_pixels, max_pixels]`` (``smart_resize`` in transformers'
``models/qwen2_vl/image_processing_qwen2_vl.py``; defaults ``min_pixels = 56*56``,
``max_pixels = 28*28*1280``, which vLLM uses too), cuts it into 14x14 patches and merges them
2x2 into one token each: ``tokens = (h / 28) * (w / 28)`` after the resize. A 224x224 image
is 8 * 8 = 64 tokens; anything large is capped near 1280 tokens.

:func:`smart_resize` follows the current transformers code: Python's ``round`` (half to
even), ``max(factor, ...)`` when shrinking, and no error for sides under 28 (older releases
raised there); aspect ratios over 200 are refused, as there.

:func:`image_size` reads width and height from a PNG's IHDR, a JPEG's SOF segment, a GIF's
screen descriptor or a WebP's VP8/VP8L/VP8X header, without decoding pixels or importing
Pillow; EXIF rotation is not applied (servers that load with Pillow don't either).

Pure; like the rest of ``llmload.mock`` it imports nothing from the client side.

Usage::

    count_image_tokens("data:image/png;base64,iVBORw0KGgo...")    # -> 64 for a 224x224 PNG
    qwen2_vl_image_tokens(1024, 768)                               # -> 999 (resized to 1036x756)
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

PATCH_SIZE = 14
MERGE_SIZE = 2
FACTOR = PATCH_SIZE * MERGE_SIZE
MIN_PIXELS = 56 * 56
MAX_PIXELS = 28 * 28 * 1280

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Start-of-frame markers carry the size; C4 (DHT), C8 (JPG) and CC (DAC) share the range but don't.
_JPEG_SOF = frozenset((0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF))
_JPEG_STANDALONE = frozenset((0x01, 0xD8, *range(0xD0, 0xD8)))


class ImageError(ValueError):
    """The bytes are not an image whose size can be read."""


class TruncatedImage(ImageError):
    """The header runs past the bytes given: read more and try again."""


def smart_resize(height: int, width: int, factor: int = FACTOR, min_pixels: int = MIN_PIXELS,
                 max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """Qwen2-VL's resize target ``(height, width)``: multiples of ``factor``, area within bounds,
    aspect ratio kept as nearly as it can be."""
    if height < 1 or width < 1:
        raise ImageError(f"image of {width}x{height}: expected both sides >= 1")
    if max(height, width) / min(height, width) > 200:
        raise ImageError(f"image of {width}x{height}: absolute aspect ratio must be smaller than 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def qwen2_vl_image_tokens(width: int, height: int, min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS,
                          patch_size: int = PATCH_SIZE, merge_size: int = MERGE_SIZE) -> int:
    """Placeholder tokens one image takes in the prompt (not counting vision start/end markers)."""
    h, w = smart_resize(height, width, patch_size * merge_size, min_pixels, max_pixels)
    return (h // patch_size) * (w // patch_size) // (merge_size * merge_size)


def image_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` from the header of a PNG, JPEG, GIF or WebP image."""
    if data[:8] == _PNG_SIGNATURE:
        if len(data) < 24:
            raise TruncatedImage("PNG: the header is cut short")
        if data[12:16] != b"IHDR":
            raise ImageError("PNG: the first chunk is not IHDR")
        return struct.unpack(">II", data[16:24])
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        if len(data) < 10:
            raise TruncatedImage("GIF: the header is cut short")
        return struct.unpack("<HH", data[6:10])
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if len(data) < 12 and any(sig.startswith(data) for sig in (_PNG_SIGNATURE, b"\xff\xd8", b"GIF8", b"RIFF")):
        raise TruncatedImage("image: the header is cut short")
    raise ImageError("not a PNG, JPEG, GIF or WebP image")


def _jpeg_size(data: bytes) -> tuple[int, int]:
    n = len(data)
    i = 2
    while True:
        if i >= n:
            raise TruncatedImage("JPEG: no frame header in the bytes given")
        if data[i] != 0xFF:
            raise ImageError(f"JPEG: expected a marker at byte {i}")
        while i < n and data[i] == 0xFF:  # markers may be padded with fill bytes
            i += 1
        if i >= n:
            raise TruncatedImage("JPEG: no frame header in the bytes given")
        marker = data[i]
        i += 1
        if marker in _JPEG_STANDALONE:
            continue
        if marker in (0xD9, 0xDA):
            raise ImageError("JPEG: the scan starts before any frame header (SOF)")
        if i + 2 > n:
            raise TruncatedImage("JPEG: a segment header is cut short")
        length = (data[i] << 8) | data[i + 1]
        if marker in _JPEG_SOF:
            if i + 7 > n:
                raise TruncatedImage("JPEG: the frame header is cut short")
            height, width = struct.unpack(">HH", data[i + 3:i + 7])  # after length (2) and precision (1)
            if height == 0:
                raise ImageError("JPEG: height 0 in the frame header (defined later by DNL) is not supported")
            return width, height
        if length < 2:
            raise ImageError(f"JPEG: segment length {length} at byte {i}")
        i += length


def _webp_size(data: bytes) -> tuple[int, int]:
    if len(data) < 30:
        raise TruncatedImage("WebP: the header is cut short")
    kind = data[12:16]
    if kind == b"VP8X":  # extended: canvas size minus one, 24-bit little-endian
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if kind == b"VP8L":  # lossless: 14-bit width-1 and height-1 after the 0x2f signature
        if data[20] != 0x2F:
            raise ImageError("WebP: VP8L signature missing")
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if kind == b"VP8 ":  # lossy: a 3-byte frame tag, the start code, then 14-bit sizes
        if data[23:26] != b"\x9d\x01\x2a":
            raise ImageError("WebP: VP8 start code missing")
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    raise ImageError(f"WebP: unknown chunk {kind!r}")


def parse_data_url(url: str) -> tuple[str, str]:
    """``(media type, base64 payload)`` of a ``data:<type>;base64,<payload>`` URL."""
    if not url.startswith("data:"):
        raise ImageError(f"image url: expected an inline data: URL (the mock fetches nothing), got {url[:40]!r}")
    comma = url.find(",")
    if comma < 0:
        raise ImageError("image url: a data: URL needs a comma before its payload")
    meta = url[5:comma].split(";")
    if "base64" not in meta[1:]:
        raise ImageError("image url: expected a base64 data: URL (data:image/png;base64,...)")
    return meta[0], url[comma + 1:]


def data_url_image_size(url: str) -> tuple[int, int]:
    """:func:`image_size` of a base64 data URL, decoding only as much as the header needs (a
    PNG's size is in its first 24 bytes; a JPEG's usually within a few KB)."""
    _, payload = parse_data_url(url)
    take = 64
    while True:
        whole = take >= len(payload)
        chunk = payload if whole else payload[:take]
        try:
            data = base64.b64decode(chunk)
        except binascii.Error:
            if whole:
                raise ImageError("image url: the base64 payload is not valid base64") from None
            take *= 16  # a prefix cut mid-padding or through stray whitespace: decode more
            continue
        try:
            return image_size(data)
        except TruncatedImage:
            if whole:
                raise
            take *= 16


def count_image_tokens(url: str, min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS) -> int:
    """Qwen2-VL tokens for an image sent as a base64 data URL."""
    width, height = data_url_image_size(url)
    return qwen2_vl_image_tokens(width, height, min_pixels, max_pixels)
