"""Throughput at the defaults: per-case fixed cost, per-episode cost, encoders, full
mode, whole runs.

    python bench/throughput.py                       # every part, 3 repeats
    python bench/throughput.py --part fixed --repeats 5
    python bench/throughput.py --part episode --controls 80
    python bench/throughput.py --part full --states 4
    python bench/throughput.py --part whole          # ~25 min on two cores
    python bench/throughput.py --part perturbed      # ~10 min on two cores

Every variant runs in its own fresh Python process (so each pays its imports once, and
a forkserver starts from nothing), one after another, interleaved: the order rotates
every repeat. Ratios are medians of per-repeat ratios, with their range. All variants
of a part talk to the same zero policy server (``python -m pytest_libero.serve --policy
zero`` on 127.0.0.1) where they use one.

fixed (issue target: plugin / bare <= 1.05): four one-control fast-mode cases, libero_10
  tasks 0-3, as a pytest worker runs them at the defaults (process isolation, evidence,
  video, the websocket policy): ``SimulatorHost.run`` per case, timed from the variant
  process's start to its end. Against a bare loop that, in one process, builds, resets,
  installs state 0 and settles the same four environments and runs one control.
  ``plugin-no-preload`` is the plugin with the forkserver's preload off: each case
  process imports the simulator itself, as before.
episode (targets: plugin / floor <= 1.10, plugin / conventional <= 0.75): one case of N
  controls in chunks of K. Per-episode cost is the control loop plus, for the plugin,
  finishing its evidence files (``timings.evidence_s``) and, for the conventional loop,
  writing its video. ``plugin``: the defaults (process isolation, full evidence, a video
  frame every control, consumed rendering, the websocket policy). ``floor``: the same
  renders and nothing else (agentview every control for the video, both cameras per
  decision, in-process zero policy, no evidence). ``conventional``: openpi's loop from
  ``bench/conventional.py`` (both cameras every control, frames in memory, video written
  at the end, the same server).
encoders: the plugin case in-process (``--libero-isolation=none``, so the setting reaches
  it) with its encoders at the default lower priority and at the case's own priority;
  also the encoders' CPU seconds (the variant process's reaped children).
whole (issue target: plugin / conventional <= 0.75, also at -n 2): a whole run, the
  process from its start to its exit: five libero_10 cases (tasks 0-4), ``--whole-calls``
  calls of K controls each, at the defaults. ``plugin``: ``python -m pytest`` (process
  isolation; the next case's set-up runs while a case runs), ``plugin-no-prebuild``
  the same with ``--libero-prebuild=off``, ``plugin-n2`` the same at ``-n 2``;
  ``conventional``: openpi's loop shape from ``bench/conventional.py``, one process,
  the five episodes one after another, each with its video. All four use the same
  zero server. The plugin variants also sample their process tree's memory (the
  worker with its forkserver, case processes and encoders; at -n 2 each worker's).
perturbed (no target; the kept environment beside perturbed cases): full mode, whole
  runs of ``--suite``/``--task`` at states 0..``--perturbed-states``-1, ``--whole-calls``
  calls each. ``full``: without perturbations (the task's states continue in its kept
  environment); ``full-perturbed``: the same with ``--libero-perturb`` (camera:1 unless
  ``--perturb`` says otherwise) beside each state. The ratio is the perturbed run
  against the run without plus what its perturbed cases cost on their own (their
  set-up, control loop and evidence, from its records): 1 if nothing overlapped and
  no twin lost its kept environment; set-up ahead brings it under 1.
full (no target; the saving): full-mode cases of one task's states 0..S-1, few controls
  each: ``full-kept`` through one ``SimulatorHost`` (the worker keeps the case process and
  the task's environment, the default) against ``full-fresh`` (a fresh process and env
  per case, the i native resets each). Also checks that both gave identical delivered
  observations (sha256 from each case's observations.jsonl).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as c

from harness.runs import pytest_argv, run_folder, run_records

PARTS: dict[str, tuple[str, ...]] = {
    "fixed": ("plugin", "plugin-no-preload", "bare"),
    "episode": ("plugin", "floor", "conventional"),
    "encoders": ("niced", "same-priority"),
    "full": ("full-kept", "full-fresh"),
    "whole": ("plugin", "plugin-no-prebuild", "plugin-n2", "conventional"),
    "perturbed": ("full", "full-perturbed"),
}
WHOLE_TASKS = range(5)


# --------------------------------------------------------------- the variants


def _plan(uri: str, work: Path, case: Any, controls: int, k: int, **kwargs: Any) -> Any:
    return c.plan_for(c.websocket_profile(uri, work), case, controls, k, **kwargs)


def fixed_plugin(args: argparse.Namespace, work: Path, preload: bool) -> dict[str, Any]:
    from pytest_libero.episode.host import SimulatorHost, launch

    if not preload:
        launch.PRELOAD = []
    host = SimulatorHost()
    setup = []
    try:
        for task in range(4):
            case = c.catalog_entry("libero_10", task)
            plan = _plan(args.uri, work, case, 1, 1)
            record = host.run(plan, plan.entries[0], work / f"case-{task}", c.watchdog_for(plan))
            if record["outcome"] == "errored":
                raise RuntimeError(record["summary"])
            setup.append(record["timings"]["setup_s"])
    finally:
        host.close()
    return {"setup_s": sum(setup)}


def fixed_bare(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    c.prepare_simulator()
    setup = 0.0
    for task in range(4):
        out = c.run_bare(c.catalog_entry("libero_10", task), 1, 1)
        setup += out["setup_s"]
    return {"setup_s": setup}


def episode_plugin(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from pytest_libero.episode.host import run_isolated

    case = c.catalog_entry(args.suite, args.task)
    plan = _plan(args.uri, work, case, args.controls, args.replan_interval)
    record = run_isolated(plan, plan.entries[0], work / "case", c.watchdog_for(plan))
    if record["outcome"] == "errored":
        raise RuntimeError(record["summary"])
    timings = record["timings"]
    return {"episode_s": timings["episode_s"] + timings["evidence_s"],
            "loop_s": timings["episode_s"], "setup_s": timings["setup_s"],
            "renders": c.renders_text(record.get("renders"))}


def episode_floor(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    c.prepare_simulator()
    out = c.run_bare(c.catalog_entry(args.suite, args.task), args.controls, args.replan_interval,
                     video_stride=1)
    return {"episode_s": out["episode_s"], "loop_s": out["episode_s"], "setup_s": out["setup_s"],
            "renders": out["renders"]}


def episode_conventional(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import conventional

    c.prepare_simulator()
    client = conventional.OursClient(args.uri)
    resize = conventional.resizer("pil")
    out = conventional.conventional_episode(c.catalog_entry(args.suite, args.task), client, args.controls,
                                            args.replan_interval, resize, work / "video.mp4", False)
    return {"episode_s": out["episode_s"] + out["video_s"], "loop_s": out["episode_s"],
            "setup_s": out["setup_s"], "renders": out["renders"]}


def encoders(args: argparse.Namespace, work: Path, niced: bool) -> dict[str, Any]:
    from pytest_libero.evidence import ffmpeg

    c.prepare_simulator()
    if not niced:
        ffmpeg.ENCODER_NICENESS = 0
    case = c.catalog_entry(args.suite, args.task)
    plan = _plan(args.uri, work, case, args.controls, args.replan_interval)
    policy = plan.profile.build_policy()
    try:
        out = c.run_plugin_case(plan, plan.entries[0], policy, work / "case")
    finally:
        policy.close()
    import resource

    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    record = json.loads((work / "case" / "episode.json").read_text())
    return {"episode_s": out["episode_s"] + record["timings"]["evidence_s"],
            "loop_s": out["episode_s"], "setup_s": out["setup_s"],
            "encoder_cpu_s": kids.ru_utime + kids.ru_stime, "renders": out["renders"]}


def full_cases(args: argparse.Namespace, work: Path, kept: bool) -> dict[str, Any]:
    from pytest_libero.episode.host import SimulatorHost, run_isolated

    case = c.catalog_entry(args.suite, args.task)
    plan = _plan(args.uri, work, case, args.full_controls, args.replan_interval,
                 full_states=range(args.states))
    host = SimulatorHost()
    hashes = []
    setup = 0.0
    try:
        for entry in plan.entries:
            case_dir = work / entry.case_id
            run: Callable[..., Any] = host.run if kept else run_isolated
            record = run(plan, entry, case_dir, c.watchdog_for(plan))
            if record["outcome"] == "errored":
                raise RuntimeError(record["summary"])
            setup += record["timings"]["setup_s"]
            hashes.append(c.evidence_hashes(case_dir))
    finally:
        host.close()
    return {"setup_s": setup, "hashes": hashes}


def whole_pytest(args: argparse.Namespace, work: Path, *extra: str) -> list[str]:
    """The pytest command line of a whole-run plugin variant (run from ``work``)."""
    profile = c.websocket_profile(args.uri, work)
    return pytest_argv("-q", f"--libero-profile={profile.source}", "--libero-scope=development",
            f"--libero-task-ids={WHOLE_TASKS[0]}-{WHOLE_TASKS[-1]}",
            "--libero-budget-mode=decisions", f"--libero-max-policy-calls={args.whole_calls}",
            f"--libero-replan-interval={args.replan_interval}", *extra)


def whole_conventional(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import conventional

    c.prepare_simulator()
    client = conventional.OursClient(args.uri)
    resize = conventional.resizer("pil")
    setup = 0.0
    for task in WHOLE_TASKS:
        out = conventional.conventional_episode(
            c.catalog_entry("libero_10", task), client, args.whole_calls * args.replan_interval,
            args.replan_interval, resize, work / f"video-{task}.mp4", False)
        setup += out["setup_s"]
    return {"setup_s": setup}


WHOLE_PLUGIN = {"plugin": (), "plugin-no-prebuild": ("--libero-prebuild=off",),
                "plugin-n2": ("-n", "2")}


def full_run_pytest(args: argparse.Namespace, work: Path, *extra: str) -> list[str]:
    """The pytest command line of a perturbed-part variant: one task's first states in
    full mode (run from ``work``)."""
    profile = c.websocket_profile(args.uri, work)
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            f"--libero-profile={profile.source}", "--libero-mode=full",
            "--libero-scope=task_coverage", f"--libero-suite={args.suite}",
            f"--libero-task-ids={args.task}", f"--libero-init-states=0-{args.perturbed_states - 1}",
            "--libero-budget-mode=decisions", f"--libero-max-policy-calls={args.whole_calls}",
            f"--libero-replan-interval={args.replan_interval}", *extra]


def pytest_run(label: str, command: list[str], work: Path, cases: int,
               per_child: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A pytest run as its own process, timed start to exit, with its process tree's
    peak memory; also its records. Every case must fail (the zero policy)."""
    t0 = time.perf_counter()
    process = subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    memory = c.TreeMemory(process.pid, per_child=per_child)
    output, _ = process.communicate()
    wall = time.perf_counter() - t0
    result: dict[str, Any] = {"wall_s": wall, **memory.stop()}
    if process.returncode != 1 or f"{cases} failed in" not in output:
        raise SystemExit(f"variant {label} did not run its {cases} cases:\n{output[-4000:]}")
    records: list[dict[str, Any]] = [dict(r) for r in run_records(run_folder(work / "libero-results"))]
    result["setup_s"] = sum(r["timings"]["setup_s"] for r in records)
    result["setup_ahead_s"] = sum(r["timings"].get("setup_ahead_s", 0.0) for r in records)
    result["loop_s"] = sum(r["timings"]["episode_s"] for r in records)
    return result, records


def whole_plugin(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """A whole-run plugin variant as its own pytest process, timed start to exit."""
    work = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    try:
        result, _ = pytest_run(f"whole/{name}", whole_pytest(args, work, *WHOLE_PLUGIN[name]),
                               work, len(WHOLE_TASKS), per_child=name == "plugin-n2")
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def perturbed_plugin(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """A perturbed-part variant; beside its totals, what its perturbed cases cost on
    their own and how each twin state reached its environment."""
    perturbed = name == "full-perturbed"
    extra = (f"--libero-perturb={args.perturb}",) if perturbed else ()
    kinds = len(args.perturb.split(",")) if perturbed else 0
    work = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    try:
        result, records = pytest_run(f"perturbed/{name}", full_run_pytest(args, work, *extra),
                                     work, args.perturbed_states * (1 + kinds))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    own = [r for r in records if r.get("perturbation") or r["entry"].get("perturbation")]
    timings = [r["timings"] for r in own]
    result["perturbed_own_s"] = sum(t["setup_s"] + t["episode_s"] + t["evidence_s"]
                                    for t in timings)
    result["perturbed_setup_s"] = sum(t["setup_s"] for t in timings)
    result["perturbed_ahead_s"] = sum(t.get("setup_ahead_s", 0.0) for t in timings)
    twins = sorted((r for r in records if r not in own), key=lambda r: r["case"])
    result["twins"] = [(r["case"], r["identity"]["schedule"]["environment"],
                        r["timings"]["setup_s"]) for r in twins]
    return result


VARIANTS: dict[str, Callable[[argparse.Namespace, Path], dict[str, Any]]] = {
    "fixed/plugin": lambda a, w: fixed_plugin(a, w, preload=True),
    "fixed/plugin-no-preload": lambda a, w: fixed_plugin(a, w, preload=False),
    "fixed/bare": fixed_bare,
    "episode/plugin": episode_plugin,
    "episode/floor": episode_floor,
    "episode/conventional": episode_conventional,
    "encoders/niced": lambda a, w: encoders(a, w, niced=True),
    "encoders/same-priority": lambda a, w: encoders(a, w, niced=False),
    "full/full-kept": lambda a, w: full_cases(a, w, kept=True),
    "full/full-fresh": lambda a, w: full_cases(a, w, kept=False),
    "whole/conventional": whole_conventional,
}


# --------------------------------------------------------------- the driver


def run_variant(name: str, args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """One variant in a fresh interpreter; its wall time from start to exit."""
    if name.startswith("whole/plugin"):
        return whole_plugin(name.split("/", 1)[1], args)
    if name.startswith("perturbed/"):
        return perturbed_plugin(name.split("/", 1)[1], args)
    out = Path(tempfile.mkstemp(prefix="bench-throughput-", suffix=".json")[1])
    command = [sys.executable, __file__, "--variant", name, "--uri", args.uri, "--out", str(out),
               *argv]
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"variant {name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    result["wall_s"] = wall
    return result


def spread(values: list[float]) -> str:
    good = [v for v in values if not math.isnan(v)]
    if not good:
        return "-"
    return f"{c.median(good):.3f} ({min(good):.3f}-{max(good):.3f})"


def report(part: str, runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    print(f"\n## {part}")
    keys = ("wall_s", "setup_s", "loop_s", "episode_s", "encoder_cpu_s")
    rows = []
    for name, results in runs.items():
        rows.append([name, len(results),
                     *(c.median([r.get(k, math.nan) for r in results]) for k in keys),
                     results[0].get("renders", "-")])
    c.print_table(["variant", "runs", "process wall s", "setup s", "loop s",
                   "per-episode s", "encoder CPU s", "renders"], rows)

    def ratio(num: str, den: str, key: str) -> list[float]:
        return [a[key] / b[key] for a, b in zip(runs[num], runs[den])]

    print()
    if part == "fixed":
        print(f"fixed cost plugin / bare (process wall) = {spread(ratio('plugin', 'bare', 'wall_s'))}"
              "   (target <= 1.05)")
        print("fixed cost plugin-no-preload / bare    = "
              f"{spread(ratio('plugin-no-preload', 'bare', 'wall_s'))}")
        print(f"preload saving, plugin / plugin-no-preload = "
              f"{spread(ratio('plugin', 'plugin-no-preload', 'wall_s'))}")
    elif part == "episode":
        print(f"per-episode plugin / floor        = {spread(ratio('plugin', 'floor', 'episode_s'))}"
              "   (target <= 1.10)")
        print(f"per-episode plugin / conventional = "
              f"{spread(ratio('plugin', 'conventional', 'episode_s'))}   (target <= 0.75)")
        print(f"control loop only, plugin / floor = {spread(ratio('plugin', 'floor', 'loop_s'))}")
        print(f"control loop only, plugin / conventional = "
              f"{spread(ratio('plugin', 'conventional', 'loop_s'))}")
    elif part == "encoders":
        print(f"per-episode niced / same priority = "
              f"{spread(ratio('niced', 'same-priority', 'episode_s'))}")
        print(f"control loop niced / same priority = "
              f"{spread(ratio('niced', 'same-priority', 'loop_s'))}")
    elif part == "full":
        same = all(k["hashes"] == f["hashes"] for k, f in zip(runs["full-kept"], runs["full-fresh"]))
        print(f"{args.states} states x {args.full_controls} controls, {args.suite} task {args.task}")
        for key, label in (("wall_s", "process wall"), ("setup_s", "setup")):
            print(f"full mode kept / fresh ({label}) = {spread(ratio('full-kept', 'full-fresh', key))}")
        print(f"delivered observations identical, kept vs fresh: {'yes' if same else 'NO'}")
    elif part == "whole":
        print(f"{len(WHOLE_TASKS)} libero_10 cases x {args.whole_calls} calls x "
              f"K={args.replan_interval}, whole processes")
        for name in ("plugin", "plugin-n2", "plugin-no-prebuild"):
            target = "   (target <= 0.75)" if name != "plugin-no-prebuild" else ""
            print(f"whole run {name} / conventional = "
                  f"{spread(ratio(name, 'conventional', 'wall_s'))}{target}")
        print(f"prebuild saving, plugin / plugin-no-prebuild = "
              f"{spread(ratio('plugin', 'plugin-no-prebuild', 'wall_s'))}")
        for name in WHOLE_PLUGIN:
            ahead = c.median([r["setup_ahead_s"] for r in runs[name]])
            rss = c.median([r["peak_rss_mib"] for r in runs[name]])
            pss = c.median([r["peak_pss_mib"] for r in runs[name]])
            print(f"{name}: set-up {c.median([r['setup_s'] for r in runs[name]]):.1f} s, of it "
                  f"{ahead:.1f} s ahead of its case's turn; peak per worker: RSS {rss:.0f} MiB "
                  f"(shared pages counted per process), PSS {pss:.0f} MiB")
    elif part == "perturbed":
        report_perturbed(runs, args)


def report_perturbed(runs: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    plain, perturbed = runs["full"], runs["full-perturbed"]
    print(f"full mode, {args.suite} task {args.task}, states 0-{args.perturbed_states - 1}, "
          f"{args.perturb} beside each, {args.whole_calls} calls x K={args.replan_interval}, "
          "whole processes")
    expected = [p["wall_s"] / (f["wall_s"] + p["perturbed_own_s"]) for f, p in zip(plain, perturbed)]
    print(f"run with perturbations / (run without + perturbed cases' own cost) = {spread(expected)}")
    print(f"run with perturbations / run without = "
          f"{spread([p['wall_s'] / f['wall_s'] for f, p in zip(plain, perturbed)])}")
    own = c.median([p["perturbed_own_s"] for p in perturbed])
    setup = c.median([p["perturbed_setup_s"] for p in perturbed])
    ahead = c.median([p["perturbed_ahead_s"] for p in perturbed])
    print(f"perturbed cases' own cost {own:.1f} s, of it set-up {setup:.1f} s, {ahead:.1f} s of "
          "that ahead of their turns")
    for name, results in runs.items():
        twins = results[0]["twins"]
        setups = [c.median([r["twins"][i][2] for r in results]) for i in range(len(twins))]
        print(f"{name}: twin states " + ", ".join(
            f"{case} {environment} (set-up {s:.1f} s)"
            for (case, environment, _), s in zip(twins, setups)))
        pss = c.median([r["peak_pss_mib"] for r in results])
        print(f"{name}: peak of the worker's process tree PSS {pss:.0f} MiB")
    same = {tuple(t[:2] for t in r["twins"]) for r in plain + perturbed}
    print(f"twin states reach the same environments with and without perturbations: "
          f"{'yes' if len(same) == 1 else 'NO'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    c.episode_arguments(parser)
    parser.add_argument("--part", action="append", choices=tuple(PARTS),
                        help="run only this part (repeatable) [all]")
    parser.add_argument("--states", type=int, default=4, help="full: states 0..S-1 [4]")
    parser.add_argument("--full-controls", type=int, default=10, help="full: controls per case [10]")
    parser.add_argument("--whole-calls", type=int, default=20,
                        help="whole, perturbed: calls per case [20]")
    parser.add_argument("--perturbed-states", type=int, default=2,
                        help="perturbed: states 0..S-1 of --suite/--task [2]")
    parser.add_argument("--perturb", default="camera:1",
                        help="perturbed: the --libero-perturb of its perturbed run [camera:1]")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        work = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
        try:
            result = VARIANTS[args.variant](args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        Path(args.out).write_text(json.dumps(result))
        return 0

    passed = [a for a in sys.argv[1:] if not a.startswith("--part") and a not in PARTS]
    parts = args.part or list(PARTS)
    print(f"# throughput: parts {', '.join(parts)}; {args.repeats} repeats; episode: {args.suite} "
          f"task {args.task}, N={args.controls}, K={args.replan_interval}")
    print(f"# {c.machine_note()}")
    os.environ.setdefault("MUJOCO_GL", "egl")
    with c.zero_server(chunk=args.replan_interval) as uri:
        args.uri = uri
        for part in parts:
            names = PARTS[part]
            runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
            for repeat in range(args.repeats):
                for name in c.interleaved_order(names, repeat):
                    result = run_variant(f"{part}/{name}", args, passed)
                    runs[name].append(result)
                    print(f"#   {part} repeat {repeat + 1} {name:<18} wall {result['wall_s']:7.2f} s  "
                          f"per-episode {result.get('episode_s', math.nan):7.2f} s", flush=True)
            report(part, runs, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
