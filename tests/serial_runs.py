"""A run of the real simulator that two test files read, made once for the test session.

test_scale_cases compares a serial run without set-up ahead with two xdist workers;
test_prebuild compares it with a serial run that sets up ahead. One selection serves
both, so the serial run is made once (tests/shared_once.py) and only read here. And
the poll for a run's first results, which the tests that kill a run share.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from shared_once import made_once

from harness.runs import run_pytest

CASES = ["--libero-profile=zero", "--libero-scope=development", "--libero-task-ids=0-2",
         "--libero-budget-mode=decisions", "--libero-max-policy-calls=3",
         "--libero-replan-interval=5"]
"""Three cases of fifteen controls: observations after actions, compared across modes."""

SAID = "said.json"
"""The serial run's exit code, output lines and what it left in its own TMPDIR (where a
set-up done ahead would log until its turn)."""


def _serial_without_prebuild(folder: Path) -> None:
    # Not under the shared folder: under xdist that is too long a path for the
    # forkserver's socket, which lives in TMPDIR.
    scratch = Path(tempfile.mkdtemp(prefix="serial-"))
    try:
        done = run_pytest([*CASES, "-n", "0", "--libero-prebuild=off",
                           f"--libero-results={folder / 'results'}"], folder,
                          env={**os.environ, "TMPDIR": str(scratch)}, timeout=900)
        left = sorted(path.name for path in scratch.glob("pytest-libero-*"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (folder / SAID).write_text(json.dumps({"ret": done.returncode, "stdout": done.stdout,
                                           "stderr": done.stderr, "left_in_tmpdir": left}))


def serial_without_prebuild(
        tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pytest.RunResult, list[str]]:
    """``CASES`` run serially, each case set up at its turn: its results root, the run
    as pytester would have returned it, and what it left in its TMPDIR."""
    folder = made_once(tmp_path_factory, "serial-prebuild-off", _serial_without_prebuild)
    said = json.loads((folder / SAID).read_text())
    result = pytest.RunResult(said["ret"], said["stdout"].splitlines(), said["stderr"].splitlines(), 0.0)
    return folder / "results", result, said["left_in_tmpdir"]


def wait_for_results(root: Path, lines: int, timeout: float) -> Path:
    """The one results.jsonl under a results root (``<root>/zero/<run id>``), once it
    holds ``lines`` lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(root.glob("zero/*/results.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= lines:
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"no {lines} result line(s) under {root} after {timeout}s")
