"""Frozen protocol data shipped inside the package (catalog P1, inventory P2).

The JSON files here are written by ``release/build_catalog.py`` and read through
importlib.resources, so they resolve the same way from a checkout, a wheel or a zip.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

CATALOG_FILE = "libero_catalog.json"
INVENTORY_FILE = "libero_inventory.json"
OOD_CATALOG_FILE = "libero_ood_catalog.json"
OOD_INVENTORY_FILE = "libero_ood_inventory.json"
VALIDATION_FILE = "full_mode_validation.json"
INSTRUCTIONS_FILE = "libero_instructions.json"
"""The semantic perturbation's rewrites, written by ``release/build_instructions.py``."""
ENVIRONMENT_ROOM_FILE = "environment_room.json"
"""The environment cases with no room, written by ``release/build_environment_room.py``."""

DEMOS_FOLDER = "demos"
"""The demo profile's recorded demonstrations, written by ``tests/tools/make_demos.py``."""


def data_path(name: str) -> Traversable:
    """Locate a packaged data file by name (e.g. ``"libero_inventory.json"``)."""
    return files(__name__).joinpath(name)
