"""Which requirements of the bundle's own distributions the machine's packages miss:
``python3 requirements_met.py BUNDLE``, run with the bundle's folders on the path.

The bundle carries only what the GPU image lacks (``gpu_image.txt``); the rest comes
from the image at whatever version it holds there. One line per requirement not met,
or one line saying all are: read before the figures, it explains a failed import.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys

from packaging.requirements import Requirement

STAND_INS = {"opencv-python": "opencv-python-headless"}


def found_version(name: str) -> str | None:
    for candidate in (name, STAND_INS.get(name.lower())):
        if candidate:
            try:
                return metadata.version(candidate)
            except metadata.PackageNotFoundError:
                pass
    return None


def gaps(bundle: str) -> list[str]:
    missed = []
    for dist in metadata.distributions():
        if not str(dist.locate_file("")).startswith(bundle):
            continue
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            version = found_version(requirement.name)
            if version is None or not requirement.specifier.contains(version, prereleases=True):
                missed.append(f"{dist.metadata['Name']} wants {requirement}, found {version}")
    return sorted(set(missed))


if __name__ == "__main__":
    found = gaps(sys.argv[1])
    print("\n".join(found) if found else "every requirement of the bundle's packages is met")
