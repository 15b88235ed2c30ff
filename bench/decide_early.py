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

On score (after the grid; ``--only-score`` alone): paired runs against a
baseline gate with ``--libero-decide=anytime``, decided on success and on the
partial-credit score (``--libero-decide-score``) at the same alpha, over the 130 tasks
with each task's real number of goal predicates (read from the installed BDDL files:
one for 109 tasks, two for 19, three for 2). How far a failure gets is an assumption,
stated per row: a checkpoint with reach q holds each further predicate of a multi-
predicate goal with probability q (the last one only at success), and on a one-predicate
goal reaches ``manipulated`` with probability q, ``reached`` with (1 - q) / 2, else stays
``idle`` (the ladder's 0.5, 0.25, 0). Per row: the mean fraction of episodes to a verdict
on each, and wrong verdicts (an anytime verdict against the truth of the mean difference
it tests; the exact rule's McNemar verdicts are the whole run's). Target (issue 52): at
least 30% fewer episodes on score where the checkpoints differ mainly in how far they
get; wrong verdicts at most alpha in every row.

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


MARGIN = 0.05
LADDER_REACH = {"idle": 0.0, "reached": 0.25, "manipulated": 0.5}


@dataclass(frozen=True)
class Checkpoint:
    """How one simulated checkpoint does: its success rate over the tasks (each task's
    drawn around it, as above) and its reach (how far its failures get)."""

    rate: float
    reach: float


def goal_sizes() -> list[int]:
    """Each of the 130 tasks' number of goal predicates, from the installed BDDL files."""
    from pytest_libero.catalog.entries import load_catalog
    from pytest_libero.catalog.inventory import installed_files
    from pytest_libero.goals.progress import ATOM

    sizes = []
    for suite in SUITES:
        for entry in load_catalog().suite_entries(suite):
            bddl, _ = installed_files(entry.bddl_file, entry.init_states_file)
            text = bddl.read_text(encoding="utf-8")
            sizes.append(len(ATOM.findall(text[text.find("(:goal"):])))
    return sizes


def episode_score(success: bool, size: int, reach: float, rng: random.Random) -> float:
    """A case's score under the row's assumption (goals/score.py's rule)."""
    if success:
        return 1.0
    if size == 1:
        draw = rng.random()
        rung = "manipulated" if draw < reach else "reached" if draw < reach + (1 - reach) / 2 else "idle"
        return LADDER_REACH[rung]
    held = 0
    while held < size - 1 and rng.random() < reach:
        held += 1
    return held / size


def paired_run(sizes: Sequence[int], base: Checkpoint, mine: Checkpoint, score: str,
               rng: random.Random) -> tuple[float, str | None]:
    """One simulated pair of runs decided by the package's Tracker: the fraction of
    episodes run, and whether its verdict was wrong ("wrong"), right ("right") or none."""
    native = [f"case-{n:03d}" for n in range(len(sizes))]
    records, base_outcomes, base_scores = {}, {}, {}
    differences = []
    for name, size in zip(native, sizes):
        task = rng.betavariate(20 * base.rate, 20 * (1 - base.rate))
        theirs = rng.random() < task
        ours = rng.random() < min(1.0, max(0.0, task + mine.rate - base.rate))
        their_score = episode_score(theirs, size, base.reach, rng)
        our_score = episode_score(ours, size, mine.reach, rng)
        base_outcomes[name] = "success" if theirs else "failure"
        base_scores[name] = their_score
        records[name] = {"case": name, "outcome": "success" if ours else "failure", "score": our_score}
        differences.append(our_score - their_score if score == "progress" else float(ours) - float(theirs))
    seed = rng.randrange(2**32)
    order = drawn_order(native, seed)
    spec = DecideSpec(ANYTIME, order, alpha=ALPHA, order_seed=seed, margin=MARGIN,
                      baseline_alpha=ALPHA, baseline=base_outcomes, score=score,
                      baseline_scores=base_scores if score == "progress" else {})
    tracker = Tracker(spec, native)
    ran = 0
    for name in order:
        ran += 1
        if tracker.add(records[name]) is not None:  # type: ignore[arg-type]
            break
    decision = tracker.decision
    if decision is None:
        return 1.0, None
    [gate] = decision.gates
    if gate["by"] != ANYTIME:
        return ran / len(native), "right"  # McNemar's verdict, certain for the whole run
    mean = sum(differences) / len(differences)
    wrong = mean >= 0 if gate["verdict"] == "fail" else mean <= -MARGIN
    return ran / len(native), "wrong" if wrong else "right"


SCORE_ROWS: tuple[tuple[str, Checkpoint, Checkpoint], ...] = (
    ("gets further (same success)", Checkpoint(0.5, 0.3), Checkpoint(0.5, 0.8)),
    ("stops sooner (same success)", Checkpoint(0.5, 0.8), Checkpoint(0.5, 0.2)),
    ("gets further, +5 pts success", Checkpoint(0.5, 0.3), Checkpoint(0.55, 0.8)),
    ("stops sooner, -5 pts success", Checkpoint(0.6, 0.8), Checkpoint(0.55, 0.2)),
    ("the same checkpoint", Checkpoint(0.5, 0.5), Checkpoint(0.5, 0.5)),
    ("5 pts worse, same reach", Checkpoint(0.6, 0.5), Checkpoint(0.55, 0.5)),
)
"""(label, baseline, this run): differing mainly in reach, then the controls."""


def score_rows(runs: int, rng: random.Random, as_json: bool) -> None:
    sizes = goal_sizes()
    for label, base, mine in SCORE_ROWS:
        found: dict[str, dict[str, float]] = {}
        for score in ("success", "progress"):
            fractions, wrong, decided = [], 0, 0
            for _ in range(runs):
                fraction, verdict = paired_run(sizes, base, mine, score, random.Random(rng.random()))
                fractions.append(fraction)
                wrong += verdict == "wrong"
                decided += verdict is not None
            found[score] = {"mean_fraction": sum(fractions) / runs, "wrong_rate": wrong / runs,
                            "decided_rate": decided / runs}
        saving = 1 - found["progress"]["mean_fraction"] / found["success"]["mean_fraction"]
        if as_json:
            print(json.dumps({"row": label, "baseline": base.__dict__, "this_run": mine.__dict__,
                              "N": len(sizes), "runs": runs, **found, "fewer_on_score": saving}),
                  flush=True)
        else:
            print(f"score   {label:30} rate {base.rate:g}->{mine.rate:g} reach {base.reach:g}->"
                  f"{mine.reach:g}: episodes on success {found['success']['mean_fraction']:.3f} "
                  f"(wrong {found['success']['wrong_rate']:.3f}), on score "
                  f"{found['progress']['mean_fraction']:.3f} (wrong {found['progress']['wrong_rate']:.3f}); "
                  f"{saving:+.0%} fewer on score", flush=True)


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
    parser.add_argument("--only-score", action="store_true",
                        help="only the paired rows on success against on score")
    args = parser.parse_args()
    if args.only_score:
        score_rows(args.runs, random.Random(args.seed), args.json)
        return 0
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
    score_rows(args.runs, rng, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
