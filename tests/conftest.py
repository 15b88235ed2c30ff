"""Shared helpers for the project's own tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import installs
import lerobot_venv
import pytest
from shared_once import made_once

# Rendering is headless everywhere these tests run.
os.environ.setdefault("MUJOCO_GL", "egl")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the fast unit tests first so a broken room fails in seconds, not minutes."""
    items.sort(key=lambda item: item.get_closest_marker("simulator") is not None)


@pytest.fixture(scope="session")
def lerobot_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The python of the lerobot venv (tests/lerobot_venv.py), built once a session for
    the bridge's tests and the export's alike."""
    yield from lerobot_venv.build(tmp_path_factory)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> installs.Artifacts:
    """This checkout's sdist and wheel, built once for the whole session, xdist's
    workers included (tests/installs.py, tests/shared_once.py)."""
    return installs.found(made_once(tmp_path_factory, "dist", installs.build))
