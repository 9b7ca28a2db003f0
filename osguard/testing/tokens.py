"""Token counts of requests as the loopback model servers report them in ``usage``.

Computed from the request body as received: every image is counted by its pixel size with
the provider's published rule, and everything else (the JSON text without the images) at
four characters per token. Real tokenizers differ by model; these counts are for
comparing what agents send, not for billing.

- OpenAI (chat completions, Responses): an image at ``detail: high`` (the default here)
  is fitted within 2048x2048, then its short side to at most 768; it costs 85 tokens plus
  170 per 512x512 tile.
- Anthropic (Messages): an image costs width x height / 750 tokens.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from osguard.testing.openai_server import estimate_tokens


def png_size_b64(data: str) -> tuple[int, int] | None:
    """Width and height of a base64 PNG (from its header), or None for anything else."""
    try:
        head = base64.b64decode(data[:32] + "=" * (-len(data[:32]) % 4))
    except ValueError:
        return None
    if len(head) < 24 or not head.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def openai_image_tokens(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = width * scale, height * scale
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


def anthropic_image_tokens(width: int, height: int) -> int:
    return math.ceil(width * height / 750)


def _split(value: Any, images: list[tuple[int, int]]) -> Any:
    """``value`` with every base64 image replaced by a short marker, its size noted."""
    if isinstance(value, dict):
        return {k: _split(v, images) for k, v in value.items()}
    if isinstance(value, list):
        return [_split(v, images) for v in value]
    if isinstance(value, str) and len(value) > 64:
        data = value.split(",", 1)[1] if value.startswith("data:image/") and "," in value else value
        size = png_size_b64(data)
        if size is not None:
            images.append(size)
            return "<image>"
    return value


def request_tokens(parts: list[Any], image_tokens: Any) -> int:
    """Prompt tokens of a request's ``parts`` (each counted as its JSON text without the
    images) plus ``image_tokens(w, h)`` per image."""
    images: list[tuple[int, int]] = []
    text = sum(estimate_tokens(json.dumps(_split(part, images), ensure_ascii=False)) for part in parts)
    return text + sum(image_tokens(w, h) for w, h in images)


def openai_request_tokens(body: Any) -> int:
    """Prompt tokens of a chat-completions or Responses request (its messages or input,
    and its tools); without images or tools, exactly ``estimate_tokens`` of the messages'
    JSON, as the chat server always counted."""
    if not isinstance(body, dict):
        return estimate_tokens(str(body))
    parts = [body[k] for k in ("instructions", "messages", "input", "tools") if k in body]
    return request_tokens(parts, openai_image_tokens)


def anthropic_request_tokens(body: Any) -> int:
    """Prompt tokens of a Messages request (system, messages, tools)."""
    if not isinstance(body, dict):
        return estimate_tokens(str(body))
    parts = [body[k] for k in ("system", "messages", "tools") if k in body]
    return request_tokens(parts, anthropic_image_tokens)
