"""What the GPU machines' image already holds (``gpu_image.txt``), so the bundle carries
only what is missing there or needed at another version."""

from __future__ import annotations

import re
from pathlib import Path

IMAGE_FILE = Path(__file__).with_name("gpu_image.txt")
PROVIDED_BY: dict[str, str] = {"opencv-python": "opencv-python-headless"}
"""A requirement the image meets under another distribution's name (the same ``cv2``)."""


def canonical(name: str) -> str:
    """A distribution name as the index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: Path = IMAGE_FILE) -> dict[str, str | None]:
    """Each distribution of the image, with the version seen there (None: not seen)."""
    found: dict[str, str | None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[canonical(name)] = version or None
    return found


def provided(name: str, image: dict[str, str | None]) -> bool:
    """Whether the image meets a requirement on ``name`` (by that name or its stand-in)."""
    key = canonical(name)
    return key in image or canonical(PROVIDED_BY.get(key, "")) in image
