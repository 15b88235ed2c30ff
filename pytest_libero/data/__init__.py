"""Frozen protocol data shipped inside the package (catalog P1, inventory P2).

The JSON files here are written by ``catalog/build_catalog.py`` and read through
importlib.resources, so they resolve the same way from a checkout, a wheel or a zip.
"""

from __future__ import annotations

import sys
from importlib.resources import files

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable


def data_path(name: str) -> Traversable:
    """Locate a packaged data file by name (e.g. ``"libero_inventory.json"``)."""
    return files(__name__).joinpath(name)
