"""release/validate_schedule.py on a tiny sample: full mode matches the reference loop, the
verdict lands in the report full mode reads, and the script does catch a different
schedule (fast mode's seed moves libero_spatial task 3's cabinet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.simulator

SCRIPT = Path(__file__).resolve().parents[1] / "release" / "validate_schedule.py"


def validate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)


def test_full_mode_matches_the_reference_loop_and_is_recorded(tmp_path: Path) -> None:
    report = tmp_path / "validation.json"
    done = validate(tmp_path, "--suite", "libero_object", "--tasks", "0", "--states", "0,2",
                    "--actions", "rand6", "--record", str(report))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "A vs B: 2/2 episodes identical" in done.stdout
    verdict = json.loads(report.read_text())["suites"]["libero_object"]
    assert verdict["passed"] is True
    [run] = verdict["runs"]
    assert (run["episodes"], run["episodes_identical"], run["states"]) == (2, 2, [0, 2])
    assert run["observations"] == run["observations_identical"] >= 4


def test_a_schedule_that_differs_is_caught(tmp_path: Path) -> None:
    done = validate(tmp_path, "--schedule-a", "fast", "--suite", "libero_spatial", "--tasks", "3",
                    "--states", "0", "--actions", "rand1")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "A vs B: 0/1 episodes identical" in done.stdout
    assert "DIFFER" in done.stdout
