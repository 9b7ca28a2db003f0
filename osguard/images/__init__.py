"""osguard.images: osguard's own desktop image for the ``docker`` provider.

Built from scratch (no registry is needed): ``debootstrap`` a Debian root file system,
import it, then build the ``base`` flavour (Xvfb, openbox, xterm, mousepad, AT-SPI,
pyautogui, the osguard server) and optionally ``full`` (LibreOffice, Thunderbird,
Chromium, GIMP, VLC) on top. Tags carry a content hash of the build inputs::

    from osguard.images import build_image
    result = build_image("base")          # seconds when nothing changed
    print(result.tag, result.cached)
"""

from __future__ import annotations

from osguard.images.build import (
    DEBIAN_BASE_IMAGE,
    FLAVORS,
    IMAGE_REPOSITORY,
    BuildEvent,
    BuildResult,
    Flavor,
    ImageBuildError,
    ImageRecord,
    build_image,
    context_files,
    debian_mirror,
    engine_client,
    find_image,
    get_flavor,
    image_tag,
    inputs_hash,
    list_images,
    prune_images,
)

__all__ = [
    "DEBIAN_BASE_IMAGE",
    "FLAVORS",
    "IMAGE_REPOSITORY",
    "BuildEvent",
    "BuildResult",
    "Flavor",
    "ImageBuildError",
    "ImageRecord",
    "build_image",
    "context_files",
    "debian_mirror",
    "engine_client",
    "find_image",
    "get_flavor",
    "image_tag",
    "inputs_hash",
    "list_images",
    "prune_images",
]
