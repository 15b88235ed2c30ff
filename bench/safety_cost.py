"""What the safety monitor costs: episode time with it and without, side by side.

    python bench/safety_cost.py                       # libero_10 task 0, 100 controls, 3 repeats
    python bench/safety_cost.py --controls 200 --repeats 5

Variants, interleaved (the order rotates every repeat), each on a fresh env built by the
plugin's adapter (``LiberoEpisode``, rendering as a run does: both cameras per decision,
agentview every control for the video): the same open-loop actions, which move the arm
into the objects (so contacts are scanned at work), with the monitor on (the default:
a contact scan per physics substep and one row of signals per control) and off. Only
the control loop is timed; the build is not. Target: monitor / none <= 1.05.
"""

from __future__ import annotations

import argparse
import sys
import time

import _common as c
import numpy as np

sys.path.insert(0, str(c.ROOT / "release"))  # the schedule validator's open-loop actions


def episode_seconds(case: object, actions: np.ndarray, k: int, monitor: bool) -> tuple[float, float]:
    """(episode seconds, of which in the monitor itself)."""
    from pytest_libero.adapters.libero import LiberoEpisode

    episode = LiberoEpisode(case, track="rgb", control_cap=len(actions),  # type: ignore[arg-type]
                            monitor_safety=monitor)
    try:
        t0 = time.perf_counter()
        for n, action in enumerate(actions, start=1):
            if (n - 1) % k == 0:
                episode.observe(n // k, n - 1)
            episode.step(action, observe_next=n % k == 0)
            episode.frame()
        if monitor:
            episode.safety_signals()
        own = episode.safety.seconds if episode.safety is not None else 0.0
        return time.perf_counter() - t0, own
    finally:
        episode.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    c.episode_arguments(parser)
    parser.set_defaults(controls=100)
    args = parser.parse_args()
    c.prepare_simulator()
    from validate_schedule import random_actions

    print(c.machine_note())
    case = c.catalog_entry(args.suite, args.task)
    actions = random_actions(args.controls, 0)
    times: dict[str, list[float]] = {"monitor": [], "none": []}
    shares: list[float] = []
    for repeat in range(args.repeats):
        for name in c.interleaved_order(list(times), repeat):
            seconds, own = episode_seconds(case, actions, args.replan_interval, name == "monitor")
            times[name].append(seconds)
            if name == "monitor":
                shares.append(own / (seconds - own))
    rows = [[name, len(v), f"{c.median(v):.2f}", f"{min(v):.2f}", f"{max(v):.2f}"]
            for name, v in times.items()]
    c.print_table(["variant", "runs", "median s", "min s", "max s"], rows)
    print(c.ratio_line("monitor / none (median episode time)", c.median(times["monitor"]),
                       c.median(times["none"]), "<= 1.05"))
    # The monitor's own time within each monitored episode: immune to other load.
    print(c.ratio_line("(episode) / (episode - time inside the monitor), median", 1 + c.median(shares),
                       1.0, "<= 1.05"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
