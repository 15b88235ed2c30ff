"""What the renderer fingerprint costs: a session's and a worker's, beside a LIBERO scene.

    python bench/renderer_cost.py                 # 3 repeats
    python bench/renderer_cost.py --repeats 5 --skip-scene

Variants, interleaved (the order rotates every repeat):

* worker: ``measure_in_child`` in a process forked from a forkserver that has the
  simulator imported, as a worker (or a session without workers) measures beside its
  case processes. The server's own start is not counted: the first case pays it anyway.
* apart: ``measure_in_child`` in a spawned process that imports robosuite itself, as the
  controller of xdist workers measures.
* scene: the alternative the fingerprint avoids, a LIBERO task's environment built,
  reset, its state installed and settled, and both cameras delivered once (libero_10
  task 0), in this process.

Every fingerprint measured must be the same one: the script says so, or fails.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

import _common as c

sys.path.insert(0, str(Path(__file__).resolve().parent))


def scene_seconds() -> float:
    """A LIBERO episode opened and its first observation delivered (both cameras)."""
    from pytest_libero.adapters.libero import LiberoEpisode

    t0 = time.perf_counter()
    episode = LiberoEpisode(c.entry("libero_10", 0), track="rgb", control_cap=10)
    try:
        episode.observe(0, 0)
        return time.perf_counter() - t0
    finally:
        episode.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-scene", action="store_true", help="leave out the LIBERO scene")
    args = parser.parse_args()
    c.prepare_simulator()
    from pytest_libero.episode.host.launch import PRELOAD
    from pytest_libero.evidence.renderer import describe, measure_in_child, same

    print(c.machine_note())
    forkserver = multiprocessing.get_context("forkserver")
    forkserver.set_forkserver_preload(PRELOAD)
    started = time.perf_counter()
    first = measure_in_child(forkserver)  # starts the server: not counted
    print(f"forkserver started and first fingerprint in {time.perf_counter() - started:.1f} s")
    print(f"renderer: {describe(first)}")
    if not first.get("sha256"):
        print("the reference frame could not be rendered", file=sys.stderr)
        return 1
    names = ["worker", "apart"] + ([] if args.skip_scene else ["scene"])
    wall: dict[str, list[float]] = {name: [] for name in names}
    render: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        for name in c.interleaved_order(names, repeat):
            if name == "scene":
                wall[name].append(scene_seconds())
                continue
            found = measure_in_child(forkserver if name == "worker" else None)
            if not same(found, first):
                print(f"{name}: another fingerprint: {describe(found)}", file=sys.stderr)
                return 1
            wall[name].append(found["wall_s"])
            render[name].append(found["seconds"])
    labels = {"worker": "worker: forked beside the case processes",
              "apart": "apart: spawned, imports robosuite",
              "scene": "a LIBERO scene opened, first observation"}
    c.print_table(["variant", "wall s (median)", "of which rendering s", "repeats"],
                  [[labels[n], c.median(wall[n]), c.median(render[n]), len(wall[n])]
                   for n in names])
    print("every fingerprint: the same")
    if "scene" in wall:
        print(c.ratio_line("worker / scene", c.median(wall["worker"]), c.median(wall["scene"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
