"""Measure which environment cases have no room on their table, and freeze the answer.

    MUJOCO_GL=egl python release/build_environment_room.py -j 2      # every native task, levels 1-4
    MUJOCO_GL=egl python release/build_environment_room.py --tasks libero_goal-05 --check
    MUJOCO_GL=egl python release/build_environment_room.py --tasks libero_object-00 --update

The environment kind puts level N's distractors on the table clear of every other body
and goal region by a margin (perturb/kinds/environment.py). Whether a task's table has room
for them is known only by trying, so this script sets up every native task's
environment case at each level exactly as a run does (the adapter's ``LiberoEpisode``
on the task's fast-mode init state: build, distractors, every draw and redraw,
settling and judging) and writes the cases whose every draw was rejected to
``pytest_libero/data/environment_room.json`` with the adapter's reason. Collection
reads that table (perturb/kinds/environment.py), so such a case is skipped before it runs.

About 11 s a case on this machine's CPU; 520 cases take about 50 minutes with ``-j 2``.
``--check`` sets up the given tasks again and compares them with the committed table
(exit 1 on a difference), without writing; ``--update`` replaces the given tasks' rows
(after a change that only they feel).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from pytest_libero.audit.verify import installed_versions  # noqa: E402 (after the path)
from pytest_libero.catalog.entries import load_catalog  # noqa: E402
from pytest_libero.data import ENVIRONMENT_ROOM_FILE  # noqa: E402
from pytest_libero.perturb.kinds.environment import ROOM_SCHEMA as SCHEMA  # noqa: E402
from pytest_libero.perturb.kinds.environment import draw_basis  # noqa: E402
from pytest_libero.perturb.levels import LEVELS  # noqa: E402

TABLE_PATH = REPO_ROOT / "pytest_libero" / "data" / ENVIRONMENT_ROOM_FILE
RECORDED_BUILDER = "catalog/build_environment_room.py"
"""The builder's name as the committed table records it (its ``builder``): the script's
folder was called ``catalog/`` when the table was measured, and a rebuild writes the same
bytes; the recorded name stays until the table is measured again for another reason."""
NO_ROOM = "has no room for environment"
"""What the adapter's refusal says when every draw was rejected (adapters/libero.py)."""


def measure_task(task: str) -> tuple[str, dict[int, str | None], dict[int, str], float]:
    """Set up ``task``'s environment case at every level: (task, {level: the adapter's
    reason when it has no room, else None}, {level: any other failure}, seconds). Any
    other failure is a fault to mend, not a property of the table: it is reported, and
    the table is not written."""
    from pytest_libero.adapters.libero import LiberoEpisode

    [entry] = [e for e in load_catalog().entries if e.task_id == task and e.state is None]
    found: dict[int, str | None] = {}
    faults: dict[int, str] = {}
    started = time.perf_counter()
    for level in LEVELS:
        try:
            LiberoEpisode(entry.perturbed("environment", level), track="rgb", control_cap=1,
                          monitor_safety=False).close()
            found[level] = None
        except Exception as exc:
            cause = str(exc.__cause__ or exc)
            if NO_ROOM in cause:
                found[level] = cause
            else:
                faults[level] = f"{type(exc).__name__}: {exc}"
    return task, found, faults, time.perf_counter() - started


def measure(tasks: list[str], jobs: int) -> tuple[dict[str, dict[int, str | None]], list[str]]:
    """Every task measured, in worker processes of their own (spawned: the simulator
    and its renderer do not survive a fork); the rows and the faults met."""
    results: dict[str, dict[int, str | None]] = {}
    faults: list[str] = []
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        for done, (task, found, failed, seconds) in enumerate(pool.map(measure_task, tasks), start=1):
            results[task] = found
            faults += [f"{task}~environment{level}: {why}" for level, why in failed.items()]
            refused = [level for level, reason in found.items() if reason is not None]
            print(f"[{done}/{len(tasks)}] {task}: {seconds:.1f} s"
                  + (f", no room at level {', '.join(map(str, refused))}" if refused else "")
                  + (f", FAULT at level {', '.join(map(str, failed))}" if failed else ""),
                  flush=True)
    return results, faults


def table_of(results: dict[str, dict[int, str | None]]) -> dict[str, Any]:
    return {"schema": SCHEMA, "builder": RECORDED_BUILDER,
            "draw_basis": draw_basis(), "installed": installed_versions(),
            "measured_on": "each task's fast-mode init state (index 0)",
            "levels": list(LEVELS), "checked": sorted(results),
            "no_room": {f"{task}~environment{level}": reason
                        for task, found in results.items()
                        for level, reason in found.items() if reason is not None}}


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def differences(committed: dict[str, Any], results: dict[str, dict[int, str | None]]) -> list[str]:
    """How measured rows differ from the committed table (a task it never checked counts)."""
    found = []
    for task, levels in results.items():
        if task not in committed["checked"]:
            found.append(f"{task}: not in the committed table")
        for level, reason in levels.items():
            key = f"{task}~environment{level}"
            if committed["no_room"].get(key) != reason:
                found.append(f"{key}: committed {committed['no_room'].get(key)!r}, measured {reason!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", help="comma-separated task ids (e.g. libero_goal-05); all native ones "
                        "by default")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed table instead of writing it; exit 1 on a difference")
    parser.add_argument("--update", action="store_true",
                        help="replace the given tasks' rows in the committed table")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    native = [e.task_id for e in load_catalog().entries if e.state is None]
    tasks = native if args.tasks is None else args.tasks.split(",")
    unknown = sorted(set(tasks) - set(native))
    if unknown:
        parser.error(f"not native task ids: {', '.join(unknown)} (e.g. libero_goal-05)")
    if not (args.check or args.update) and args.tasks is not None:
        parser.error("the table is written from every native task; --tasks goes with --check or --update")
    results, faults = measure(tasks, args.jobs)
    if faults:
        print("set-up failed other than for room (mend these; nothing written):\n" + "\n".join(faults))
        return 2
    if args.check:
        diff = differences(json.loads(TABLE_PATH.read_text()), results)
        print("\n".join(diff) if diff else f"{TABLE_PATH.name}: the {len(tasks)} tasks agree")
        return 1 if diff else 0
    if args.update:
        committed = json.loads(TABLE_PATH.read_text())
        if committed["draw_basis"] != draw_basis():
            print(f"{TABLE_PATH.name} was measured under other draws: rebuild it whole")
            return 1
        rows = {task: {level: committed["no_room"].get(f"{task}~environment{level}") for level in LEVELS}
                for task in committed["checked"]}
        results = {**rows, **results}
    TABLE_PATH.write_text(render(table_of(results)))
    print(f"wrote {TABLE_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
