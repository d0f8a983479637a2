"""Generated images (client side) and the mock's image token count (server side): sizes read
back from headers, determinism across processes, Qwen2-VL token counts worked out by hand."""

from __future__ import annotations

import base64
import io
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from llmload.wire.vision_tokens import (
    ImageError,
    TruncatedImage,
    count_image_tokens,
    data_url_image_size,
    image_size,
    qwen2_vl_image_tokens,
    smart_resize,
)
from llmload.workload.images import data_url, encode_png, image_part, image_url, make_image, pixels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pil_bytes(img: Image.Image, fmt: str, **kw) -> bytes:
    out = io.BytesIO()
    img.save(out, format=fmt, **kw)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
@pytest.mark.parametrize("width,height", [(1, 1), (224, 224), (640, 480), (333, 1001)])
def test_sizes_read_back(fmt, width, height):
    data = make_image(width, height, fmt, seed=5)
    assert image_size(data) == (width, height)
    img = Image.open(io.BytesIO(data))
    img.load()
    assert img.size == (width, height) and img.format == fmt.upper() and img.mode == "RGB"
    if fmt == "png":  # lossless: Pillow decodes exactly our pixels (our filter and zlib are right)
        assert np.array_equal(np.asarray(img), pixels(width, height, 5))


def test_same_bytes_for_same_arguments_in_any_process():
    a = make_image(64, 48, "png", seed=9)
    make_image.cache_clear()
    assert make_image(64, 48, "png", seed=9) == a
    assert make_image(64, 48, "png", seed=10) != a
    code = ("import sys, hashlib; from llmload.workload.images import make_image; "
            "sys.stdout.write(hashlib.sha256(make_image(64, 48, 'png', 9)).hexdigest() + "
            "hashlib.sha256(make_image(64, 48, 'jpeg', 9)).hexdigest())")
    outs = set()
    for hashseed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                                timeout=60, cwd=ROOT).stdout)
    import hashlib
    assert outs == {hashlib.sha256(a).hexdigest() + hashlib.sha256(make_image(64, 48, "jpeg", 9)).hexdigest()}


def test_pixels_look_like_a_photo():
    """Neither flat (a few hundred bytes) nor noise (incompressible): a 512x512 JPEG is 10-100 KB."""
    jpeg = make_image(512, 512, "jpeg", seed=1)
    png = make_image(512, 512, "png", seed=1)
    assert 10_000 < len(jpeg) < 100_000
    assert 100_000 < len(png) < 512 * 512 * 3 * 0.75
    px = pixels(512, 512, 1).astype(int)
    assert px.std() > 20  # colour varies across the picture
    assert np.abs(np.diff(px, axis=1)).mean() < 8  # but neighbours are close


def test_data_url_and_part():
    data = make_image(32, 32, "png", seed=1)
    url = data_url(data, "png")
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == data
    assert data_url(b"\xff\xd8", "jpeg").startswith("data:image/jpeg;base64,")
    part = image_part(32, 32, "png", seed=1)
    assert part == {"type": "image_url", "image_url": {"url": url}}
    assert image_part(32, 32, "png", seed=1, detail="low")["image_url"]["detail"] == "low"
    assert image_part(32, 32, "png", seed=1) is not part  # callers may change their copy
    assert image_url(32, 32, "png", 1) is image_url(32, 32, "png", 1)  # cached string
    with pytest.raises(ValueError, match="image format: expected png or jpeg, got 'gif'"):
        make_image(8, 8, "gif")
    with pytest.raises(ValueError, match=r"image width: expected a whole number in 1..8192, got 0"):
        make_image(0, 8)


def test_cost_of_a_request_part():
    """What a request pays for its image part: the first call per (size, format, seed) generates
    and encodes; every later call is a dict around a cached string. Prints the numbers."""
    lines = []
    for side in (512, 1024):
        for fmt in ("png", "jpeg"):
            image_url.cache_clear()
            make_image.cache_clear()
            t = time.perf_counter()
            url = image_part(side, side, fmt, seed=77)["image_url"]["url"]
            first_ms = (time.perf_counter() - t) * 1e3
            n = 2000
            t = time.perf_counter()
            for _ in range(n):
                image_part(side, side, fmt, seed=77)
            cached_us = (time.perf_counter() - t) / n * 1e6
            lines.append(f"{side}x{side} {fmt}: {len(url) / 1e3:.0f} KB as a data URL, first call {first_ms:.1f} ms, "
                         f"then {cached_us:.2f} us per part")
            assert cached_us < 50  # a dict and a cache hit: ~1 us; the bound only catches a lost cache
    print("\n" + "\n".join(lines))


# ---- the mock's side -----------------------------------------------------------------------------

@pytest.mark.parametrize("width,height,resized,tokens", [
    # 224/28 = 8 exactly: 224x224 stays, 8*8 = 64 tokens
    (224, 224, (224, 224), 64),
    # 512/28 = 18.29 -> 18 -> 504; 504*504 = 254,016 is within [3136, 1,003,520]: 18*18 = 324
    (512, 512, (504, 504), 324),
    # h 768/28 = 27.43 -> 27 -> 756, w 1024/28 = 36.57 -> 37 -> 1036; 783,216 px fits: 27*37 = 999
    (1024, 768, (756, 1036), 999),
    # 1024/28 -> 37 -> 1036; 1036^2 = 1,073,296 > 1,003,520, so beta = sqrt(1024*1024 / 1,003,520) = 1.02220;
    # 1024 / 1.02220 / 28 = 35.78 -> floor 35 -> 980: 35*35 = 1225
    (1024, 1024, (980, 980), 1225),
    # 1920x1080: 1092x1932 is too big; beta = sqrt(2,073,600 / 1,003,520) = 1.43747;
    # h 1080/1.43747/28 = 26.83 -> 26 -> 728, w 1920/1.43747/28 = 47.70 -> 47 -> 1316: 26*47 = 1222
    (1920, 1080, (728, 1316), 1222),
    # 70/28 = 2.5 rounds half to even -> 2 -> 56 (round-half-up would give 84 and 9 tokens): 2*2 = 4
    (70, 70, (56, 56), 4),
    # 30x20 rounds to 28x28 = 784 < 3136, so beta = sqrt(3136 / 600) = 2.28619;
    # h ceil(20*2.28619/28 = 1.63) = 2 -> 56, w ceil(30*2.28619/28 = 2.45) = 3 -> 84: (56/14)*(84/14)/4 = 6
    (30, 20, (56, 84), 6),
])
def test_qwen2_vl_tokens_by_hand(width, height, resized, tokens):
    assert smart_resize(height, width) == resized
    assert qwen2_vl_image_tokens(width, height) == tokens
    url = image_url(width, height, "png", 0)
    assert count_image_tokens(url) == tokens


def test_token_bounds_and_options():
    assert qwen2_vl_image_tokens(4000, 3000) <= 1280  # max_pixels / 28^2
    assert qwen2_vl_image_tokens(1, 1) == 4  # min_pixels: 56x56
    assert qwen2_vl_image_tokens(1024, 1024, max_pixels=512 * 28 * 28) <= 512
    with pytest.raises(ImageError, match="aspect ratio must be smaller than 200"):
        qwen2_vl_image_tokens(2100, 10)


def test_jpeg_headers_before_the_frame():
    """EXIF and other segments before SOF, progressive (SOF2), and fill bytes before a marker."""
    img = Image.fromarray(pixels(300, 200, 3))
    exif = Image.Exif()
    exif[0x010E] = "x" * 20_000  # ImageDescription: pushes SOF ~20 KB in
    data = pil_bytes(img, "JPEG", exif=exif.tobytes(), progressive=True)
    assert data.find(b"\xff\xc2") > 20_000
    assert image_size(data) == (300, 200)
    url = data_url(data, "jpeg")
    assert data_url_image_size(url) == (300, 200) and count_image_tokens(url) == qwen2_vl_image_tokens(300, 200)
    padded = data[:2] + b"\xff\xff\xff" + data[2:]
    assert image_size(padded) == (300, 200)
    with pytest.raises(TruncatedImage):
        image_size(data[:1000])


def test_gif_and_webp():
    img = Image.fromarray(pixels(123, 45, 4))
    assert image_size(pil_bytes(img, "GIF")) == (123, 45)
    for kw, kind in (({"lossless": True}, b"VP8L"), ({"quality": 80}, b"VP8 ")):
        data = pil_bytes(img, "WEBP", **kw)
        assert data[12:16] == kind and image_size(data) == (123, 45)
    translucent = img.convert("RGBA")
    translucent.putalpha(128)
    data = pil_bytes(translucent, "WEBP", quality=80)  # alpha makes it the extended format
    assert data[12:16] == b"VP8X" and image_size(data) == (123, 45)


def test_bad_images_and_urls():
    png = encode_png(pixels(20, 10, 1))
    assert image_size(png) == (20, 10)
    with pytest.raises(TruncatedImage):
        image_size(png[:20])
    with pytest.raises(ImageError, match="not a PNG, JPEG, GIF or WebP image"):
        image_size(b"BM" + b"\x00" * 40)
    bad = bytearray(png)
    bad[12:16] = b"IDAT"
    with pytest.raises(ImageError, match="the first chunk is not IHDR"):
        image_size(bytes(bad))
    with pytest.raises(ImageError, match="the scan starts before any frame header"):
        image_size(b"\xff\xd8\xff\xda" + struct.pack(">H", 4) + b"\x00\x00")
    with pytest.raises(ImageError, match="expected an inline data: URL"):
        count_image_tokens("https://example.com/cat.png")
    with pytest.raises(ImageError, match="expected a base64 data: URL"):
        count_image_tokens("data:image/png,abc")
    with pytest.raises(ImageError, match="not valid base64"):
        count_image_tokens("data:image/png;base64,abc")


def test_mock_imports_nothing_from_the_client_side():
    code = ("import sys, llmload.wire.vision_tokens; "
            "bad = [m for m in sys.modules if m.startswith(('llmload.workload', 'PIL'))]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=ROOT)
