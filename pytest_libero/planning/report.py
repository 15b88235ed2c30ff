"""What ``pytest-libero plan`` prints: the figures, each beside what it assumes."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from pytest_libero.planning.decided import UNDECIDED
from pytest_libero.planning.detect import (
    ASSUMPTIONS,
    EARLY_MOST,
    FEWEST,
    INDEPENDENT,
    Detect,
    Need,
)
from pytest_libero.planning.figures import HOUR, LONGEST_S
from pytest_libero.planning.model import (
    Assumptions,
    CaseShape,
    CostTable,
    PhaseCosts,
    Prediction,
    best,
    case_cost,
    saturation,
)


@dataclass(frozen=True)
class Planned:
    """Everything the plan says, for the text and for tests."""

    shapes: tuple[CaseShape, ...]
    costs: CostTable
    assume: Assumptions
    predictions: tuple[Prediction, ...]
    asked: Prediction
    """The worker count this command gives (``-n``; 1 without)."""
    mode: str
    decided: float | None = None
    """With --libero-decide and a success gate: the expected share of cases run."""
    decided_rate: float | None = None
    detect: Detect | None = None
    """``--detect``: the pairs a claim needs (planning/detect.py)."""


def duration(seconds: float) -> str:
    """``45s``, ``3m 20s``, ``1h 05m``; past :data:`LONGEST_S` (or not a number), never
    spelled out in full."""
    if not 0 <= seconds <= LONGEST_S:
        return f"over {LONGEST_S / HOUR:.0f}h" if seconds > 0 else "?"
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours}h {minute:02d}m" if hours else f"{minute}m {second:02d}s" if minute else f"{second}s"


def plan_lines(planned: Planned) -> list[str]:
    shapes, table, assume = planned.shapes, planned.costs, planned.assume
    suites = Counter(shape.case.split("-")[0] for shape in shapes)
    caps = sum(shape.control_cap for shape in shapes)
    expected = sum(case_cost(shape, table, assume).episode_s for shape in shapes)
    scenes = list(dict.fromkeys(shape.scene for shape in shapes))
    costs = table.default
    lines = [
        f"pytest-libero plan: {len(shapes)} case{'' if len(shapes) == 1 else 's'} "
        f"({', '.join(f'{s} x {n}' for s, n in suites.items())}; "
        f"{planned.mode} mode), at most {caps:,} controls in all",
        "phase costs: " + "; ".join(_scene_costs(table.of(scene), f"{scene}: " if len(scenes) > 1 else "")
                                    for scene in scenes or [""])
        + f"; a call's own work {1000 * costs.call_s:.0f} ms, the run's start and finish "
        f"{costs.overhead_s:.1f} s; from {costs.source}",
        "assumed: " + ("every case fails and runs its whole control cap" if assume.success_rate == 0 else
                       f"{assume.success_rate:.0%} of cases succeed, at {assume.success_share:.0%} of "
                       "their cap; the rest run it whole")
        + f" (--success-rate, --success-share); policy {1000 * assume.latency_s:.1f} ms per call "
        f"({assume.latency_source}); set-ups {'overlap' if assume.prebuild else 'follow'} the "
        f"episode before them (--libero-prebuild); episodes {duration(expected)} of work in all",
        "  workers  wall time   set by",
    ]
    for p in planned.predictions:
        mark = "  <- this command's -n" if p.workers == planned.asked.workers else ""
        lines.append(f"  {p.workers:7d}  {duration(p.wall_s):>9}   {p.bound}{mark}")
    if planned.asked not in planned.predictions:
        p = planned.asked
        lines.append(f"  {p.workers:7d}  {duration(p.wall_s):>9}   {p.bound}  <- this command's -n")
    chosen = best([*planned.predictions, planned.asked])
    limit = saturation(planned.predictions)
    said = f"fewest workers for the shortest run: {chosen.workers} ({duration(chosen.wall_s)})"
    if limit is not None:
        said += (f"; from {limit.workers} workers on, the {limit.bound} set the pace, and more "
                 "workers do not shorten the run")
    lines.append(said)
    if planned.decided is not None:
        lines.append(f"--libero-decide: expected to run {planned.decided:.0%} of the cases at a true "
                     f"success rate of {planned.decided_rate:.0%} (--rate; the decision rule's own "
                     "simulation), the wall times above scale by about that")
    if planned.detect is not None:
        lines.extend(detect_lines(planned.detect, planned.asked.workers))
    return lines


WHAT: dict[str, str] = {
    FEWEST: "the two runs disagree only on the episodes that make the difference, all one "
            "way: no pair of runs that far apart disagrees less, so no claim needs fewer",
    INDEPENDENT: "each run's outcome says nothing of the other's within a suite; two "
                 "checkpoints of one model fail many of the same episodes and need fewer",
}
"""Each assumption about how often the two runs disagree, in words."""


def _need(need: Need) -> str:
    if need.pairs is None:
        return "not reachable"
    return f"{need.pairs:,}" + ("" if need.wall_s is None else f" ({duration(need.wall_s)})")


def detect_lines(found: Detect, workers: int) -> list[str]:
    """The pairs each row needs under each assumption, and what early decision saves."""
    suites = [r for r in found.rows if r.alpha != found.alpha] or list(found.rows)
    each = (f"; each suite at alpha {suites[0].alpha:.4g} (0.05 over {len(suites)} suites, "
            "Bonferroni: compare's Holm correction needs no more)" if len(found.rows) > 1 else "")
    lines = [
        f"--detect {100 * found.difference:.1f} points either way with power {found.power:.0%}: "
        f"compare's test (McNemar's exact, two-sided, alpha {found.alpha:g}{each}) at the success "
        f"rates of --baseline {found.baseline}; pairs needed (wall time on {workers} "
        f"worker{'' if workers == 1 else 's'}, this command's -n):",
        f"  {'suite':<20} {'baseline':>15}  {'fewest discordant':>22}  {'independent outcomes':>22}"
        "  planned cases: power",
    ]
    for row in found.rows:
        fewest, independent = (next(n for n in row.needs if n.assumption == a) for a in ASSUMPTIONS)
        lines.append(
            f"  {row.group:<20} {row.baseline_rate:6.1%} of {row.baseline_completed:<5,}  "
            f"{_need(fewest):>22}  {_need(independent):>22}  {row.planned:,}: "
            f"{fewest.planned_power:.0%} / {independent.planned_power:.0%}")
    lines.append(f"  fewest discordant: {WHAT[FEWEST]}; independent outcomes: {WHAT[INDEPENDENT]}. "
                 "A count above a row's planned cases needs more episodes than the selection has; "
                 "pairs are modelled as drawn independently")
    if found.left_out:
        lines.append(f"  not in --baseline: {', '.join(found.left_out)} (no completed case to take a "
                     "rate from)")
    if found.early is not None:
        e = found.early
        how = (f"{e.mode}, alpha {e.alpha:g}, margin {100 * e.margin:.1f} points" if e.alpha is not None
               else e.mode)
        said = "; ".join(
            f"{name}: {sim.share:.0%} of them, FAIL (B worse) in {sim.verdicts['fail']:.0%} of "
            f"runs, PASS in {sim.verdicts['pass']:.0%}"
            + (f", undecided in {sim.verdicts[UNDECIDED]:.0%}" if sim.verdicts[UNDECIDED] else "")
            for name, sim in e.simulated.items())
        if not e.simulated:
            lines.append(
                f"--libero-decide ({how}) with --libero-baseline {found.baseline}: not simulated "
                f"over {e.cases:,} cases (more than {EARLY_MOST:,}: its exact rule's McNemar test "
                "over every pair makes each simulated run cost seconds; plan one suite to see it). "
                "It answers 'is B worse', never 'is B better': a claim of improvement runs its "
                "pairs whole")
            return lines
        lines.append(
            f"--libero-decide ({how}) with --libero-baseline {found.baseline}: if B is "
            f"{100 * found.difference:.1f} points worse, a run of the {e.cases:,} planned cases the "
            f"baseline completed stops after, on average ({next(iter(e.simulated.values())).runs} "
            f"runs of the decision rule's own simulation), {said}. It answers 'is B worse', never "
            "'is B better' (its PASS is no regression found, or not worse by more than the "
            "margin): a claim of improvement runs its pairs whole")
    return lines


def _scene_costs(costs: PhaseCosts, label: str) -> str:
    return (f"{label}build {costs.build_s:.2f} s, native reset {costs.reset_s:.2f} s, a control's "
            f"physics {1000 * costs.physics_s:.1f} ms, a camera image {1000 * costs.render_s:.1f} ms, "
            f"{costs.cpu_per_wall:.2f} CPU seconds per second")


def plan_object(planned: Planned) -> dict[str, Any]:
    """The plan as data (``--json``): what the text says, each figure with its source."""
    chosen = best([*planned.predictions, planned.asked])
    limit = saturation(planned.predictions)
    return {"cases": len(planned.shapes), "mode": planned.mode,
            "controls_at_most": sum(s.control_cap for s in planned.shapes),
            "costs": {**asdict(planned.costs.default), "scenes": {
                name: asdict(costs) for name, costs in planned.costs.scenes.items()}},
            "assumptions": asdict(planned.assume),
            "predictions": [asdict(p) for p in planned.predictions], "asked": asdict(planned.asked),
            "best_workers": chosen.workers,
            "saturates_at": None if limit is None else {"workers": limit.workers, "by": limit.bound},
            "decide": None if planned.decided is None else {
                "expected_share": planned.decided, "true_rate": planned.decided_rate},
            "detect": None if planned.detect is None else detect_object(planned.detect)}


def detect_object(found: Detect) -> dict[str, Any]:
    """``--json``'s ``detect`` block: every row's pairs under each assumption, unrounded."""
    early = found.early
    return {
        "difference": found.difference, "power": found.power, "alpha": found.alpha,
        "test": "McNemar's exact test, two-sided, as pytest-libero compare judges",
        "baseline": found.baseline, "assumptions": dict(WHAT),
        "rows": [{"group": r.group, "baseline_rate": r.baseline_rate,
                  "baseline_completed": r.baseline_completed, "planned_cases": r.planned,
                  "alpha": r.alpha,
                  "needs": {n.assumption: {"pairs": n.pairs, "wall_s": n.wall_s,
                                           "planned_power": n.planned_power} for n in r.needs}}
                 for r in found.rows],
        "not_in_baseline": list(found.left_out),
        "decide": None if early is None else {
            "mode": early.mode, "alpha": early.alpha, "margin": early.margin,
            "baseline_alpha": early.baseline_alpha, "cases": early.cases,
            "simulated": bool(early.simulated),
            "b_worse_by_difference": {name: {"expected_share": sim.share, "verdicts": sim.verdicts,
                                             "runs": sim.runs}
                                      for name, sim in early.simulated.items()},
            "decides": "whether B is worse than A (or not worse by more than the margin); "
                       "never that B is better"}}
