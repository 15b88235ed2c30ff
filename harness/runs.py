"""Run pytest as its own process and read back the run folder the plugin wrote.

Records are read through ``pytest_libero.results.layout.read_results``, the reader the
plugin's own merge, resume and verify use, so a helper never disagrees with the product
about what a run folder holds (a torn last line, say).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_libero.results.layout import RUN_NAME, read_results


def pytest_argv(*args: str, python: str = sys.executable) -> list[str]:
    """``python -m pytest`` without the cache plugin (nothing left in the work folder) and
    without hypothesis' (no run of the plugin uses it, and it costs each child pytest and
    each of its xdist workers about 0.2 s of CPU to start)."""
    return [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args]


def run_pytest(args: Sequence[str], cwd: Path, *, env: Mapping[str, str] | None = None,
               timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """pytest with ``args`` in ``cwd``, to the end; its output captured as text."""
    return subprocess.run(pytest_argv(*args), cwd=cwd, env=None if env is None else dict(env),
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_folders(root: Path, profile: str = "*") -> list[Path]:
    """Every run folder under a results root (``<root>/<profile>/<run id>``, and a
    sharded run's shard folders), in name order."""
    return sorted(path.parent for path in Path(root).glob(f"{profile}/**/{RUN_NAME}"))


def run_folder(root: Path, profile: str = "*") -> Path:
    """The one run folder under ``root``; an error naming what is there otherwise."""
    found = run_folders(root, profile)
    if len(found) != 1:
        raise AssertionError(f"expected one run folder under {root}/{profile}, found {found}")
    return found[0]


def run_records(run: Path) -> list[dict[str, Any]]:
    """The case records of one run folder, in the order they were written."""
    return [dict(record) for record in read_results(run)]


def records_by_case(run: Path) -> dict[str, dict[str, Any]]:
    return {record["case"]: record for record in run_records(run)}


def all_records(root: Path) -> list[dict[str, Any]]:
    """Every record of every run folder under a results root (shards included)."""
    return [record for run in run_folders(root) for record in run_records(run)]
