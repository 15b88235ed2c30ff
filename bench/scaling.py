"""Cases per hour with 1 and with 2 pytest-xdist workers, the same selection both times.

    python bench/scaling.py                              # -n 1 vs -n 2, 2 repeats (ABBA)
    python bench/scaling.py --workers 1,2,4 --repeats 1
    python bench/scaling.py --extra=--libero-isolation=none

Each run is a fresh ``python -m pytest -p no:cacheprovider --libero-profile=zero
--libero-scope=development --libero-task-ids=0-3 --libero-budget-mode=decisions
--libero-max-policy-calls=2 --libero-replan-interval=2 -n W`` from an empty temporary
directory (the shipped conformance suite, as a user runs it), with its results in a
temporary folder. Wall time is measured around the whole command (interpreter start,
collection, worker start-up, every case, the summary), so cases per hour is what an
operator gets. The worker counts alternate (1, 2, 2, 1, ...). The per-case column is
the median of the plugin's own ``timings`` (setup + episode) from results.jsonl: how
much each case slows down when workers share the cores.
"""

from __future__ import annotations

import argparse
from typing import Any

import _common as c


def run_workers(workers: int, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        "-q", f"--libero-profile={args.profile}", f"--libero-scope={args.scope}",
        f"--libero-task-ids={args.task_ids}", "--libero-budget-mode=decisions",
        f"--libero-max-policy-calls={args.max_policy_calls}",
        f"--libero-replan-interval={args.replan_interval}", "-n", str(workers), *args.extra,
    ]
    return c.timed_pytest(command, f"-n {workers}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", default="zero")
    parser.add_argument("--scope", default="development")
    parser.add_argument("--task-ids", default="0-3")
    parser.add_argument("--max-policy-calls", type=int, default=2)
    parser.add_argument("--replan-interval", type=int, default=2)
    parser.add_argument("--extra", action="append", default=[],
                        help="one more pytest argument (repeatable), e.g. --extra=--libero-isolation=none")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]

    print(f"# scaling: profile {args.profile}, {args.scope} tasks {args.task_ids}, "
          f"{args.max_policy_calls} calls x K={args.replan_interval}, workers {counts}, "
          f"{args.repeats} repeats {' '.join(args.extra)}")
    print(f"# {c.machine_note()}")
    runs: dict[int, list[dict[str, Any]]] = {w: [] for w in counts}
    for repeat in range(args.repeats):
        order = counts if repeat % 2 == 0 else list(reversed(counts))
        for workers in order:
            out = run_workers(workers, args)
            runs[workers].append(out)
            print(f"#   repeat {repeat + 1} -n {workers}: {out['cases']} cases in {out['wall_s']:.1f} s "
                  f"(pytest exit {out['exit']})", flush=True)
    print()
    rows = []
    cph: dict[int, float] = {}
    for workers, outs in runs.items():
        wall = c.median([o["wall_s"] for o in outs])
        cases = outs[0]["cases"]
        cph[workers] = cases / wall * 3600
        rows.append([workers, len(outs), cases, wall, cph[workers],
                     c.median([o["per_case_s"] for o in outs])])
    c.print_table(["workers", "runs", "cases", "wall s (median)", "cases per hour",
                   "per case s (setup+episode, median)"], rows)
    print()
    base = counts[0]
    for workers in counts[1:]:
        print(c.ratio_line(f"cases-per-hour ratio -n {workers} / -n {base}", cph[workers], cph[base]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
