"""What ``pytest-libero verify`` costs with its replays forked from the case host's
forkserver (as shipped) against a spawned process per replay (as before 2026-12-07).

    python bench/verify_cost.py                      # 4 cases of 3 calls, 2 repeats
    python bench/verify_cost.py --cases 8 --repeats 3

One run is recorded first (the random policy on the proprio track, ``--cases`` tasks of
libero_10, ``--calls`` policy calls of 3 controls each). Then ``verify`` re-executes it
whole, in a script of its own per variant (as the console script runs it), interleaved
(the order rotates every repeat):

* forkserver: as shipped (``audit/verify.py``'s ``replay_host``): one server imports the
  simulator and compiles the first replay's scene, each replay is forked from it.
* spawn: ``replay_host`` replaced by spawned processes, each importing the simulator and
  compiling its scene from nothing.

Wall time is the command's; CPU time is the whole machine's busy time meanwhile (the
replays are the forkserver's children, not the command's, so its own accounting misses
them): run it on an otherwise quiet machine. Both variants must verify every case.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c
from _machine_use import cpu_times

VARIANTS = {
    "forkserver": "",
    "spawn": ("    import multiprocessing\n"
              "    import pytest_libero.audit.verify as verify\n"
              "    verify.replay_host = lambda first: (multiprocessing.get_context('spawn'), "
              "verify.measure_in_child())\n"),
}
"""What each variant does before verify starts (in the main process only)."""
RUN_VERIFY = ("import sys\nfrom pytest_libero.cli import main\n"
              "if __name__ == '__main__':\n{patch}    sys.exit(main(['verify', {run!r}]))\n")
"""A script file, as the ``pytest-libero`` console script is: spawned processes import it
again, and only its guarded part runs in the process started as the script."""


def recorded_run(where: Path, cases: int, calls: int) -> Path:
    done = c.run_pytest(["-q", "--libero-profile=random", "--libero-budget-mode=decisions",
                         f"--libero-max-policy-calls={calls}", "--libero-replan-interval=3",
                         "--libero-scope=task_coverage", "--libero-suite=libero_10",
                         f"--libero-task-ids=0-{cases - 1}",
                         "--libero-track=rgb+proprio", "--libero-run-id=bench"], where)
    run = where / "libero-results" / "random" / "bench"
    if not (run / "results.jsonl").is_file():
        raise SystemExit(f"the run to verify was not recorded:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return run


def timed_verify(run: Path, variant: str, cases: int) -> tuple[float, float]:
    """(wall s, machine CPU s) of one whole ``verify`` of ``run``; exits unless every case verified."""
    (run / "verify.json").unlink(missing_ok=True)
    busy0, _ = cpu_times()
    started = time.perf_counter()
    script = run.parent / f"verify_{variant}.py"
    script.write_text(RUN_VERIFY.format(patch=VARIANTS[variant], run=str(run)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    busy1, _ = cpu_times()
    verdicts = json.loads((run / "verify.json").read_text()) if (run / "verify.json").is_file() else {}
    if done.returncode != 0 or verdicts.get("counts", {}).get("verified") != cases:
        raise SystemExit(f"{variant}: verify did not verify all {cases} cases (exit {done.returncode}):\n"
                         f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, (busy1 - busy0) / 100.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=4)
    parser.add_argument("--calls", type=int, default=3, help="policy calls per case (3 controls each)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    c.prepare_simulator()
    print(c.machine_note())
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as scratch:
        run = recorded_run(Path(scratch), args.cases, args.calls)
        wall: dict[str, list[float]] = {name: [] for name in VARIANTS}
        cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for repeat in range(args.repeats):
            for name in c.interleaved_order(list(VARIANTS), repeat):
                seconds, busy = timed_verify(run, name, args.cases)
                wall[name].append(seconds)
                cpu[name].append(busy)
    c.print_table(["variant", "wall s (median)", "machine CPU s (median)", "repeats"],
                  [[name, c.median(wall[name]), c.median(cpu[name]), len(wall[name])] for name in VARIANTS])
    print(f"{args.cases} cases of {args.calls * 3} controls, every one verified by both")
    print(c.ratio_line("wall forkserver / spawn", c.median(wall["forkserver"]), c.median(wall["spawn"])))
    print(c.ratio_line("CPU forkserver / spawn", c.median(cpu["forkserver"]), c.median(cpu["spawn"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
