"""Perturbed runs of libero_10 task 0 that two test files read, made once for the session.

test_perturb_cases (camera, light, robot, noise) and test_language_cases (object,
semantic) each assert their kinds against the twin of the same run, and each repeats
one kind in a second run: one run holds every kind of both, and one second run both
repeated kinds (tests/shared_once.py). Readers that edit a run copy it first.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from shared_once import made_once

from harness.runs import records_by_case, run_pytest

TINY = ["--libero-profile=zero", "--libero-budget-mode=decisions", "--libero-max-policy-calls=1",
        "--libero-replan-interval=1", "--libero-track=rgb+proprio", "--libero-scope=development",
        "--libero-task-ids=0"]
"""One policy call of one control per case."""
PERTURB = "camera:1,camera:2,camera:4,light:1,light:2,light:4,robot:2,noise:2"
"""test_perturb_cases's kinds."""
LANGUAGE = "object:1,object:4,semantic:4"
"""test_language_cases's kinds."""
AGAIN = "noise:2,object:4"
"""The kinds each file repeats in a second run (noise, object): their bytes are their own."""

Run = tuple[Path, dict[str, dict[str, Any]]]
"""A run folder and its records by case."""


def _run(run_id: str, perturb: str) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        done = run_pytest(["-q", *TINY, f"--libero-perturb={perturb}", f"--libero-run-id={run_id}"],
                          folder, timeout=900)
        assert (folder / "libero-results" / "zero" / run_id / "results.jsonl").is_file(), (
            done.stdout[-3000:] + done.stderr[-3000:])
    return make


def shared(tmp_path_factory: pytest.TempPathFactory, run_id: str) -> Run:
    """The run ``perturbed`` (every kind of both files) or ``again`` (``AGAIN``)."""
    perturb = {"perturbed": f"{PERTURB},{LANGUAGE}", "again": AGAIN}[run_id]
    folder = made_once(tmp_path_factory, f"perturb-{run_id}", _run(run_id, perturb))
    run = folder / "libero-results" / "zero" / run_id
    return run, records_by_case(run)


def copy_of(run: Path, where: Path) -> Path:
    """A copy of a shared run folder that a test may edit (a run folder is verified from
    its own cases/)."""
    return Path(shutil.copytree(run, where / run.name, ignore=shutil.ignore_patterns("verify.json")))
