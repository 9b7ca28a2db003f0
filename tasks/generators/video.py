"""A film for the VLC snapshot variants (ffmpeg and Pillow on the host): drawn, no downloads.

``trailer_mp4`` stands in for OSWorld's ``Interstellar Movie - Official Trailer.mp4`` (task
fba2c100, "snap a photo of the current video scene, save it as 'interstellar.png'"): upstream
starts VLC with ``--start-time=120.5 --stop-time=121 --play-and-pause``, so the scene on
screen is the one around 2:00.5-2:01. The film here lasts ``seconds`` seconds at 5 frames
per second: a first scene (a title card) up to 2:00, then, from 2:00 to the end, one still
scene (a ringed planet, stars, "INTERSTELLAR"), so that whichever frame of 2:00.5-2:01 VLC
stops on, its snapshot is the same picture.

The frames are pure black and white, encoded losslessly (H.264, ``-qp 0``, a keyframe every
second so that the seek to 2:00.5 decodes little): every decoder gives back luma 16 or 235 and
neutral chroma, which every YUV to RGB conversion turns into 0 and 255 exactly, so VLC's PNG
snapshot has the very pixels of ``scene_png`` (the offline gold,
tasks/gold/fba2c100-79e8-42df-ae74-b592418d54f4/interstellar_gold.png) and upstream's SSIM
check (compare_images) scores it 1.0.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import tempfile

# Argument bounds, read by `osguard validate` from this literal (see tasks/README.md).
ARGS = {"trailer_mp4": {"seconds": {"type": "integer", "minimum": 122, "maximum": 200},
                        "title": {"type": "string", "maxLength": 200}},
        "scene_png": {}}

WIDTH, HEIGHT, FPS, SCENE_AT = 640, 480, 5, 120


def _frame(scene: bool):
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("1", (WIDTH, HEIGHT), 0)
    draw = ImageDraw.Draw(image)
    rng = random.Random(1014 if scene else 2014)
    for _ in range(140):  # stars, 2x2 squares
        x, y = rng.randrange(0, WIDTH // 2) * 2, rng.randrange(0, HEIGHT // 2) * 2
        draw.rectangle([x, y, x + 1, y + 1], fill=1)
    font = ImageFont.load_default()
    if scene:
        draw.ellipse([360, 90, 560, 290], fill=1)  # a planet
        draw.ellipse([392, 122, 528, 258], fill=0)
        draw.ellipse([408, 138, 512, 242], fill=1)
        draw.rectangle([300, 186, 620, 193], fill=1)  # its ring
        draw.rectangle([80, 360, 560, 362], fill=1)
        text = "I N T E R S T E L L A R"
    else:
        draw.rectangle([100, 100, 540, 380], outline=1, width=4)
        text = "PARAMOUNT PICTURES PRESENTS"
    small = Image.new("1", (160, 12), 0)
    ImageDraw.Draw(small).text((0, 0), text, fill=1, font=font)
    big = small.resize((640, 48), Image.NEAREST)
    image.paste(big, (0, 392 if scene else 216))
    return image.convert("RGB")


def scene_png() -> bytes:
    """The scene on screen from 2:00 on, as PNG (RGB, 640x480): the gold of the snapshot."""
    buffer = io.BytesIO()
    _frame(True).save(buffer, format="PNG")
    return buffer.getvalue()


def trailer_mp4(seconds: int = 150, title: str = "Interstellar Movie - Official Trailer") -> bytes:
    """The film as MP4 (H.264 lossless, 640x480, 5 fps, no audio); ffmpeg encodes it."""
    first, scene = _frame(False).tobytes(), _frame(True).tobytes()
    frames = b"".join(first if index < SCENE_AT * FPS else scene for index in range(seconds * FPS))
    with tempfile.TemporaryDirectory() as folder:
        target = os.path.join(folder, "film.mp4")
        subprocess.run(
            ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
             "-s", f"{WIDTH}x{HEIGHT}", "-r", str(FPS), "-i", "-", "-c:v", "libx264", "-qp", "0",
             "-preset", "veryfast", "-g", str(FPS), "-pix_fmt", "yuv420p", "-threads", "1", "-map_metadata", "-1",
             "-metadata", f"title={title}", "-fflags", "+bitexact", "-flags:v", "+bitexact",
             "-movflags", "+faststart", target],
            input=frames, check=True, timeout=100)
        with open(target, "rb") as handle:
            return handle.read()
