"""The lerobot venv the LeRobot tests share: built once a session, this checkout in it.

``tests/conftest.py`` makes :func:`build` the session fixture ``lerobot_python``, so the
bridge's tests (test_lerobot_bridge.py) and the export's (test_lerobot_export.py) use
the same venv: the lerobot the ``lerobot`` extra installs on its Python (0.4.4, the
newest for Python 3.11; 0.6.1 with its ``dataset`` extra on 3.12), with its torch from the
package index (about 6 GB of CUDA wheels), this checkout installed without its
dependencies (no simulator) plus what its serving part and its command line import.
uv makes the venv and installs into it: the same releases pip would choose, in about 25 s
from an empty cache where pip took 150 s (it unpacks torch's wheels in parallel). The
venv is the bridge's and the export's ground, not an install proof: the wheel's and the
sdist's pip installs are tested in test_install_*.py.

The venv's Python is the tests' own unless ``PYTEST_LIBERO_LEROBOT_PYTHON=3.12`` (or
3.11) says otherwise: the suite proves the bridge and the export against the lerobot of
the Python it runs on, and a run with the variable proves the other release.
``PYTEST_LIBERO_LEROBOT_VENV=DIR`` keeps the venv in DIR (built there when DIR does not
exist, reused when it does), so a developer installs once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from installs import interpreter, uv_install, uv_venv
from shared_once import used_once
from venvs import clean_env, run

ROOT = Path(__file__).resolve().parents[1]
RELEASES = {"3.11": ("lerobot==0.4.4", "0.4.4"), "3.12": ("lerobot[dataset]==0.6.1", "0.6.1")}
"""What is installed on each Python and the version that says it is there: the ``lerobot``
extra's environment markers (pyproject.toml) choose the same."""
VENV_VARIABLE = "PYTEST_LIBERO_LEROBOT_VENV"
PYTHON_VARIABLE = "PYTEST_LIBERO_LEROBOT_PYTHON"
BESIDE = ("websockets>=13", "msgpack>=1.0", "pytest>=8.2", "imageio-ffmpeg>=0.5")
"""What the checkout needs there besides lerobot's own dependencies: the server's wire
(websockets, msgpack), for ``python -m pytest_libero.cli``, pytest, and for the export's
reading of the evidence streams, ffmpeg (lerobot 0.4.4 brought it; 0.6 does not)."""


def build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A venv with lerobot, its torch and this checkout; its python. Built once a
    session: the simulator tests run last (tests/conftest.py), so a module fixture would
    be built again for the real-case tests, minutes later. Under xdist the workers share
    one venv (tests/shared_once.py), built by whichever asks first, and the last one done
    with it removes it.

    Fails (never skips) when the package index cannot be reached: these are the tests
    that prove the bridge and the export work with the real lerobot.
    """
    kept = os.environ.get(VENV_VARIABLE)
    if kept:
        yield _ready(Path(kept))
        return
    with used_once(tmp_path_factory, "lerobot", lambda folder: _ready(folder / "venv")) as folder:
        yield folder / "venv" / "bin" / "python"


def base_python() -> tuple[Path, str]:
    """The interpreter the venv is made with, and its minor version."""
    minor = os.environ.get(PYTHON_VARIABLE) or f"{sys.version_info.major}.{sys.version_info.minor}"
    if minor not in RELEASES:
        pytest.fail(f"{PYTHON_VARIABLE}={minor}: the lerobot extra installs on "
                    f"{', '.join(RELEASES)}")
    found = interpreter(minor)
    if found is None:
        pytest.fail(f"no Python {minor} here for the lerobot venv (pyenv install {minor})")
    return found, minor


def _ready(venv: Path) -> Path:
    """``venv`` with lerobot and this checkout in it, built or completed; its python."""
    python = venv / "bin" / "python"
    started = time.monotonic()
    base, minor = base_python()
    requirement, version = RELEASES[minor]
    if not python.exists():
        uv_venv(venv, base, timeout=120)  # from the base interpreter: nothing of this venv leaks in
    has = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('lerobot'))"],
                         capture_output=True, text=True, timeout=120, env=clean_env())
    if has.stdout.strip() != version:
        uv_install(python, requirement, timeout=1500, what=f"uv pip install {requirement} into {venv} "
                   "(needs the package index; torch with its CUDA wheels is about 6 GB)")
    # This checkout without its dependencies: the simulator stack is not needed there.
    uv_install(python, "--no-deps", "-e", str(ROOT), timeout=300,
               what="installing this checkout into the lerobot venv")
    uv_install(python, *BESIDE, timeout=300,
               what="installing the checkout's own few dependencies into the lerobot venv")
    where = run([str(python), "-c", "import lerobot, torch, pytest_libero.cli; "
                 "print(lerobot.__version__, torch.__version__, pytest_libero.cli.__file__)"],
                120, "importing lerobot in its venv")
    print(f"lerobot venv {venv} ready in {time.monotonic() - started:.0f} s: {where.stdout.strip()}")
    assert where.stdout.split()[2].startswith(str(ROOT)), where.stdout
    return python
