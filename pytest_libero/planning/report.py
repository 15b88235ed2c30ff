"""What ``pytest-libero plan`` prints: the figures, each beside what it assumes."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

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
                "expected_share": planned.decided, "true_rate": planned.decided_rate}}
