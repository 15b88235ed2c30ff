"""The sdist, installed with pip into a fresh venv, runs the product (install_checks.py):
pip builds the wheel from it, so a file the sdist leaves out fails here."""

from __future__ import annotations

import pytest
from install_checks import InstalledProduct

pytestmark = [pytest.mark.install, pytest.mark.simulator]


class TestSdist(InstalledProduct):
    artifact = "sdist"
