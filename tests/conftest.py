"""Shared helpers for the project's own tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import file_times
import installs
import lerobot_venv
import pytest
from shared_once import made_once

# Rendering is headless everywhere these tests run.
os.environ.setdefault("MUJOCO_GL", "egl")

# Bytecode is cached, whatever the shell says: with PYTHONDONTWRITEBYTECODE set, every child
# python (pytester runs, xdist workers, case forkservers, installed products) compiles its
# modules again, and pytest rewrites the plugin's ~280 modules again, 1-2 s a child.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--file-times", type=Path, metavar="PATH",
                     help="write each test file's worker seconds to PATH (tests/file_times.py)")


def pytest_configure(config: pytest.Config) -> None:
    # xdist hands out --dist loadfile's files in the collected order only when told not to
    # sort them by their number of tests first (its --loadscope-reorder, on by default):
    # the order below is by measured seconds.
    config.option.loadscopereorder = False
    out = config.getoption("--file-times")
    if out is not None:
        config.pluginmanager.register(file_times.Recorder(out), "file-times")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fast unit tests first, so a broken room fails in seconds; then the simulator
    files, the longest first, so that no long file is left to the end (tests/file_times.py)."""
    file_times.order(items, file_times.measured_seconds())


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
