"""What a generated perturbation costs: a perturbed case's time beside its twin's.

    python bench/perturbation_cost.py                   # libero_10 task 0, 100 controls, 3 repeats
    python bench/perturbation_cost.py --level 4 --repeats 5

Variants, interleaved (the order rotates every repeat), each a whole case as the
adapter runs it: build, reset, init state, the perturbation, settling, then the
controls with both cameras rendered per decision and agentview every control for the
video. The twin is the unperturbed case. Target: each kind / twin <= 1.05.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _common as c
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def case_seconds(case: object, controls: int, k: int) -> float:
    from pytest_libero.adapters.libero import LiberoEpisode

    action = np.array([0, 0, 0, 0, 0, 0, -1.0])
    t0 = time.perf_counter()
    episode = LiberoEpisode(case, track="rgb", control_cap=controls)  # type: ignore[arg-type]
    try:
        for n in range(1, controls + 1):
            if (n - 1) % k == 0:
                episode.observe((n - 1) // k, n - 1)
            episode.step(action, observe_next=n % k == 0)
            episode.frame()
        return time.perf_counter() - t0
    finally:
        episode.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    c.episode_arguments(parser)
    parser.add_argument("--level", type=int, default=2, choices=(1, 2, 3, 4))
    parser.set_defaults(controls=100)
    args = parser.parse_args()
    c.prepare_simulator()
    from pytest_libero.perturb.registry import names, perturbed

    print(c.machine_note())
    twin = c.catalog_entry(args.suite, args.task)
    cases = {"twin": twin, **{kind: perturbed(twin, kind, args.level) for kind in names()}}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for repeat in range(args.repeats):
        for name in c.interleaved_order(list(cases), repeat):
            times[name].append(case_seconds(cases[name], args.controls, args.replan_interval))
    rows = [[name, len(v), f"{c.median(v):.2f}", f"{min(v):.2f}", f"{max(v):.2f}"]
            for name, v in times.items()]
    c.print_table(["variant", "runs", "median s", "min s", "max s"], rows)
    for kind in names():
        print(c.ratio_line(f"{kind}{args.level} / twin (median case time)", c.median(times[kind]),
                           c.median(times["twin"]), "<= 1.05"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
