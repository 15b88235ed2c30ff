"""A plain ``pip install pytest-libero`` (no extras) gives ``pytest --alluredir`` and
the demo's shipped recordings.

This is the whole real install, not a cheaper stand-in: a fresh venv and pip
resolving this checkout's own dependencies from the package index. Measured here it
takes 70-120 s (2 shared CPU cores; the simulator wheels are the bulk of it) and
2.3 GB, removed afterwards. That is under the 3 minutes that would have justified a
partial install (``--no-deps`` for the simulator wheels), so none is used. It fails if
allure-pytest goes back into an extra: pytest then exits 4 on an unknown
``--alluredir``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.runs import pytest_argv

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def plain_venv(tmp_path: Path) -> Iterator[Path]:
    """A new venv with this checkout installed without extras; its bin folder."""
    venv = tmp_path / "venv"
    # venv builds on the base interpreter: nothing of this [test] venv leaks in.
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True, text=True, timeout=900, env=_clean_env(),
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    try:
        yield venv / "bin"
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def _clean_env() -> dict[str, str]:
    """This process's environment less what would point the new venv elsewhere."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.mark.install
def test_plain_install_accepts_alluredir(plain_venv: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = _clean_env()
    python = str(plain_venv / "python")
    where = subprocess.run(
        [python, "-c", "import allure_pytest, pytest_libero; print(pytest_libero.__file__)"],
        capture_output=True, text=True, cwd=work, env=env, timeout=120,
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(plain_venv.parent))  # the install, not ROOT

    # The user's command, collected: the shipped suite with the Allure option.
    collected = subprocess.run(
        pytest_argv("--libero-profile=zero", f"--alluredir={work / 'allure-results'}",
                    "--collect-only", "-q", python=python),
        capture_output=True, text=True, cwd=work, env=env, timeout=300,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "2 tests collected" in collected.stdout

    # The demo's recordings ship in the wheel: its default selection collects, and the
    # policy finds every recording beside its provenance in the installed package.
    demo = subprocess.run(
        pytest_argv("--libero-profile=demo", "--collect-only", "-q", python=python),
        capture_output=True, text=True, cwd=work, env=env, timeout=300,
    )
    assert demo.returncode == 0 and "5 tests collected" in demo.stdout, demo.stdout + demo.stderr
    loaded = subprocess.run(
        [python, "-c", "from pytest_libero.policy.builtin import DemoPolicy; "
         "print(sorted(DemoPolicy().metadata['demos']))"],
        capture_output=True, text=True, cwd=work, env=env, timeout=120,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.count("libero_") == 5, loaded.stdout

    helped = subprocess.run([str(plain_venv / "pytest-libero"), "report", "--help"],
                            capture_output=True, text=True, cwd=work, env=env, timeout=120)
    assert helped.returncode == 0 and "ALLURE_RESULTS_DIR" in helped.stdout, helped.stderr
