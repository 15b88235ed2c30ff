"""Memory of a case process: peak RSS against episode length, and growth across cases.

    python bench/memory.py                          # 50 vs 500 controls; 6 cases in one process
    python bench/memory.py --short 100 --long 1000 --seq-controls 50
    python bench/memory.py --skip-peak              # only the consecutive-cases table
    python bench/memory.py --seq-same-task          # 6 times the same task (leak vs. task data)

Table 1: one plugin case (``run_case_with_evidence``, evidence and video on, the
in-process zero policy, K=5) in a fresh Python process per run, at ``--short`` and
at ``--long`` controls, the two lengths interleaved when repeated. Each process
reports its peak RSS (``ru_maxrss`` and ``VmHWM``, the same number read twice), its
RSS when the first observation was delivered (env built and settled) and when the
case ended (ffmpeg encoders are separate processes, not counted). With evidence streamed
to disk the target is a long episode's peak within 10% of a short one's.

Table 2: ``--seq-cases`` consecutive cases (libero_10 tasks 0..5 by default) in ONE
fresh process, as a pytest worker with --libero-isolation=none runs them: the env is
built and closed each time. After each case (and a ``gc.collect()``): RSS, peak, glibc's
C heap split into bytes in use and bytes free but still held (``mallinfo2``, all
arenas: growth there is fragmentation, not a leak), live Python objects, open file
descriptors and threads. ``--trim`` also calls ``malloc_trim(0)`` after each case and
shows the RSS it leaves.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import inspect
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _common as c

MARK = "@@bench-memory "


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def mib(kib: float) -> float:
    return kib / 1024.0


def _libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def malloc_stats() -> dict[str, int] | None:
    """glibc's view of the C heap, all arenas: bytes in use and bytes free but kept."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {"in_use": int(info.uordblks + info.hblkhd), "free_held": int(info.fordblks)}


def malloc_trim() -> bool:
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


class FirstObservation:
    """Listener noting RSS when the first observation is delivered (env built, settled)."""

    def __init__(self) -> None:
        self.rss_kib: int | None = None

    def on_observation(self, call: int, observation: Any) -> None:
        if self.rss_kib is None:
            self.rss_kib = status_kib("VmRSS")

    def on_reply(self, call: int, reply: Any, timing: Any) -> None:
        pass

    def on_control(self, control: int, action: Any, frame: Any, call: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:  # listener events added later: ignored
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


def run_one(case: Any, controls: int, k: int, case_dir: Path) -> dict[str, Any]:
    from pytest_libero.episode.case import run_case_with_evidence

    plan = c.plan_for(c.inprocess_zero_profile(k), case, controls, k)
    policy = plan.profile.build_policy()
    probe = FirstObservation()
    kwargs: dict[str, Any] = {}
    if "listener" in inspect.signature(run_case_with_evidence).parameters:
        kwargs["listener"] = probe
    t0 = time.perf_counter()
    record = run_case_with_evidence(plan, case, policy, case_dir, **kwargs)
    elapsed = time.perf_counter() - t0
    if record["outcome"] == "errored":
        raise RuntimeError(record["summary"])
    evidence = record.get("evidence") or {}
    disk = sum(f["bytes"] for f in evidence.get("files", {}).values())
    return {"controls": record["counters"]["executed_controls"], "seconds": elapsed,
            "first_obs_rss_kib": probe.rss_kib, "evidence_bytes": disk}


def child_single(args: argparse.Namespace) -> None:
    c.prepare_simulator()
    case = c.catalog_entry(args.suite, args.task)
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    try:
        before = status_kib("VmRSS")
        out = run_one(case, args.controls, args.replan_interval, work / "case")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out.update({
        "start_rss_kib": before,
        "end_rss_kib": status_kib("VmRSS"),
        "hwm_kib": status_kib("VmHWM"),
        "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    })
    print(MARK + json.dumps(out), flush=True)


def child_sequence(args: argparse.Namespace) -> None:
    c.prepare_simulator()
    work = Path(tempfile.mkdtemp(prefix="bench-memory-seq-"))
    tasks = [args.task] * args.seq_cases if args.seq_same_task else list(range(args.seq_cases))
    try:
        print(MARK + json.dumps({"case": "start", "rss_kib": status_kib("VmRSS")}), flush=True)
        for number, task in enumerate(tasks, 1):
            case = c.catalog_entry(args.suite, task)
            out = run_one(case, args.seq_controls, args.replan_interval, work / f"case-{number}")
            shutil.rmtree(work / f"case-{number}", ignore_errors=True)
            gc.collect()
            heap = malloc_stats() or {"in_use": -1, "free_held": -1}
            line = {
                "case": number, "task": case.case_id, "rss_kib": status_kib("VmRSS"),
                "hwm_kib": status_kib("VmHWM"),
                "heap_in_use_kib": heap["in_use"] // 1024,
                "heap_free_held_kib": heap["free_held"] // 1024,
                "objects": len(gc.get_objects()),
                "fds": len(os.listdir("/proc/self/fd")),
                "threads": threading.active_count(),
                "seconds": out["seconds"],
            }
            if args.trim:
                malloc_trim()
                line["rss_after_trim_kib"] = status_kib("VmRSS")
            print(MARK + json.dumps(line), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def spawn(extra: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    command = [sys.executable, __file__, *extra, "--suite", args.suite, "--task", str(args.task),
               "--replan-interval", str(args.replan_interval)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [json.loads(out[len(MARK):]) for out in done.stdout.splitlines() if out.startswith(MARK)]
    if done.returncode != 0:
        raise SystemExit(f"child {' '.join(extra)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return lines


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="libero_10")
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--replan-interval", "-k", type=int, default=5)
    parser.add_argument("--short", type=int, default=50, help="controls of the short case")
    parser.add_argument("--long", type=int, default=500, help="controls of the long case")
    parser.add_argument("--repeats", type=int, default=1, help="fresh processes per length")
    parser.add_argument("--seq-cases", type=int, default=6)
    parser.add_argument("--seq-controls", type=int, default=10)
    parser.add_argument("--seq-same-task", action="store_true")
    parser.add_argument("--trim", action="store_true",
                        help="call malloc_trim(0) after each consecutive case (diagnostic)")
    parser.add_argument("--skip-peak", action="store_true")
    parser.add_argument("--skip-seq", action="store_true")
    parser.add_argument("--child", choices=("single", "sequence"), help=argparse.SUPPRESS)
    parser.add_argument("--controls", type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> int:
    args = arguments()
    if args.child == "single":
        child_single(args)
        return 0
    if args.child == "sequence":
        child_sequence(args)
        return 0

    print(f"# memory: {args.suite} task {args.task}, K={args.replan_interval}, evidence and video on, "
          "in-process zero policy")
    print(f"# {c.machine_note()}")
    if not args.skip_peak:
        peak_table(args)
    if not args.skip_seq:
        sequence_table(args)
    return 0


def peak_table(args: argparse.Namespace) -> None:
    """Table 1: a short and a long case, each in a fresh process; their peak RSS."""
    runs: dict[int, list[dict[str, Any]]] = {args.short: [], args.long: []}
    for repeat in range(args.repeats):
        for n in c.interleaved_order([args.short, args.long], repeat):
            out = spawn(["--child", "single", "--controls", str(n)], args)[0]
            runs[n].append(out)
            print(f"#   {n} controls: peak {mib(out['hwm_kib']):.0f} MiB in {out['seconds']:.0f} s",
                  flush=True)
    print()
    rows = []
    for n, outs in runs.items():
        rows.append([
            n, len(outs),
            mib(c.median([o["ru_maxrss_kib"] for o in outs])),
            mib(c.median([o["hwm_kib"] for o in outs])),
            mib(c.median([o["first_obs_rss_kib"] or float("nan") for o in outs])),
            mib(c.median([o["end_rss_kib"] for o in outs])),
            c.median([o["evidence_bytes"] for o in outs]) / 2**20,
            c.median([o["seconds"] for o in outs]),
        ])
    c.print_table(["controls", "processes", "peak RSS MiB (ru_maxrss)", "VmHWM MiB",
                   "RSS at 1st obs MiB", "RSS at end MiB",
                   "evidence MiB", "case s"], rows)
    short = c.median([o["hwm_kib"] for o in runs[args.short]])
    long = c.median([o["hwm_kib"] for o in runs[args.long]])
    print()
    print(c.ratio_line(f"peak RSS ratio {args.long}/{args.short} controls", long, short,
                       "<= 1.10"))


def sequence_table(args: argparse.Namespace) -> None:
    """Table 2: consecutive cases in one fresh process; memory after each."""
    lines = spawn(["--child", "sequence", "--seq-cases", str(args.seq_cases),
                   "--seq-controls", str(args.seq_controls),
                   *(["--seq-same-task"] if args.seq_same_task else []),
                   *(["--trim"] if args.trim else [])], args)
    start = lines[0]["rss_kib"]
    cases = lines[1:]
    print()
    print(f"# {len(cases)} consecutive cases in one process, {args.seq_controls} controls each; "
          f"RSS before the first: {mib(start):.0f} MiB")
    rows = []
    previous = None
    for line in cases:
        rows.append([
            line["case"], line["task"], mib(line["rss_kib"]),
            "-" if previous is None else f"{mib(line['rss_kib'] - previous):+.0f}",
            mib(line["hwm_kib"]), mib(line["heap_in_use_kib"]), mib(line["heap_free_held_kib"]),
            *([mib(line["rss_after_trim_kib"])] if args.trim else []),
            line["objects"], line["fds"], line["threads"],
        ])
        previous = line["rss_kib"]
    c.print_table(["case", "task", "RSS after MiB", "change MiB", "peak MiB",
                   "C heap in use MiB", "C heap free but held MiB",
                   *(["RSS after malloc_trim MiB"] if args.trim else []),
                   "live objects", "open fds", "threads"], rows)
    first, last = cases[0], cases[-1]
    if len(cases) > 1:
        steps = len(cases) - 1
        print()
        def per_case(key: str) -> float:
            return mib(last[key] - first[key]) / steps

        print(f"RSS growth per case after the first: {per_case('rss_kib'):+.1f} MiB; "
              f"C heap in use {per_case('heap_in_use_kib'):+.1f} MiB, "
              f"free but held {per_case('heap_free_held_kib'):+.1f} MiB")


if __name__ == "__main__":
    raise SystemExit(main())
