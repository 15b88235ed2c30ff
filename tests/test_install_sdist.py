"""The sdist, installed with uv into a fresh venv: uv builds the wheel from it (hatchling
in an isolated build environment, as pip does), so a file the sdist leaves out fails
here. pip's own install is the wheel's (test_install_wheel.py); uv's is some 30 s
quicker, most of it pip compiling and copying the simulator stack.

What the installed package does is proven once, from the wheel (test_install_wheel.py,
install_checks.py): the demo, a perturbed run, verify, the report and evaluate(). Here
the sdist's install is shown to be those very files, byte for byte, and the zero smoke
runs from it; every command of the wheel's install then holds of the sdist's too, without
running each episode twice.
"""

from __future__ import annotations

import zipfile

import pytest
from install_checks import InstalledArtifact
from installs import Artifacts, Installed

pytestmark = [pytest.mark.install, pytest.mark.simulator]

WRITTEN_BY_THE_INSTALLER = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD",
                            "uv_build.json", "uv_cache.json"}
"""What the installer writes into the dist-info folder itself (pip's four, and uv's notes
of the build and its cache): not the wheel's."""


class TestSdist(InstalledArtifact):
    artifact = "sdist"
    installer = "uv"

    def test_the_install_is_the_wheel_s_files_byte_for_byte(self, installed: Installed,
                                                            artifacts: Artifacts) -> None:
        site = installed.site_packages()
        with zipfile.ZipFile(artifacts.wheel) as wheel:
            members = {name for name in wheel.namelist() if not name.endswith("/")}
            theirs = {name for name in members if name.rsplit("/", 1)[-1] not in WRITTEN_BY_THE_INSTALLER}
            differ = sorted(name for name in theirs if (site / name).read_bytes() != wheel.read(name))
        assert not differ, f"the sdist installs other bytes than the wheel holds: {differ}"
        record = {name for name in installed.record()
                  if "__pycache__" not in name and not name.startswith("../")
                  and name.rsplit("/", 1)[-1] not in WRITTEN_BY_THE_INSTALLER}
        assert record == theirs, (f"only the sdist's install: {sorted(record - theirs)}; "
                                  f"only the wheel: {sorted(theirs - record)}")
