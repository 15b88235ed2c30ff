"""Every Python that ``requires-python`` admits installs the wheel and runs a real case
(the tests' own in test_install_wheel.py);
the versions just outside it are refused by the installer in one line; uv installs and
runs it as pip does; a machine whose GL stack cannot render is one line before any case.

An admitted interpreter that this machine lacks is a skip that names it and the fix.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from install_checks import SMOKE_CAP
from installs import (
    Artifacts,
    Installed,
    admitted_minors,
    in_work,
    install,
    interpreter,
    refused_minors,
    requires_python,
)

from harness.runs import run_folder, run_records

pytestmark = pytest.mark.install

ONE_CASE = ("--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
            "--libero-task-ids=0", *SMOKE_CAP)


def boundary_refusals() -> list[str]:
    """The refused versions right below and right above the admitted range."""
    admitted = [tuple(map(int, m.split("."))) for m in admitted_minors()]
    below, above = min(admitted), max(admitted)
    edges = {f"{below[0]}.{below[1] - 1}", f"{above[0]}.{above[1] + 1}"}
    return [minor for minor in refused_minors() if minor in edges]


def base_or_skip(minor: str) -> Path:
    found = interpreter(minor)
    if found is None:
        pytest.skip(f"Python {minor} is not on this machine (requires-python "
                    f"{requires_python()} names it): install it, e.g. `pyenv install {minor}`, "
                    "to test it")
    return found


def runs_one_case(installed: Installed, work: Path) -> None:
    work.mkdir()
    done = in_work(installed, work, ["-m", "pytest", *ONE_CASE])
    assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout[-4000:] + done.stderr[-4000:]
    records = run_records(run_folder(work / "libero-results", "zero"))
    assert [(r["case"], r["outcome"]) for r in records] == [("libero_10-00", "failure")], records


def other_admitted_minors() -> list[str]:
    """The admitted Pythons but the tests' own: a fresh pip install of the wheel on that
    one runs its cases in test_install_wheel.py (and with uv below)."""
    own = f"{sys.version_info.major}.{sys.version_info.minor}"
    return [minor for minor in admitted_minors() if minor != own]


@pytest.mark.simulator
@pytest.mark.parametrize("minor", other_admitted_minors())
def test_an_admitted_python_installs_and_runs_a_case(
        minor: str, artifacts: Artifacts, tmp_path: Path) -> None:
    installed = install(artifacts.wheel, tmp_path / "venv", base_or_skip(minor))
    said = in_work(installed, tmp_path, ["-m", "pytest", "--version"])
    assert said.returncode == 0
    version = in_work(installed, tmp_path, ["python", "-c", "import sys; print(sys.version_info[:2])"])
    assert version.stdout.strip() == str(tuple(map(int, minor.split(".")))), version.stdout
    runs_one_case(installed, tmp_path / "work")


@pytest.mark.parametrize("minor", boundary_refusals())
def test_a_python_outside_the_range_is_refused_in_one_line(
        minor: str, artifacts: Artifacts, tmp_path: Path) -> None:
    base = base_or_skip(minor)
    subprocess.run([str(base), "-m", "venv", str(tmp_path / "venv")], check=True, timeout=180)
    done = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-m", "pip", "install",
                           str(artifacts.wheel)], capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, done.stderr
    assert "requires a different Python" in errors[0] and str(requires_python()) in errors[0], errors


def above_the_range() -> list[str]:
    return [minor for minor in boundary_refusals() if minor > max(admitted_minors())]


@pytest.mark.parametrize("minor", above_the_range())
def test_uv_on_a_python_past_the_range_installs_light_and_each_entry_says_so_in_one_line(
        minor: str, artifacts: Artifacts, tmp_path: Path) -> None:
    # uv ignores requires-python's upper bound: the simulator pins' markers keep it from
    # building mujoco from source, and the plugin, the command and evaluate() say why not.
    installed = install(artifacts.wheel, tmp_path / "venv", base_or_skip(minor), installer="uv")
    brought = {p.name for p in installed.site_packages().iterdir()}
    assert not {"mujoco", "robosuite", "libero"} & brought, sorted(brought)
    said = f"pytest-libero runs on Python 3.11 and 3.12 (its pinned MuJoCo 3.2.3 has wheels for those " \
           f"only), and this is Python {minor}"
    entries = [(["-m", "pytest", "-q"], 4, f"ERROR: {said}"),
               (["pytest-libero", "merge", "run"], 4, f"pytest-libero: error: {said}"),
               (["python", "-c", "from pytest_libero import evaluate"], 1, f"ImportError: {said}")]
    for argv, code, line in entries:
        done = in_work(installed, tmp_path, argv)
        told = [text for text in done.stderr.splitlines() if "Python 3.11 and 3.12" in text]
        assert done.returncode == code and len(told) == 1 and told[0].startswith(line), done.stderr


@pytest.fixture(scope="module")
def uv_installed(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = interpreter(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert base is not None
    return install(artifacts.wheel, tmp_path_factory.mktemp("uv") / "venv", base, installer="uv")


@pytest.mark.simulator
def test_uv_installs_and_runs_a_case(uv_installed: Installed, tmp_path: Path) -> None:
    runs_one_case(uv_installed, tmp_path / "work")


@pytest.mark.simulator
def test_a_machine_without_a_gl_driver_is_one_line_before_any_case(
        uv_installed: Installed, tmp_path: Path) -> None:
    """glvnd's libEGL with no vendor library to load, as where libegl-mesa0 (or the
    NVIDIA driver) is not installed: the renderer is measured before the run folder."""
    done = in_work(uv_installed, tmp_path, ["-m", "pytest", *ONE_CASE], timeout=300,
                   __EGL_VENDOR_LIBRARY_DIRS=str(tmp_path / "no-vendors"), MUJOCO_GL="egl")
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: MuJoCo cannot render with MUJOCO_GL=egl"), lines
    assert "apt-get install libegl1" in lines[0]
    assert not (tmp_path / "libero-results").exists()
