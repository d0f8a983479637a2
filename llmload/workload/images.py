"""Generated images for vision requests: the same bytes for the same (size, format, seed).

Pixels look like a blurred photo with grain (a coarse random colour grid, upsampled
bilinearly, plus noise), so encoded sizes are those of real pictures rather than of a flat
colour (a few hundred bytes) or of pure noise (incompressible). They come from numpy's legacy
``RandomState``, whose stream numpy keeps frozen across versions, so every worker and the server
see the same pixels for the same seed (vLLM keys its multimodal cache on pixels).

PNG is written here with numpy and zlib (the format is three chunks; its bytes depend only on
zlib). JPEG needs an encoder, so it comes from Pillow, which llmload already has through
matplotlib and now names as a dependency; Pillow is imported only when a JPEG is asked for.

Encoding costs milliseconds, so images, data URLs and their parts are cached per
(width, height, format, seed): a run that cycles through a few seeds pays once per seed
(``benchmarks``-style numbers are in the docstring of :func:`image_part`).

Usage::

    part = image_part(512, 512, fmt="jpeg", seed=3)
    messages = [{"role": "user", "content": [{"type": "text", "text": "Describe it."}, part]}]
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
from functools import lru_cache
from typing import Any

import numpy as np

FORMATS = ("png", "jpeg")
MAX_SIDE = 8192
IMAGE_CACHE = 32
"""Images (and their data URLs) kept per process: a 1024x1024 PNG is ~1.6 MB, ~2.1 MB as base64."""
JPEG_QUALITY = 85
_MIME = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg"}


def _check(width: int, height: int, fmt: str) -> str:
    if fmt not in _MIME:
        raise ValueError(f"image format: expected png or jpeg, got {fmt!r}")
    for key, v in (("width", width), ("height", height)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_SIDE:
            raise ValueError(f"image {key}: expected a whole number in 1..{MAX_SIDE}, got {v!r}")
    return "jpeg" if fmt == "jpg" else fmt


def pixels(width: int, height: int, seed: int = 0) -> np.ndarray:
    """``(height, width, 3)`` uint8 RGB, a function of the arguments only."""
    rs = np.random.RandomState(seed & 0xFFFFFFFF)
    gh, gw = height // 128 + 2, width // 128 + 2
    grid = rs.randint(0, 256, size=(gh, gw, 3)).astype(np.float32)
    # bilinear, one axis at a time: along x on the few grid rows, then along y on the full image
    xs = np.linspace(0, gw - 1, width, dtype=np.float32)
    x0 = np.minimum(xs.astype(np.intp), gw - 2)
    fx = (xs - x0)[None, :, None]
    rows = grid[:, x0] * (1 - fx) + grid[:, x0 + 1] * fx  # (gh, width, 3)
    ys = np.linspace(0, gh - 1, height, dtype=np.float32)
    y0 = np.minimum(ys.astype(np.intp), gh - 2)
    fy = (ys - y0)[:, None, None]
    img = rows[y0] * (1 - fy)
    img += rows[y0 + 1] * fy
    # grain (photos are never smooth): -4..3 from full-range bytes, numpy's fast path
    img += (rs.randint(0, 256, size=(height, width, 3), dtype=np.uint8) & 7).astype(np.float32) - 4
    np.clip(img, 0, 255, out=img)
    return img.astype(np.uint8)


def encode_png(rgb: np.ndarray, level: int = 1) -> bytes:
    """An 8-bit RGB PNG: signature, IHDR, one IDAT, IEND. Every row uses filter 2 ("Up": the byte
    minus the one above, the row above the first being zeros), which turns a smooth picture into
    small numbers that deflate well, as real encoders' adaptive filters do. zlib level 1: on
    grainy pixels level 6 is ~4x slower for ~5% fewer bytes."""
    height, width, _ = rgb.shape
    flat = rgb.reshape(height, width * 3)
    raw = np.empty((height, 1 + width * 3), dtype=np.uint8)
    raw[:, 0] = 2
    raw[0, 1:] = flat[0]
    np.subtract(flat[1:], flat[:-1], out=raw[1:, 1:])  # uint8 wraps modulo 256, as PNG wants

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # depth 8, colour type 2 (RGB)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw.tobytes(), level))
            + chunk(b"IEND", b""))


def encode_jpeg(rgb: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    from PIL import Image  # only JPEG needs it

    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="JPEG", quality=quality)
    return out.getvalue()


@lru_cache(maxsize=IMAGE_CACHE)
def make_image(width: int, height: int, fmt: str = "png", seed: int = 0) -> bytes:
    """An encoded image of ``width`` x ``height``; the same bytes for the same arguments."""
    fmt = _check(width, height, fmt)
    rgb = pixels(width, height, seed)
    return encode_png(rgb) if fmt == "png" else encode_jpeg(rgb)


def data_url(data: bytes, fmt: str) -> str:
    """``data:image/png;base64,...`` (what OpenAI-compatible servers take inline)."""
    if fmt not in _MIME:
        raise ValueError(f"image format: expected png or jpeg, got {fmt!r}")
    return f"data:{_MIME[fmt]};base64,{base64.b64encode(data).decode('ascii')}"


@lru_cache(maxsize=IMAGE_CACHE)
def image_url(width: int, height: int, fmt: str = "png", seed: int = 0) -> str:
    """The data URL of :func:`make_image`, cached: base64 of a megabyte costs about a millisecond."""
    return data_url(make_image(width, height, fmt, seed), _check(width, height, fmt))


def image_part(width: int, height: int, fmt: str = "png", seed: int = 0, detail: str | None = None) -> dict:
    """An OpenAI chat content part ``{"type": "image_url", "image_url": {"url": "data:..."}}``.

    A fresh dict each call around a cached URL string: about a microsecond once the URL is
    cached; the first call for a (size, format, seed) pays generation and encoding (see
    ``tests/unit/test_images.py::test_cost_of_a_request_part`` for the numbers measured on this machine).
    """
    inner = {"url": image_url(width, height, fmt, seed)}
    if detail is not None:
        inner["detail"] = detail
    return {"type": "image_url", "image_url": inner}


class ImageSet:
    """The pictures a workload sends: ``count`` parts per user message, each drawn from a pool of
    ``distinct`` seeds fixed by the scenario (the same pool in every process, so a server's
    multimodal cache sees what real repeated pictures would give it).

    ``tokens`` is what the parts of one message cost a Qwen2-VL-style model
    (:func:`llmload.wire.vision_tokens.qwen2_vl_image_tokens`, the count `llmload mock` charges).

    Usage::

        images = ImageSet(count=2, width=512, height=512, fmt="png", distinct=8, seed=7)
        content = [{"type": "text", "text": "Compare them."}, *images.parts(rng)]
    """

    def __init__(self, count: int, width: int, height: int, fmt: str, distinct: int, seed: int) -> None:
        from llmload.wire.vision_tokens import qwen2_vl_image_tokens  # pure and stdlib-only: one formula for both sides

        _check(width, height, fmt)
        self.count = count
        self.width = width
        self.height = height
        self.fmt = fmt
        self.seeds = [(seed * 1_000_003 + i) & 0xFFFFFFFF for i in range(max(1, distinct))]
        self.tokens = count * qwen2_vl_image_tokens(width, height)
        for s in self.seeds[:IMAGE_CACHE]:  # encode now (users start), not inside the first requests
            image_url(width, height, fmt, s)

    def parts(self, rng) -> list[dict]:
        """``count`` image_url parts; ``rng`` (a ``random.Random``) picks which pictures."""
        return [image_part(self.width, self.height, self.fmt, self.seeds[rng.randrange(len(self.seeds))])
                for _ in range(self.count)]

    def content(self, text: str, rng) -> list[dict]:
        """A user message's content: the text part, then the pictures."""
        return [{"type": "text", "text": text}, *self.parts(rng)]


def encode_with_images(body: dict) -> bytes:
    """``protocol.encode_body`` for a body whose messages carry data-URL pictures, ~15x faster.

    ``json.dumps`` looks at every character of a string, ~3 ms for two 600 KB PNG URLs; a base64
    data URL needs no JSON escaping, so the URLs are swapped for short markers, the rest is
    encoded, and the URL bytes (cached with the URL) are spliced in where the markers are.
    """
    from llmload.wire.protocol import encode_body

    urls: list[str] = []

    def swap(part: Any) -> Any:
        inner = part.get("image_url") if isinstance(part, dict) and part.get("type") == "image_url" else None
        url = inner.get("url") if isinstance(inner, dict) else None
        if not isinstance(url, str) or not url.startswith("data:") or len(url) < 1024:
            return part
        urls.append(url)
        return {**part, "image_url": {**inner, "url": f"@@llmload-image-{len(urls) - 1}@@"}}

    messages = [{**m, "content": [swap(p) for p in m["content"]]} if isinstance(m.get("content"), list) else m
                for m in body.get("messages") or ()]
    data = encode_body({**body, "messages": messages} if messages else body)
    if not urls:
        return data
    out, pos = [], 0
    for i, url in enumerate(urls):  # one copy of everything: the pieces between the markers, and the URLs
        marker = f"@@llmload-image-{i}@@".encode()
        at = data.index(marker, pos)
        out += (data[pos:at], _url_bytes(url))
        pos = at + len(marker)
    out.append(data[pos:])
    return b"".join(out)


@lru_cache(maxsize=IMAGE_CACHE)
def _url_bytes(url: str) -> bytes:
    return url.encode("ascii")
