"""Shared helpers for the project's own tests."""

from __future__ import annotations

import os

import pytest

# Rendering is headless everywhere these tests run.
os.environ.setdefault("MUJOCO_GL", "egl")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the fast unit tests first so a broken room fails in seconds, not minutes."""
    items.sort(key=lambda item: item.get_closest_marker("simulator") is not None)
