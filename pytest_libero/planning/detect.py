"""How many paired episodes a claim needs (``pytest-libero plan --detect D --baseline RUN``).

For each suite (compare's rows: a suite, a perturbed suite's own row) that both the
planned selection and the baseline run have, at the baseline's success rate p there: the
fewest pairs n at which compare's test (``planning/power.py``) finds a difference of D
either way with the stated power. The chance that a pair disagrees is not in one run, so
two assumptions bracket it:

- ``fewest discordant``: B differs from A on a share D of episodes, all one way (B wins
  only where A lost, or the mirror). No two runs whose rates are D apart disagree less
  often, and no claim needs fewer pairs;
- ``independent``: each run's outcome independent of the other's within the suite: B
  wins alone with chance p_B (1 - p), A alone with p (1 - p_B). Two checkpoints of one
  model fail many of the same episodes, so they disagree less often, and need fewer.

"Either way" is the larger n of B D better and B D worse (where each is a rate at all).
With k suites compare judges each by Holm's adjusted p-value; each suite's n is here at
alpha / k (Bonferroni), which is never more powerful than Holm, so the n is enough. The
overall row is one test at alpha, over the planned selection's mix of suites, each moved
by D. Pairs are modelled as drawn independently; a suite of N cases has N distinct pairs
to give, and the power of those N is said beside the n.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.config.decide import DecideSettings
from pytest_libero.planning.decided import Simulated, paired_fraction
from pytest_libero.planning.model import CaseShape
from pytest_libero.planning.power import pairs_needed, power
from pytest_libero.protocol.errors import SetupError
from pytest_libero.publish.comparison import ALPHA, OVERALL
from pytest_libero.results.rates import COMPLETED
from pytest_libero.results.robustness import suite_key
from pytest_libero.results.run_reader import RunRead, read_run, shown

FEWEST = "fewest discordant"
INDEPENDENT = "independent"
ASSUMPTIONS = (FEWEST, INDEPENDENT)
EARLY_MOST = 600
"""The most cases the early decision is simulated over: the exact rule recomputes
McNemar's test over every pair at each case, so a simulated run of 1,200 cases took
0.8 s here and one of 2,400 took 11 s (200 runs of each, twice)."""


@dataclass(frozen=True)
class Need:
    """What one assumption gives a row."""

    assumption: str
    pairs: int | None
    """None: more than ``power.MOST_PAIRS``, or no rate is D away from the baseline's."""
    planned_power: float
    """The power of the planned selection's own pairs of the row."""
    wall_s: float | None = None
    """The predicted wall time of ``pairs`` episodes of the row (this command's -n)."""


@dataclass(frozen=True)
class DetectRow:
    group: str
    baseline_rate: float
    baseline_completed: int
    planned: int
    """The planned selection's cases of the row."""
    alpha: float
    needs: tuple[Need, ...]


@dataclass(frozen=True)
class Detect:
    """The ``detect`` block: D, the power asked for, the baseline and the rows."""

    difference: float
    power: float
    alpha: float
    baseline: str
    rows: tuple[DetectRow, ...]
    """The suites', then the overall row when there is more than one suite."""
    left_out: tuple[str, ...] = ()
    """Planned suites the baseline has no completed case of."""
    early: Early | None = None


@dataclass(frozen=True)
class Early:
    """What ``--libero-decide`` with ``--libero-baseline`` does when B is D worse: its
    settings and, per assumption, the decision rule's own simulation over the planned
    cases the baseline completed."""

    mode: str
    alpha: float | None
    margin: float
    baseline_alpha: float
    cases: int
    simulated: Mapping[str, Simulated]
    """Empty when ``cases`` is more than :data:`EARLY_MOST`: not simulated."""


def group_of(case: str) -> str:
    """A case id's row, as compare files it (``results.robustness.suite_key``)."""
    cid = CaseId.parse(case)
    return cid.suite if cid.variant is None else f"{cid.suite}~{cid.variant}"


def baseline_rates(read: RunRead) -> dict[str, tuple[int, int]]:
    """Each row's (successes, completed) in the baseline run."""
    rates: dict[str, tuple[int, int]] = {}
    for record in read.records:
        if record["outcome"] not in COMPLETED:
            continue
        wins, done = rates.get(suite_key(record), (0, 0))
        rates[suite_key(record)] = (wins + (record["outcome"] == "success"), done + 1)
    return rates


def read_baseline(folder: Path) -> tuple[RunRead, dict[str, tuple[int, int]]]:
    """The baseline folder read as every command reads one (its refusal one line)."""
    read = read_run(folder, "--baseline")
    return read, baseline_rates(read)


def discordance(assumption: str, rates: Sequence[tuple[float, float]],
                weights: Sequence[float], difference: float, up: bool) -> tuple[float, float] | None:
    """(B alone, A alone) chances of a pair for rows at ``rates`` (each (p, weight)),
    each moved by ``difference`` up or down; None when a rate would leave [0, 1]."""
    moved = [p + difference if up else p - difference for p, _ in rates]
    if any(not 0.0 <= q <= 1.0 for q in moved):
        return None
    if assumption == FEWEST:
        return (difference, 0.0) if up else (0.0, difference)
    b_only = sum(w * q * (1.0 - p) for w, (p, _), q in zip(weights, rates, moved))
    a_only = sum(w * p * (1.0 - q) for w, (p, _), q in zip(weights, rates, moved))
    return b_only, a_only


def need(assumption: str, rates: Sequence[tuple[float, float]], difference: float,
         target: float, alpha: float, planned: int) -> Need:
    """The larger n of B better and B worse by ``difference`` (each where it is a rate)."""
    total = sum(w for _, w in rates)
    weights = [w / total for _, w in rates]
    found: list[tuple[int | None, float]] = []
    for up in (True, False):
        chances = discordance(assumption, rates, weights, difference, up)
        if chances is not None:
            found.append((pairs_needed(*chances, target, alpha),
                          power(planned, *chances, alpha) if planned else 0.0))
    if not found:
        return Need(assumption, None, 0.0)
    pairs = None if any(n is None for n, _ in found) else max(n for n, _ in found if n is not None)
    return Need(assumption, pairs, min(p for _, p in found))


def detect(difference: float, target: float, baseline: Path, rates: Mapping[str, tuple[int, int]],
           planned_cases: Sequence[str],
           wall: Callable[[Sequence[str], int], float] | None = None) -> Detect:
    """Every row's needs, ``rates`` the baseline's (:func:`baseline_rates`).
    ``wall(cases, n)``: the wall time of n episodes like ``cases``."""
    by_group: dict[str, list[str]] = {}
    for case in planned_cases:
        by_group.setdefault(group_of(case), []).append(case)
    groups = [g for g in by_group if g in rates]
    if not groups:
        raise SetupError(
            f"--baseline {baseline} has no completed case in the planned selection's suites "
            f"({', '.join(shown(g) for g in by_group) or 'none'}; it has "
            f"{', '.join(shown(g) for g in rates) or 'none'}); plan the selection the baseline ran")
    alpha = ALPHA / len(groups)

    def row(group: str, members: Sequence[str], rows: Sequence[tuple[float, float]],
            completed: int, at: float) -> DetectRow:
        needs = []
        for assumption in ASSUMPTIONS:
            found = need(assumption, rows, difference, target, at, len(members))
            if wall is not None and found.pairs is not None:
                found = Need(found.assumption, found.pairs, found.planned_power,
                             wall(members, found.pairs))
            needs.append(found)
        rate = sum(p * w for p, w in rows) / sum(w for _, w in rows)
        return DetectRow(group, rate, completed, len(members), at, tuple(needs))

    rows = [row(g, by_group[g], [(rates[g][0] / rates[g][1], 1.0)], rates[g][1], alpha)
            for g in groups]
    if len(groups) > 1:
        members = [c for g in groups for c in by_group[g]]
        mix = [(rates[g][0] / rates[g][1], float(len(by_group[g]))) for g in groups]
        rows.append(row(OVERALL, members, mix, sum(rates[g][1] for g in groups), ALPHA))
    return Detect(difference, target, ALPHA, str(baseline), tuple(rows),
                  tuple(g for g in by_group if g not in rates))


def early(decide: DecideSettings, baseline_alpha: float, read: RunRead, found: Detect,
          planned_cases: Sequence[str], mode: str) -> Early:
    """The baseline gate's decision over the planned cases the baseline completed (in the
    plan's order), B's outcomes drawn D worse at each row's rate under each assumption:
    the only direction that gate decides (it answers "B worse" or "B not worse by more
    than the margin", never "B better")."""
    outcomes = read.by_case
    baseline = {c: str(outcomes[c]["outcome"]) for c in planned_cases
                if c in outcomes and outcomes[c]["outcome"] in COMPLETED}
    rate = {r.group: r.baseline_rate for r in found.rows}
    d = found.difference

    def fewest(case: str, theirs: str) -> float:
        p = rate.get(group_of(case), 0.0)
        return 0.0 if theirs != "success" or p <= 0 else max(0.0, 1.0 - d / p)

    def independent(case: str, theirs: str) -> float:
        return max(0.0, rate.get(group_of(case), 0.0) - d)

    simulated = {} if len(baseline) > EARLY_MOST else {
        name: paired_fraction(decide, baseline_alpha, baseline, mode, chance)
        for name, chance in ((FEWEST, fewest), (INDEPENDENT, independent))}
    return Early(decide.mode, decide.alpha, decide.margin, baseline_alpha, len(baseline), simulated)


def spread(shapes: Sequence[CaseShape], n: int) -> list[CaseShape]:
    """n episodes like ``shapes``, in their order: n of them spread evenly when there are
    enough (a full-mode task's states stay in order, in their kept environment), else all
    of them again and again, each round a task of its own."""
    if not shapes or n <= 0:
        return []
    if n <= len(shapes):
        return [shapes[i * len(shapes) // n] for i in range(n)]
    rounds = [[replace(s, case=f"{s.case}#{k}", task=f"{s.task}#{k}") if k else s for s in shapes]
              for k in range(-(-n // len(shapes)))]
    return [s for one in rounds for s in one][:n]
