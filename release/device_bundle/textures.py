"""Large textures, recompressed without loss for the trip and restored on arrival.

LIBERO's scene textures are PNGs of up to 4096x4096 pixels; WebP's lossless mode holds
the same pixels in about half the bytes. A texture is recompressed only when it is RGB
or RGBA (what WebP keeps exactly, ``exact=True`` keeping the colour under transparent
pixels), the WebP is at least ``SAVING`` smaller and it reads back to the same pixels.
On arrival it is written back as a PNG whose pixels must hash to what they hashed to
here: the renderer reads pixels, so equal pixels give equal images, whatever the PNG's
own bytes.

This module runs on the GPU machine too (``arrive.py`` imports it by path): standard
library and Pillow only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

LARGE_BYTES = 256 * 1024
SAVING = 0.9
"""Keep the WebP only where it is at most this share of the PNG's bytes."""
WEBP_OPTIONS: dict[str, Any] = {"lossless": True, "quality": 50, "method": 0, "exact": True}
"""Method 0: within ~10% of the smallest WebP at a fiftieth of method 6's time."""
SUFFIX = ".lossless.webp"


def _pixels(image: Any) -> str:
    """sha256 of an image's mode, size and pixel bytes: equal exactly when the pixels are."""
    digest = hashlib.sha256(f"{image.mode} {image.size[0]}x{image.size[1]}\n".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


def _opened(path: Path, mode: str | None = None) -> Any:
    from PIL import Image

    with Image.open(path) as image:
        image.load()
        return image if mode is None or image.mode == mode else image.convert(mode)


def pixel_sha256(path: Path) -> str:
    return _pixels(_opened(path))


def recompress(png: Path, webp: Path) -> dict[str, str] | None:
    """``png`` written as a lossless WebP at ``webp`` when that is worth it and reads
    back to the same pixels: then what ``restore`` checks (pixel hash and mode). None:
    the PNG travels as it is."""
    if png.suffix.lower() != ".png" or png.stat().st_size < LARGE_BYTES:
        return None
    image = _opened(png)
    if image.mode not in ("RGB", "RGBA"):
        return None
    image.save(webp, "WEBP", **WEBP_OPTIONS)
    kept = {"pixels": _pixels(image), "mode": image.mode}
    worth = webp.stat().st_size <= SAVING * png.stat().st_size
    if not worth or _pixels(_opened(webp, image.mode)) != kept["pixels"]:
        webp.unlink()
        return None
    return kept


def restore(webp: Path, png: Path, pixels: str, mode: str) -> None:
    """Write the PNG a recompressed texture came from (its pixels, not its bytes) and
    remove the WebP; ValueError naming the file when the pixels are not ``pixels``."""
    image = _opened(webp, mode)
    found = _pixels(image)
    if found != pixels:
        raise ValueError(f"{png}: its texture's pixels hash to {found} on arrival, the bundle "
                         f"says {pixels}: the bundle is damaged; build it again")
    image.save(png, "PNG", compress_level=1)
    webp.unlink()
