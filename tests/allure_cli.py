"""Allure 3's command line, where the tests find it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pytest_libero.report.allure_config import ALLURE_ENV

# Allure 3 from npm; CI installs it with
#   npm install --no-audit --no-fund --prefix /tmp/pytest-libero-tools/allure3 allure@3.18.0
CI_ALLURE3 = Path("/tmp/pytest-libero-tools/allure3/node_modules/.bin/allure")


def allure3() -> str | None:
    """Allure 3's CLI: $PYTEST_LIBERO_ALLURE, an `allure` 3.x on PATH, or CI's install."""
    candidates = [os.environ.get(ALLURE_ENV), shutil.which("allure"),
                  str(CI_ALLURE3)]
    for candidate in candidates:
        if not candidate or not Path(candidate).is_file():
            continue
        try:
            version = subprocess.run([candidate, "--version"], capture_output=True,
                                     text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if version.startswith("3."):
            return candidate
    return None
