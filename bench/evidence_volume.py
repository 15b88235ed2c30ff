"""Evidence volume: bytes a case folder keeps at --libero-evidence=full and =replayable.

    python bench/evidence_volume.py               # libero_10 task 0, 100 controls, K=5, random policy
    python bench/evidence_volume.py --controls 60 --policy zero
    python bench/evidence_volume.py --track rgb+proprio --video-stride 5 --keep /tmp/volume

One real plugin case per level (``run_case_with_evidence`` in this process, the
in-process built-in policy, a decisions budget of N/K calls of K controls, the plugin's
default rendering and video stride unless given), the same task and the same actions
at both levels: ``random`` is seeded per episode, ``zero`` holds the arm still (a
static scene, which the lossless agentview codec stores very cheaply: a lower bound).
The levels run in the order given by --order (default full first); the simulator is
deterministic, and the run checks it: both folders must record the same observation
hashes and byte-identical actions.jsonl.

Reported: every file of each case folder (episode.json, the record, included) in
bytes, the total, bytes per executed control and per observation, and the ratio
full/replayable. "per 520 controls" scales each file linearly with the executed
controls (observations, chunks and video frames all grow with it at a fixed K and
video stride; the small fixed parts, such as container headers and the record, are
overstated a little by this): libero_10's reference horizon is 520 controls.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import _common as c

LEVELS = ("full", "replayable")
REFERENCE_CONTROLS = 520


def folder_bytes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}


def run_level(args: argparse.Namespace, case: Any, level: str, case_dir: Path) -> dict[str, Any]:
    from pytest_libero.config.profiles import load_profile
    from pytest_libero.evidence.reader import read_observation_hashes

    profile = load_profile(args.policy).with_overrides(options={"chunk": args.replan_interval})
    plan = c.plan_for(profile, case, args.controls, args.replan_interval,
                      render=args.render, video_stride=args.video_stride)
    plan = replace(plan, evidence=level, track=args.track)
    policy = plan.profile.build_policy()
    try:
        figures = c.run_plugin_case(plan, case, policy, case_dir)
    finally:
        policy.close()
    return {
        **figures,
        "files": folder_bytes(case_dir),
        "hashes": list(read_observation_hashes(case_dir)),
        "actions": (case_dir / "actions.jsonl").read_bytes(),
    }


def run_levels(args: argparse.Namespace, case: Any, levels: Sequence[str], work: Path,
               describe: Callable[[dict[str, Any]], str],
               render: Callable[[str], str | None] | None = None) -> dict[str, dict[str, Any]]:
    """Each level's case in turn (``render``: the --libero-render each level runs with),
    a line each; the folders removed after unless --keep."""
    runs: dict[str, dict[str, Any]] = {}
    try:
        for level in levels:
            if render is not None:
                args.render = render(level)
            runs[level] = run_level(args, case, level, work / level)
            print(f"#   {level}: {describe(runs[level])}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return runs


def same_episode(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two levels recorded the same episode, said in a line."""
    same = bool(a["hashes"] == b["hashes"] and a["actions"] == b["actions"])
    print(f"# same episode at both levels (observation hashes, actions.jsonl bytes): "
          f"{'yes' if same else 'NO'}")
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="libero_10")
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--controls", type=int, default=100, help="N controls (a multiple of K)")
    parser.add_argument("--replan-interval", "-k", type=int, default=5, help="K")
    parser.add_argument("--policy", choices=("random", "zero"), default="random")
    parser.add_argument("--track", choices=("rgb", "rgb+proprio"), default="rgb")
    parser.add_argument("--render", choices=("consumed", "all"), help="the plugin's --libero-render")
    parser.add_argument("--video-stride", type=int, help="the plugin's --libero-video-stride")
    parser.add_argument("--order", choices=("full-first", "replayable-first"), default="full-first")
    parser.add_argument("--keep", type=Path, help="keep the two case folders under this folder")
    args = parser.parse_args()
    if args.controls % args.replan_interval:
        parser.error("--controls must be a multiple of --replan-interval")

    c.prepare_simulator()
    case = c.catalog_entry(args.suite, args.task)
    print(f"# evidence volume: {case.case_id} ({case.name}), N={args.controls} controls, "
          f"K={args.replan_interval}, {args.policy} policy, track {args.track}, render="
          f"{args.render or 'default'}, video stride={args.video_stride or 'default'}")
    print(f"# {c.machine_note()}")

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-evidence-volume-"))
    order = LEVELS if args.order == "full-first" else LEVELS[::-1]
    runs = run_levels(args, case, order, work, lambda run: (
        f"{run['controls']} controls, {run['calls']} calls, {sum(run['files'].values())} bytes "
        f"in {run['whole_s']:.1f} s"))
    full, lean = runs["full"], runs["replayable"]
    same = same_episode(full, lean)
    controls = full["controls"]
    observations = len(full["hashes"])
    scale = REFERENCE_CONTROLS / controls if controls else float("nan")
    print()
    rows = []
    names = sorted(set(full["files"]) | set(lean["files"]))
    for name in names:
        a, b = full["files"].get(name), lean["files"].get(name)
        rows.append([name, "-" if a is None else a, "-" if b is None else b])
    total_full, total_lean = sum(full["files"].values()), sum(lean["files"].values())
    rows.append(["total", total_full, total_lean])
    rows.append(["per control", total_full / controls, total_lean / controls])
    rows.append([f"per observation ({observations})", total_full / observations,
                 total_lean / observations])
    rows.append([f"per {REFERENCE_CONTROLS} controls (linear)", round(total_full * scale),
                 round(total_lean * scale)])
    c.print_table(["file", "full bytes", "replayable bytes"], rows)
    print()
    print(c.ratio_line("full / replayable (total bytes)", total_full, total_lean))
    print(c.ratio_line("replayable / full (total bytes)", total_lean, total_full))
    if args.keep is not None:
        print(f"# case folders kept in {work}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
