"""A run plan's cases as the cost model sees them, and phase costs read from a finished run.

The shapes come from the same :class:`~pytest_libero.config.plan.RunPlan` a run makes
(its selection, budgets, replan interval, rendering), so a plan is refused exactly as the
run would be. A finished run folder (``pytest-libero plan --from RUN_DIR``) gives its own
figures: each case's set-up seconds, its episode seconds less the time it waited for the
policy, its controls, renders and calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_libero.config.plan import RunPlan
from pytest_libero.episode.record import CaseRecord
from pytest_libero.planning.model import Assumptions, CaseShape, PhaseCosts
from pytest_libero.results.run_reader import read_run

CAMERAS = 2


def renders_per_control(render: str, video_stride: int, replan_interval: int) -> float:
    """Camera images per control: every camera at every control with ``render=all``;
    otherwise the video's agentview every ``video_stride`` controls and both cameras before
    each call (an agentview image the video already has is not rendered twice)."""
    if render == "all":
        return float(CAMERAS)
    video = 1.0 / video_stride
    return video + (1.0 - video) / replan_interval + 1.0 / replan_interval


def case_shapes(plan: RunPlan, order: Sequence[str] | None = None) -> list[CaseShape]:
    """The plan's cases in the order they are handed out (``order``: a deciding run's)."""
    entries = {e.case_id: e for e in plan.owned}
    ids = [c for c in order if c in entries] if order is not None else list(entries)
    shapes = []
    for case in ids:
        entry = entries[case]
        budget = plan.budget_for(entry)
        shapes.append(CaseShape(
            case, entry.task_id, entry.state, budget.control_cap, plan.replan_interval,
            renders_per_control(plan.render, plan.video_stride, plan.replan_interval)))
    return shapes


def run_costs(run_dir: Path) -> tuple[PhaseCosts, Assumptions]:
    """The phase costs a finished run measured, and what it found of the policy and of
    success: its mean latency per call, its success rate and how early successes ended."""
    read = read_run(run_dir, "--from")
    return measured_costs(read.records, f"the run {run_dir}")


def measured_costs(records: Iterable[CaseRecord], where: str) -> tuple[PhaseCosts, Assumptions]:
    """Phase costs and assumptions from cases' records (a finished run's, or the running
    run's own finished cases); ValueError when none of them completed."""
    completed = [r for r in records if r["outcome"] in ("success", "failure")]
    if not completed:
        raise ValueError(f"{where} has no completed case to take timings from")
    setups = [float(r["timings"]["setup_s"]) for r in completed if "setup_s" in r.get("timings", {})]
    waited = sum(_waited(r) for r in completed)
    stepping = sum(float(r["timings"].get("episode_s", 0.0)) for r in completed) - waited
    controls = sum(int(r["counters"]["executed_controls"]) for r in completed)
    renders = sum(sum((r.get("renders") or {}).values()) or CAMERAS * (
        r["counters"]["executed_controls"] + 1) for r in completed)
    calls = sum(int(r["counters"]["policy_calls"]) for r in completed)
    successes = [r for r in completed if r["outcome"] == "success"]
    # Without a probe a run cannot split a control into physics and rendering: the
    # control's whole cost goes to its renders, at the run's own renders per control.
    per_control = stepping / max(controls, 1)
    per_render = per_control / max(renders / max(controls, 1), 1e-9)
    setup = sum(setups) / len(setups) if setups else 0.0
    # A fast-mode set-up is one build, one reset and the settling: the run cannot tell them
    # apart, so the split (a reset about as long as a build, docs/scale.md) is assumed.
    costs = PhaseCosts(build_s=setup / 2, reset_s=setup / 2, settle_s=0.0, physics_s=0.0,
                       render_s=per_render, cpu_per_wall=1.0,
                       source=f"{where} ({len(completed)} completed cases; a set-up "
                              "split evenly between build and reset)")
    shares = [float(r["counters"]["first_success_control"] or 0) / r["budget"]["control_cap"]
              for r in successes]
    share = sum(shares) / len(shares) if shares else Assumptions().success_share
    assume = Assumptions(latency_s=waited / max(calls, 1),
                         latency_source=f"measured by {where}: {calls} calls",
                         success_rate=len(successes) / len(completed), success_share=share)
    return costs, assume


def _waited(record: CaseRecord) -> float:
    """Seconds the case waited on its policy: the recorded latency of each call."""
    return sum(float(chunk.get("latency_s", 0.0)) for chunk in record.get("chunks") or [])

