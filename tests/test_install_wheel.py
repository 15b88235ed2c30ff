"""The wheel as users get it: what it holds, its metadata as the index reads it, and the
product run from a plain pip install of it (install_checks.py), inside a user's own
project whose pytest settings differ from ours in every way that could break the suite.

The venv is the project's ``.venv``, as a user's often is: the shipped suite is then
collected from a folder under the user's rootdir, their conftest above it.
"""

from __future__ import annotations

import email
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from install_checks import InstalledProduct, run_traced
from installs import ROOT, Artifacts, Installed, admitted_minors, in_work, refused_minors, requires_python

from harness.runs import run_folder, run_records

pytestmark = pytest.mark.install

USER_PYPROJECT = """\
[project]
name = "my-robot"
version = "0.3.0"

[tool.pytest.ini_options]
minversion = "8.0"
testpaths = ["tests"]
addopts = ["--strict-markers", "--strict-config", "-ra", "--import-mode=importlib"]
markers = ["arm: needs the arm's driver"]
python_files = ["check_*.py"]
python_functions = ["check_*"]
filterwarnings = ["error"]
xfail_strict = true
"""
USER_CONFTEST = """\
import pytest


@pytest.fixture
def arm():
    return "ready"
"""
USER_TEST = """\
import pytest


@pytest.mark.arm
def check_arm_is_ready(arm):
    assert arm == "ready"
"""


def tracked(prefix: str) -> set[str]:
    """The checkout's committed files under ``prefix``."""
    listed = subprocess.run(["git", "ls-files", "-z", prefix], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode()
    return {name for name in listed.split("\0") if name}


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(archive.read(name))


def test_the_wheel_holds_every_package_file(artifacts: Artifacts) -> None:
    with zipfile.ZipFile(artifacts.wheel) as archive:
        names = set(archive.namelist())
    missing = sorted(tracked("pytest_libero") - names)
    assert not missing, f"committed but not in the wheel: {missing}"
    outside = sorted(n for n in names if not n.startswith(("pytest_libero/", "pytest_libero-")))
    assert not outside, f"the wheel ships more than the package: {outside}"


def test_the_sdist_holds_the_package_and_its_papers(artifacts: Artifacts) -> None:
    with tarfile.open(artifacts.sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        names = {name.removeprefix(f"{top}/") for name in archive.getnames()}
    wanted = tracked("pytest_libero") | {"LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml"}
    wanted |= tracked("examples")
    missing = sorted(wanted - names)
    assert not missing, f"committed but not in the sdist: {missing}"


def test_the_metadata_is_what_the_index_shows(artifacts: Artifacts) -> None:
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict",
                              str(artifacts.wheel), str(artifacts.sdist)],
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    meta = wheel_metadata(artifacts.wheel)
    version = re.search(r'^__version__ = "(.+)"$', (ROOT / "pytest_libero" / "__init__.py").read_text(),
                        re.MULTILINE)
    assert version is not None and meta["Version"] == version.group(1)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"], "two version numbers"
    assert meta["Requires-Python"] == str(requires_python())
    classifiers = set(meta.get_all("Classifier") or [])
    assert {f"Programming Language :: Python :: {m}" for m in admitted_minors()} <= classifiers
    assert not {f"Programming Language :: Python :: {m}" for m in refused_minors()} & classifiers
    urls = {line.split(",")[0] for line in meta.get_all("Project-URL") or []}
    assert {"Homepage", "Documentation", "Changelog", "Issues"} <= urls, urls
    assert meta["License-Expression"] == "MIT" and meta["License-File"] == "LICENSE"
    with zipfile.ZipFile(artifacts.wheel) as archive:
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())
    description = meta.get_payload()
    assert isinstance(description, str) and "## The three commands that matter" in description
    relative = re.findall(r"\]\((?!https?://|#)([^)]+)\)", description)
    assert not relative, f"links that break on the index page: {relative}"


class TestWheel(InstalledProduct):
    artifact = "wheel"

    @classmethod
    def venv_folder(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        return tmp_path_factory.mktemp("project") / ".venv"

    @pytest.fixture(scope="class")
    @classmethod
    def project(cls, installed: Installed) -> Path:
        """The user's project around the venv: its settings, conftest and own test."""
        root = installed.venv.parent
        (root / "pyproject.toml").write_text(USER_PYPROJECT)
        (root / "conftest.py").write_text(USER_CONFTEST)
        (root / "tests").mkdir()
        (root / "tests" / "check_arm.py").write_text(USER_TEST)
        return root

    def test_plain_pytest_runs_only_the_users_tests(self, project: Path, installed: Installed) -> None:
        done = in_work(installed, project, ["-m", "pytest", "-v"], timeout=300)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert "check_arm_is_ready PASSED" in done.stdout and "1 passed" in done.stdout, done.stdout
        assert "LIBERO" not in done.stdout and not (project / "libero-results").exists()

    def test_the_users_settings_leave_the_shipped_suite_whole(
            self, project: Path, installed: Installed) -> None:
        # A frame every 5 controls: no one reads this case's video, the demo's own run checks it.
        ran = run_traced(installed, project, [
            "-m", "pytest", "-v", "--libero-profile=demo", "--libero-scope=task_coverage",
            "--libero-suite=libero_goal", "--libero-task-ids=6", "--libero-video-stride=5"])
        assert ran.done.returncode == 0, ran.output[-4000:]
        assert "1 passed" in ran.done.stdout and "check_arm" not in ran.done.stdout, ran.output[-4000:]
        assert "test_libero_task[libero_goal-06] PASSED" in ran.done.stdout, ran.done.stdout
        records = run_records(run_folder(ran.work / "libero-results", "demo"))
        assert [(r["case"], r["outcome"]) for r in records] == [("libero_goal-06", "success")]
