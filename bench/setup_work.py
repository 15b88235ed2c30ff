"""What skipping a set-up's unseen renders and repeated compiles saves (adapters/setup_work.py).

    python bench/setup_work.py                       # fast libero_10 tasks 0-3 and full state 3, 2 repeats
    python bench/setup_work.py --repeats 4 --state 9

Set-up only: the adapter's whole construction of an episode (build, the resets, init
state, settling, the first observation), timed with the shortcuts (``lean``, as cases
run) and with robosuite as shipped (``shipped``: the shortcuts replaced by empty
blocks), interleaved in one process after one untimed warm-up build. Each fast case
pays a build and one hard reset; the full-mode case also the state's positioning
resets. ``reset`` rows: three positioning resets of one episode, each timed. The images
and physics are the same either way (tests/test_setup_work.py).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import _common as c

sys.path.insert(0, str(Path(__file__).resolve().parent))


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """``lean``: the adapter as it is; ``shipped``: its set-up shortcuts left out."""
    from pytest_libero.adapters import libero

    lean = libero.unseen_renders, libero.compiled_once
    if name == "shipped":
        libero.unseen_renders = lambda context: contextlib.nullcontext()  # type: ignore[assignment]
        libero.compiled_once = contextlib.nullcontext  # type: ignore[assignment]
    try:
        yield
    finally:
        libero.unseen_renders, libero.compiled_once = lean


def setup_seconds(entry: object, name: str) -> float:
    from pytest_libero.adapters.libero import LiberoEpisode

    with variant(name):
        started = time.perf_counter()
        episode = LiberoEpisode(entry, track="rgb", control_cap=1, monitor_safety=False)  # type: ignore[arg-type]
        seconds = time.perf_counter() - started
    episode.close()
    return seconds


def reset_seconds(entry: object, name: str, resets: int) -> list[float]:
    """Each of ``resets`` positioning resets of one fresh episode of ``entry``, timed."""
    from pytest_libero.adapters import libero

    with variant(name), libero.compiled_once():
        episode = libero.LiberoEpisode(entry, track="rgb", control_cap=1, monitor_safety=False)  # type: ignore[arg-type]
        episode.positioning_reset()  # untimed: compiles the scene, as a case's build does
        times = []
        for _ in range(resets):
            started = time.perf_counter()
            episode.positioning_reset()
            times.append(time.perf_counter() - started)
    episode.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="libero_10")
    parser.add_argument("--tasks", default="0,1,2,3", help="comma-separated fast-mode tasks")
    parser.add_argument("--state", type=int, default=3, help="the full-mode case's init state")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    c.prepare_simulator()
    print(c.machine_note())
    fast = [c.catalog_entry(args.suite, int(task)) for task in args.tasks.split(",")]
    full = fast[-1].at_state(args.state)
    setup_seconds(fast[0], "lean")  # untimed: the first build in a process pays imports
    variants = ("lean", "shipped")
    times: dict[tuple[str, str], list[float]] = {}
    for repeat in range(args.repeats):
        for name in c.interleaved_order(variants, repeat):
            for kind, entries in (("fast", fast), ("full", [full])):
                for entry in entries:
                    times.setdefault((kind, name), []).append(setup_seconds(entry, name))
            times.setdefault(("reset", name), []).extend(reset_seconds(fast[0], name, 3))
    rows = [[kind, name, len(v), f"{c.median(v):.2f}", f"{min(v):.2f}", f"{max(v):.2f}"]
            for (kind, name), v in times.items()]
    c.print_table(["cases", "variant", "set-ups", "median s", "min s", "max s"], rows)
    for kind in ("fast", "full", "reset"):
        print(c.ratio_line(f"{kind}: lean / shipped (median time)",
                           c.median(times[(kind, "lean")]), c.median(times[(kind, "shipped")])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
