"""What the scene kinds (position, environment) add to a case's set-up, beside its twin's.

    python bench/scene_setup_cost.py                    # libero_10 task 3, levels 1 and 4, 1 repeat
    python bench/scene_setup_cost.py --levels 2 --repeats 3

Set-up only: the adapter's whole construction of the episode (build, reset, init state,
the perturbation with its draws, settling and judging, the first observation), timed for
the twin and each (kind, level), interleaved (the order rotates every repeat), after one
untimed warm-up build. Position
settles once more than the twin (the unperturbed reference) plus once per attempt;
environment also adds its distractors to the model and rebuilds the simulation once.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _common as c

sys.path.insert(0, str(Path(__file__).resolve().parent))

KINDS = ("position", "environment")


def setup_seconds(case: object) -> tuple[float, int]:
    """Seconds to a settled, observed episode, and the draws rejected on the way."""
    from pytest_libero.adapters.libero import LiberoEpisode

    t0 = time.perf_counter()
    episode = LiberoEpisode(case, track="rgb", control_cap=1, monitor_safety=False)  # type: ignore[arg-type]
    seconds = time.perf_counter() - t0
    redraws = int(episode.identity.get("perturbation", {}).get("redraws", 0))
    episode.close()
    return seconds, redraws


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="libero_10")
    parser.add_argument("--task", type=int, default=3)
    parser.add_argument("--levels", default="1,4", help="comma-separated levels, e.g. 1,4")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    c.prepare_simulator()
    print(c.machine_note())
    twin = c.catalog_entry(args.suite, args.task)
    levels = [int(v) for v in args.levels.split(",")]
    cases = {"twin": twin, **{f"{k}{v}": twin.perturbed(k, v) for k in KINDS for v in levels}}
    setup_seconds(twin)  # untimed: the first build in a process pays imports and caches
    times: dict[str, list[float]] = {name: [] for name in cases}
    redraws: dict[str, list[int]] = {name: [] for name in cases}
    for repeat in range(args.repeats):
        for name in c.interleaved_order(list(cases), repeat):
            seconds, rejected = setup_seconds(cases[name])
            times[name].append(seconds)
            redraws[name].append(rejected)
    rows = [[name, len(v), f"{c.median(v):.2f}", f"{min(v):.2f}", f"{max(v):.2f}",
             ",".join(map(str, redraws[name]))] for name, v in times.items()]
    c.print_table(["variant", "runs", "median set-up s", "min s", "max s", "redraws"], rows)
    for name in cases:
        if name != "twin":
            print(c.ratio_line(f"{name} / twin (median set-up time)", c.median(times[name]),
                               c.median(times["twin"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
