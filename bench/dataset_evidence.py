"""What --libero-evidence=dataset costs beside full: time and bytes per control.

    python bench/dataset_evidence.py                 # libero_10 task 0, 100 controls, K=5, random policy
    python bench/dataset_evidence.py --controls 60 --policy zero -k 1

One real plugin case per level (as bench/evidence_volume.py runs them: the same task,
the same seeded actions, ``run_case_with_evidence`` in this process). Level dataset
renders every camera at every control and keeps both cameras' images of each control
in lossless streams of their own; full renders only the images a call or the video
consumes. The run checks that both levels recorded the same episode (observation
hashes and actions.jsonl bytes) and prints, per executed control, the episode's wall
time and the case folder's bytes at each level, and their ratios. Renders dominate the
time on a CPU renderer (about 120-130 ms a camera at 256x256 through Mesa here); a GPU
renderer changes the time figures, not the bytes.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import _common as c
from evidence_volume import run_levels, same_episode

LEVELS = ("full", "dataset")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="libero_10")
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--controls", type=int, default=100, help="N controls (a multiple of K)")
    parser.add_argument("--replan-interval", "-k", type=int, default=5, help="K")
    parser.add_argument("--policy", choices=("random", "zero"), default="random")
    parser.add_argument("--track", choices=("rgb", "rgb+proprio"), default="rgb")
    parser.add_argument("--keep", type=Path, help="keep the two case folders under this folder")
    args = parser.parse_args()
    if args.controls % args.replan_interval:
        parser.error("--controls must be a multiple of --replan-interval")
    args.video_stride = None

    c.prepare_simulator()
    case = c.catalog_entry(args.suite, args.task)
    print(f"# dataset evidence: {case.case_id} ({case.name}), N={args.controls} controls, "
          f"K={args.replan_interval}, {args.policy} policy, track {args.track}")
    print(f"# {c.machine_note()}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-dataset-evidence-"))
    runs = run_levels(args, case, LEVELS, work, lambda run: (
        f"{run['controls']} controls in {run['episode_s']:.1f} s (renders {run['renders']}), "
        f"{sum(run['files'].values())} bytes"),
        render=lambda level: "all" if level == "dataset" else None)  # as the run plan sets it
    full, dataset = runs["full"], runs["dataset"]
    same = same_episode(full, dataset)
    controls = full["controls"]
    rows = []
    for level, run in runs.items():
        total = sum(run["files"].values())
        kept = sum(b for name, b in run["files"].items() if name.startswith("controls."))
        rows.append([level, run["episode_s"] / controls * 1000, total / controls, kept / controls])
    print()
    c.print_table(["level", "episode ms per control", "bytes per control",
                   "of which controls.* per control"], rows)
    print()
    print(c.ratio_line("dataset / full (episode wall time)", dataset["episode_s"], full["episode_s"]))
    print(c.ratio_line("dataset / full (case folder bytes)", sum(dataset["files"].values()),
                       sum(full["files"].values())))
    if args.keep is not None:
        print(f"# case folders kept in {work}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
