"""Deciding a gated run early (``--libero-decide``): episodes, seconds and wrong verdicts.

    python bench/decide_early.py                  # the grid, 200 simulated runs per row
    python bench/decide_early.py --runs 1000 --json
    MUJOCO_GL=egl python bench/decide_early.py --measure   # this machine's costs first

Simulated outcome vectors, decided by the package's own decision
(``pytest_libero.results.decision.Tracker``, the code a run uses), one case at a time in
the order the plugin hands them out (one worker):

- Bernoulli cases with per-task rates spread around a true rate (each task's rate drawn
  from a Beta of mean the true rate and concentration 20): N = 130 (fast mode, the 130
  tasks once) and N = 6,500 (full mode, each task from 50 states);
- populations built from the published per-suite figures (``data/published_results.json``,
  the four suites they cover: 40 tasks x 50 states = 2,000 cases, each task's rate drawn
  around its suite's figure).

Per row: the mean fraction of the N episodes run; the mean fraction of seconds of set-up
plus episode against the whole run (native order, a kept environment per task in full
mode), from this machine's build, reset and per-control costs; and the fraction of
verdicts that differ from the whole selection's. Targets (the issue's): anytime at
6,500 and rates 0.97 and 0.8 under 0.05 of the episodes, 0.5 under 0.01; at 130 and 0.5
under 0.15; wrong verdicts at most alpha in every anytime row, none in an exact row.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_libero.config.decide import drawn_order, running_order  # noqa: E402
from pytest_libero.results.decision import ANYTIME, EXACT, DecideSpec, Tracker  # noqa: E402
from pytest_libero.results.published import load_published  # noqa: E402

SUITES = {"libero_spatial": (10, 220), "libero_object": (10, 280), "libero_goal": (10, 300),
          "libero_10": (10, 520), "libero_90": (90, 400)}
"""Tasks and control cap (the catalog's reference horizon) per suite."""
STATES = 50
THRESHOLD = 0.9
ALPHA = 0.05
RATES = (0.5, 0.8, 0.88, 0.9, 0.92, 0.97)
SUCCESS_AT = 0.6
"""A successful episode ends at this share of its horizon (a failure runs it whole)."""


@dataclass(frozen=True)
class Costs:
    """Seconds on this machine (2 shared CPU cores, Mesa llvmpipe): ``--measure`` redoes it."""

    build_s: float = 3.5
    """Construct one LIBERO environment (model, GL context, textures)."""
    reset_s: float = 3.3
    """One native env.reset() (full mode replays k of them to reach state k)."""
    settle_s: float = 0.4
    """Install the state and the 10 settling controls, the first observation."""
    control_s: float = 0.15
    """One control with the plugin's default rendering: agentview for the video at every
    control, both cameras at each observation (K = 5)."""


@dataclass(frozen=True)
class Case:
    case: str
    task: str
    state: int
    horizon: int
    success: bool


def population(rates: dict[str, float], states: int, rng: random.Random) -> list[Case]:
    """The cases of the selection in native order, task by task, then by state; each
    task's rate drawn around its suite's rate (Beta, concentration 20)."""
    cases: list[Case] = []
    for suite, rate in rates.items():
        tasks, horizon = SUITES[suite]
        for t in range(tasks):
            p = rng.betavariate(20 * rate, 20 * (1 - rate)) if 0 < rate < 1 else rate
            task = f"{suite}-{t:02d}"
            for s in range(states):
                name = f"{task}-s{s}" if states > 1 else task
                cases.append(Case(name, task, s, horizon, rng.random() < p))
    return cases


def case_seconds(case: Case, held: Case | None, costs: Costs, full: bool) -> float:
    """Set-up plus episode of one case, after ``held`` (the worker's previous case, whose
    environment is kept when this case continues it: same task, later state)."""
    episode = costs.control_s * case.horizon * (SUCCESS_AT if case.success else 1.0)
    if not full:
        return costs.build_s + costs.reset_s + costs.settle_s + episode
    if held is not None and held.task == case.task and held.state < case.state:
        resets = case.state - held.state
        return resets * costs.reset_s + costs.settle_s + episode
    return costs.build_s + (case.state + 1) * costs.reset_s + costs.settle_s + episode


def run_seconds(run: Sequence[Case], costs: Costs, full: bool) -> float:
    total, held = 0.0, None
    for case in run:
        total += case_seconds(case, held, costs, full)
        held = case
    return total


@dataclass
class Row:
    mode: str
    population: str
    n: int
    true_rate: float
    fractions: list[float]
    time_fractions: list[float]
    wrong: int = 0

    def as_dict(self) -> dict[str, object]:
        runs = len(self.fractions)
        return {"mode": self.mode, "population": self.population, "N": self.n,
                "threshold": THRESHOLD, "true_rate": self.true_rate, "runs": runs,
                "mean_fraction": sum(self.fractions) / runs,
                "mean_time_fraction": sum(self.time_fractions) / runs,
                "wrong_rate": self.wrong / runs}


def decide_one(cases: list[Case], mode: str, full: bool, costs: Costs,
               rng: random.Random) -> tuple[float, float, bool]:
    """One simulated run: fraction of episodes, fraction of seconds, verdict wrong."""
    native = [c.case for c in cases]
    by_name = {c.case: c for c in cases}
    seed = rng.randrange(2**32)
    order = drawn_order(native, seed) if mode == ANYTIME else tuple(native)
    running = running_order(order, native, "full" if full else "fast") if mode == ANYTIME else order
    spec = DecideSpec(mode, order, alpha=ALPHA if mode == ANYTIME else None, order_seed=seed,
                      min_success=THRESHOLD)
    tracker = Tracker(spec, native)
    ran: list[Case] = []
    for name in running:
        case = by_name[name]
        ran.append(case)
        outcome = "success" if case.success else "failure"
        if tracker.add({"case": name, "outcome": outcome}) is not None:  # type: ignore[typeddict-item]
            break
    truth = sum(c.success for c in cases) / len(cases) >= THRESHOLD
    decision = tracker.decision
    wrong = decision is not None and (decision.verdict == "pass") != truth
    whole = run_seconds(cases, costs, full)
    return len(ran) / len(cases), run_seconds(ran, costs, full) / whole, wrong


def simulate(mode: str, label: str, rates: dict[str, float], states: int, true_rate: float,
             runs: int, costs: Costs, rng: random.Random) -> Row:
    row = None
    for _ in range(runs):
        cases = population(rates, states, rng)
        if row is None:
            row = Row(mode, label, len(cases), true_rate, [], [])
        fraction, seconds, wrong = decide_one(cases, mode, states > 1, costs, rng)
        row.fractions.append(fraction)
        row.time_fractions.append(seconds)
        row.wrong += wrong
    assert row is not None
    return row


def published_populations() -> list[tuple[str, dict[str, float]]]:
    """One population per model with all four suites' figures."""
    found = []
    for figure in load_published().figures:
        rates = {s: figure.success_percent[s] / 100 for s in SUITES if s in figure.success_percent}
        if len(rates) == 4:
            found.append((f"published {figure.label}", rates))
    return found


def measure() -> Costs:
    """Time, on this machine, a fresh libero_10 task 0 episode at states 0 and 3 (the
    difference is three native resets) and 50 controls of it, rendered as the plugin does."""
    import _common as c
    import numpy as np

    from pytest_libero.adapters.libero import LiberoEpisode

    c.prepare_simulator()
    entry = c.catalog_entry("libero_10", 0)
    LiberoEpisode(entry, track="rgb", control_cap=1).close()  # imports and caches, untimed
    seconds = {}
    for state in (0, 3):
        t0 = time.perf_counter()
        episode = LiberoEpisode(entry.at_state(state), track="rgb", control_cap=60)
        seconds[state] = time.perf_counter() - t0
        if state == 3:
            t0 = time.perf_counter()
            for n in range(50):
                episode.step(np.zeros(7), observe_next=(n + 1) % 5 == 0)
                episode.frame()
                if (n + 1) % 5 == 0:
                    episode.observe(n // 5 + 1, n + 1)
            control_s = (time.perf_counter() - t0) / 50
        episode.close()
    reset_s = (seconds[3] - seconds[0]) / 3
    build = seconds[0] - reset_s
    return Costs(build_s=round(build * 0.9, 2), reset_s=round(reset_s, 2),
                 settle_s=round(build * 0.1, 2), control_s=round(control_s, 3))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="simulated runs per row")
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    parser.add_argument("--measure", action="store_true",
                        help="measure this machine's build, reset and control costs first")
    parser.add_argument("--seed", type=int, default=20261203)
    args = parser.parse_args()
    costs = measure() if args.measure else Costs()
    if not args.json:
        print(f"costs: {costs}")
    rng = random.Random(args.seed)
    grid: list[tuple[str, dict[str, float], int, float]] = []
    for rate in RATES:
        grid.append(("130 tasks", {s: rate for s in SUITES}, 1, rate))
        grid.append(("130 tasks x 50 states", {s: rate for s in SUITES}, STATES, rate))
    for label, rates in published_populations():
        grid.append((label, rates, STATES, round(sum(rates.values()) / len(rates), 4)))
    for mode in (EXACT, ANYTIME):
        for label, rates, states, true_rate in grid:
            t0 = time.perf_counter()
            row = simulate(mode, label, rates, states, true_rate, args.runs, costs, rng)
            found = row.as_dict()
            if args.json:
                print(json.dumps(found), flush=True)
            else:
                print(f"{mode:7} {label:24} N={row.n:5} rate {true_rate:<6g} episodes "
                      f"{found['mean_fraction']:.4f} seconds {found['mean_time_fraction']:.4f} "
                      f"wrong {found['wrong_rate']:.4f}  ({time.perf_counter() - t0:.0f} s)",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
