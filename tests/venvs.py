"""Commands in venvs other than the tests' own: an environment that points nowhere else,
and a run that fails the test with its output."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest


def clean_env(**extra: str) -> dict[str, str]:
    """This environment less what would point another venv at this one."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def run(command: list[str], timeout: float, what: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (in :func:`clean_env` unless ``env`` is given); fail the test with
    its output when it fails or outlasts ``timeout``."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=kwargs.pop("env", clean_env()), **kwargs)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what} did not finish in {timeout:.0f} s: {' '.join(command)}\n"
                    f"{_text(exc.stdout)[-3000:]}\n{_text(exc.stderr)[-3000:]}")
    assert done.returncode == 0, (
        f"{what} failed (exit {done.returncode}): {' '.join(command)}\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return done


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
