"""A folder that several test files read, made once for the whole test session.

Under xdist every worker is a pytest session of its own, so a session fixture is made
once per worker: the built wheel and sdist, a simulator run that several files read. The
folder made here lives beside the workers' own temporary folders, where each worker
finds it: whichever worker asks first makes it while holding a lock, the other waits for
it (it would otherwise spend the same minutes making its own copy). Readers that change
what they read copy it first.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MADE = ".made"
"""Written once ``make`` returned: a folder without it was left half made (its maker
failed or was killed) and is made again."""


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's shared folders live: beside the xdist workers' own temporary
    folders, or in this session's own when it runs alone."""
    base = tmp_path_factory.getbasetemp()
    root = (base if os.environ.get("PYTEST_XDIST_WORKER") is None else base.parent) / "shared"
    root.mkdir(exist_ok=True)
    return root


@contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """An exclusive lock between the workers, held for the block."""
    with lock_file.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """The folder ``name``, filled by ``make(folder)`` the first time any worker asks."""
    root = shared_root(tmp_path_factory)
    with locked(root / f"{name}.lock"):
        return _made(root / name, make)


@contextmanager
def used_once(tmp_path_factory: pytest.TempPathFactory, name: str,
              make: Callable[[Path], object]) -> Iterator[Path]:
    """:func:`made_once`'s folder, removed when the last worker using it is done with it:
    for a folder too large to leave behind (the lerobot venv, 8 GB)."""
    root = shared_root(tmp_path_factory)
    lock, users = root / f"{name}.lock", root / f"{name}.users"
    with locked(lock):
        folder = _made(root / name, make)
        _count(users, +1)
    try:
        yield folder
    finally:
        with locked(lock):
            if _count(users, -1) == 0:
                shutil.rmtree(folder, ignore_errors=True)


def _made(folder: Path, make: Callable[[Path], object]) -> Path:
    """``folder`` filled by ``make`` unless a maker finished it; called under its lock."""
    if not (folder / MADE).exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        make(folder)
        (folder / MADE).touch()
    return folder


def _count(users: Path, change: int) -> int:
    """How many workers use a folder, after ``change``; called under its lock."""
    count = (int(users.read_text()) if users.exists() else 0) + change
    users.write_text(str(count))
    return count
