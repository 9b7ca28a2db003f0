"""Images for photo-handling variants: small, distinct, deterministic (Pillow on the host)."""

from __future__ import annotations

import io
import random

# Argument bounds, read by `osguard validate` from this literal (see tasks/README.md):
# at most 4096 x 4096 pixels (48 MiB of RGB). A literal: no names, no calls.
ARGS = {
    "jpeg": {"seed": {"type": "integer"}, "label": {"type": "string", "maxLength": 200},
             "width": {"type": "integer", "minimum": 1, "maximum": 4096},
             "height": {"type": "integer", "minimum": 1, "maximum": 4096},
             "quality": {"type": "integer", "minimum": 1, "maximum": 100}},
    "png": {"seed": {"type": "integer"}, "label": {"type": "string", "maxLength": 200},
             "width": {"type": "integer", "minimum": 1, "maximum": 4096},
             "height": {"type": "integer", "minimum": 1, "maximum": 4096}},
    "webp": {"seed": {"type": "integer"}, "label": {"type": "string", "maxLength": 200},
             "width": {"type": "integer", "minimum": 1, "maximum": 4096},
             "height": {"type": "integer", "minimum": 1, "maximum": 4096}},
}


def _image(width: int, height: int, seed: int, label: str):
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    image = Image.new("RGB", (width, height), tuple(rng.randrange(40, 216) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        x1, y1 = x0 + rng.randrange(8, width // 2 + 9), y0 + rng.randrange(8, height // 2 + 9)
        draw.rectangle([x0, y0, x1, y1], fill=tuple(rng.randrange(256) for _ in range(3)))
    draw.text((6, 6), label, fill=(255, 255, 255))
    return image


def jpeg(seed: int, label: str = "", width: int = 160, height: int = 120, quality: int = 85) -> bytes:
    """A JPEG picture; different seeds give different bytes."""
    buffer = io.BytesIO()
    _image(width, height, seed, label).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def png(seed: int, label: str = "", width: int = 160, height: int = 120) -> bytes:
    """A PNG picture."""
    buffer = io.BytesIO()
    _image(width, height, seed, label).save(buffer, format="PNG")
    return buffer.getvalue()


def webp(seed: int, label: str = "", width: int = 200, height: int = 280) -> bytes:
    """A WebP picture (e.g. a poster)."""
    buffer = io.BytesIO()
    _image(width, height, seed, label).save(buffer, format="WEBP", quality=80)
    return buffer.getvalue()
