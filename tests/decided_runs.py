"""Whole runs that decide early, without the simulator: the plugin with the scripted
adapter (tests/decide_adapter.py), a case in milliseconds; shared by the decide tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from harness.runs import run_pytest

TESTS = Path(__file__).resolve().parent
SCRIPTED = ("--libero-profile=zero", "--libero-adapter=decide_adapter:Adapter",
            "--libero-isolation=none", "--libero-scope=task_coverage", "--libero-suite=libero_90",
            "--libero-budget-mode=decisions", "--libero-max-policy-calls=1",
            "--libero-replan-interval=1", "--libero-evidence=replayable")


def run(where: Path, *args: str, success: str = "", slow: str = "",
        held: str | None = None) -> subprocess.CompletedProcess[str]:
    """pytest with the scripted adapter; ``success``: the task indices that succeed;
    ``slow``: those that take three seconds; ``held``: the failures that get one goal
    predicate of two (None: the episodes keep no goal progress)."""
    env = {**os.environ, "LIBERO_FAKE_SUCCESS": success, "LIBERO_FAKE_SLOW": slow,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    env.pop("LIBERO_FAKE_HELD", None)
    if held is not None:
        env["LIBERO_FAKE_HELD"] = held
    return run_pytest(["-q", *SCRIPTED, *args], where, env=env, timeout=300)


def read(folder: Path, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((folder / name).read_text())
    return found


def cases(ids: range) -> list[str]:
    return [f"libero_90-{i:02d}" for i in ids]
