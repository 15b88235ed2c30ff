"""What a run costs beyond its cases' phases: one short real run, timed from outside.

The phase probe (``adapters/cost_probe.py``) times a build, resets and controls in a
bare process. A run adds its own start (pytest, the plugin's checks, the case host that
imports the simulator, the first scene compiled cold), its finish (records, summary,
reports), and, per policy call, the observation made, delivered and kept as evidence.
One case of the zero policy at 20 calls (task 0 of the first suite the plan meets; a
call's own work is a small share of an episode: a shorter one leaves it in the noise), run
as a user runs it in a scratch folder, gives both: the seconds its record does not account
for, and its episode less its physics and images, per call.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_libero import children
from pytest_libero.files import tail_of
from pytest_libero.planning.load import BUSY_WAITING, busy_cpu_s, cpu_waiting_s, waiting_share
from pytest_libero.results.layout import RESULTS_NAME

CPU_FACTOR_LOWEST, CPU_FACTOR_HIGHEST = 1.0, 4.0
"""A real episode takes at least the probe's stepping CPU; more than four times it is no
measure of this run (another process was busy after all)."""
CALLS = 20
REPLAN = 5
RUN_TIMEOUT_S = 600.0


def run_args(results: Path, suite: str = "libero_10") -> list[str]:
    return ["-p", "no:cacheprovider", "-q", "--libero-profile=zero", "--libero-scope=task_coverage",
            f"--libero-suite={suite}", "--libero-task-ids=0", "--libero-budget-mode=decisions",
            f"--libero-max-policy-calls={CALLS}", f"--libero-replan-interval={REPLAN}",
            f"--libero-results={results}"]


def measure_run(phases: Mapping[str, float], suite: str = "libero_10") -> dict[str, Any]:
    """``overhead_s`` and ``call_s`` given the phase probe's figures of ``suite``;
    ``{"error": ...}`` when the run did not end with its one case recorded."""
    with tempfile.TemporaryDirectory(prefix="pytest-libero-plan-run-") as scratch:
        folder = Path(scratch)
        (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        log = folder / "pytest.log"
        launched = time.time()
        busy, waiting = busy_cpu_s(), cpu_waiting_s()
        # As a user runs it: none of the calling pytest's options, plugins or worker identity.
        done = children.run([sys.executable, "-m", "pytest", *run_args(folder / "results", suite)],
                            output=log, cwd=folder, env=children.clean_environment(),
                            timeout_s=RUN_TIMEOUT_S, stop_s=0.0)
        if isinstance(done, children.TimedOut):
            return {"error": f"the probe's run did not finish within {RUN_TIMEOUT_S:g} s"}
        ended = launched + done.seconds  # its own end, not the wait for what it left behind
        used = _difference(busy, busy_cpu_s())
        waited = waiting_share(waiting, cpu_waiting_s(), done.seconds)
        if waited is None or waited > BUSY_WAITING:
            used = None  # the cores' busy seconds are this run's only on a quiet machine
        found = list((folder / "results").glob(f"*/*/{RESULTS_NAME}"))
        lines = found[0].read_text(encoding="utf-8").splitlines() if found else []
        if len(lines) != 1:
            said = tail_of(log, 5).replace("\n", " / ")
            return {"error": f"the probe's run (exit {done.code}) recorded {len(lines)} "
                             f"cases, not 1: {said}"}
        return split_run(json.loads(lines[0]), launched, ended, phases, used)


def _difference(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def split_run(record: Mapping[str, Any], launched: float, ended: float,
              phases: Mapping[str, float], cpu_s: float | None = None) -> dict[str, Any]:
    """The run's seconds its case's phases do not account for (its start, the first set-up's
    cold extra over a warm build and reset, its finish), and each call's own work; with the
    machine's busy CPU seconds over the run (``cpu_s``, a quiet machine's), how much more
    CPU a real episode takes than the probe's bare stepping (``cpu_factor``: its encoders
    and evidence threads; what sets how many episodes the cores run side by side)."""
    timings, counters = record["timings"], record["counters"]
    setup = float(timings.get("setup_s", 0.0))
    episode = float(timings.get("episode_s", 0.0))
    case_s = setup + episode + float(timings.get("evidence_s", 0.0))
    warm_setup = phases["build_s"] + phases["reset_s"]
    controls = max(int(counters["executed_controls"]), 1)
    renders = sum((record.get("renders") or {}).values())
    stepping = controls * phases["physics_s"] + renders * phases["render_s"]
    calls = max(int(counters["policy_calls"]), 1)
    found = {"overhead_s": max(ended - launched - case_s, 0.0) + max(setup - warm_setup, 0.0),
             "call_s": max(episode - stepping, 0.0) / calls,
             "run_s": ended - launched}
    if cpu_s is not None and episode > 0 and phases.get("cpu_per_wall", 0.0) > 0:
        # Everything but the episode (start, set-up, finish) runs on about one core.
        episode_cpu = cpu_s - (ended - launched - episode)
        factor = episode_cpu / episode / phases["cpu_per_wall"]
        found["cpu_factor"] = min(max(factor, CPU_FACTOR_LOWEST), CPU_FACTOR_HIGHEST)
    return found
