"""The figure of docs/compare.md: two runs' success rates per suite with their intervals.

    python docs/compare_figure.py RUN_A RUN_B OUT.png   # your own two runs
    python docs/compare_figure.py                       # the page's example

It plots what ``pytest-libero compare RUN_A RUN_B --json`` says: each suite's rate of
both runs over the paired episodes with its 95% Wilson interval, and beside it B minus A
with its exact interval, a star where the difference is significant after Holm's
correction. Without arguments it first writes the page's two example run folders: they
are made up here, by a seeded draw (outcomes only, no simulator, no model), to show how
the numbers read; they are no checkpoint's result. Needs matplotlib (the test extra).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

SUITES = {"libero_spatial": (0.90, 0.93), "libero_object": (0.88, 0.89), "libero_goal": (0.84, 0.86),
          "libero_10": (0.60, 0.70)}
"""The example's chance of success per suite for checkpoint A and checkpoint B."""
SHARED = 0.7
"""The share of episodes whose draw the two checkpoints share."""
TASKS, STATES = 10, 10
FIGURE = Path(__file__).parent / "images" / "compare_two_checkpoints.png"


def example_run(root: Path, name: str, which: int) -> Path:
    """A full-mode run folder of outcomes drawn per suite, seeded: most episodes share
    their draw between the two checkpoints, so an easy episode is mostly easy for both (as
    real pairs are), and the rest are drawn apart."""
    folder = root / name / f"20260101T000000Z-{which:06x}"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(64)
    cases, lines = [], []
    for suite, chances in SUITES.items():
        for task in range(TASKS):
            for state in range(STATES):
                case = f"{suite}-{task:02d}-s{state}"
                cases.append(case)
                shared, own, fresh = rng.uniform(), rng.uniform(), rng.uniform(size=2)
                draw = shared if own < SHARED else fresh[which]
                outcome = "success" if draw < chances[which] else "failure"
                lines.append(json.dumps({"case": case, "outcome": outcome,
                                         "entry": {"suite": suite, "index": task}}))
    from pytest_libero.protocol.identity import protocol_identity

    plan = {"profile": {"name": name}, "mode": "full",
            "selection": {"scope": "all", "mode": "full", "init_states": list(range(STATES))},
            "selection_cases": cases, "shard": None, "budget_mode": "horizon",
            "max_policy_calls": None, "replan_interval": 5, "track": "rgb",
            "evidence_class": "capability"}
    (folder / "run.json").write_text(json.dumps({"run_id": folder.name, "plan": plan,
                                                 "protocol_identity": protocol_identity()}))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def comparison(a: Path, b: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "compare", str(a), str(b),
                           "--json"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr.strip())
    found: dict[str, Any] = json.loads(done.stdout)["comparisons"][0]
    return found


def plot(found: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = found["suites"] + [found["overall"]]
    names = [r["group"] for r in rows]
    y = np.arange(len(rows))[::-1]
    fig, (rates, diff) = plt.subplots(1, 2, figsize=(9, 0.55 * len(rows) + 2.0), sharey=True,
                                      gridspec_kw={"width_ratios": [3, 2]})
    for offset, side, colour in ((0.14, "a", "#7a7a7a"), (-0.14, "b", "#1f6fb2")):
        centre = [100 * r[side]["rate"] for r in rows]
        low = [c - 100 * r[side]["wilson95"][0] for c, r in zip(centre, rows)]
        high = [100 * r[side]["wilson95"][1] - c for c, r in zip(centre, rows)]
        rates.errorbar(centre, y + offset, xerr=[low, high], fmt="o", color=colour, capsize=3,
                       label=f"{side.upper()}: {found[side]}")
    rates.set_yticks(y, names)
    rates.set_xlabel("success rate, % (95% Wilson interval)")
    rates.grid(axis="x", alpha=0.3)
    centre = [100 * r["difference"] for r in rows]
    low = [c - 100 * r["interval"][0] for c, r in zip(centre, rows)]
    high = [100 * r["interval"][1] - c for c, r in zip(centre, rows)]
    diff.errorbar(centre, y, xerr=[low, high], fmt="s", color="#b2501f", capsize=3)
    diff.axvline(0, color="black", linewidth=0.8)
    for yy, r, c, h in zip(y, rows, centre, high):
        if r["significant"]:
            diff.annotate("*", (c + h, yy), xytext=(4, -4), textcoords="offset points", fontsize=14)
    diff.set_xlabel("B - A, points (exact 95% interval)")
    diff.grid(axis="x", alpha=0.3)
    fig.suptitle(f"paired over {found['paired']} episodes; * significant "
                 "(McNemar, Holm over the suites)", fontsize=9)
    fig.legend(loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv: list[str]) -> None:
    if argv:
        a, b, out = (Path(arg) for arg in argv)
        plot(comparison(a, b), out)
        return
    with tempfile.TemporaryDirectory() as root:
        a, b = example_run(Path(root), "ckpt-20k", 0), example_run(Path(root), "ckpt-40k", 1)
        plot(comparison(a, b), FIGURE)
        text = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "compare", str(a), str(b)],
                              capture_output=True, text=True)
        print(text.stdout.replace(root, "..."), end="")
        print(f"figure: {FIGURE}")


if __name__ == "__main__":
    main(sys.argv[1:])
