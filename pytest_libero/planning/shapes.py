"""A run plan's cases as the cost model sees them, and phase costs read from a finished run.

The shapes come from the same :class:`~pytest_libero.config.plan.RunPlan` a run makes
(its selection, budgets, replan interval, rendering), so a plan is refused exactly as the
run would be. A finished run folder (``pytest-libero plan --from RUN_DIR``) gives its own
figures: each case's set-up seconds, its episode seconds less the time it waited for the
policy, its controls, renders and calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_libero.catalog.entries import Catalog, load_catalog
from pytest_libero.config.plan import RunPlan
from pytest_libero.episode.record import CaseRecord
from pytest_libero.planning.figures import DAY, HOUR, count, figure
from pytest_libero.planning.model import Assumptions, CaseShape, CostTable, PhaseCosts
from pytest_libero.protocol.text import clipped
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


def scene_family(suite: str, catalog: Catalog | None = None) -> str:
    """What a suite's cases cost as (planning/model.py ``CostTable``): a LIBERO-PRO suite
    is its base suite's scenes changed, so it costs as its base."""
    ood = (catalog or load_catalog()).ood_suites.get(suite)
    return suite if ood is None else ood.base


def scene_families(plan: RunPlan) -> list[str]:
    """The plan's scene families, in the order its cases first meet them."""
    return list(dict.fromkeys(scene_family(e.suite, plan.catalog) for e in plan.owned))


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
            renders_per_control(plan.render, plan.video_stride, plan.replan_interval),
            scene_family(entry.suite, plan.catalog)))
    return shapes


def run_costs(run_dir: Path) -> tuple[CostTable, Assumptions]:
    """The phase costs a finished run measured (each scene family's from its own cases),
    and what it found of the policy and of success: its mean latency per call, its success
    rate and how early successes ended.
    Each figure a completed case's record gives is checked first (ValueError naming the
    case and the figure): a run folder is data, and one figure of 1e308 overflows a plan."""
    tally = Tally()
    for record in read_run(run_dir, "--from").records:
        if record["outcome"] in ("success", "failure"):
            _check_figures(record)
        tally.add(record)
    return tally.table(f"the run {run_dir}")


def _check_figures(record: CaseRecord) -> None:
    """The figures :meth:`Tally.add` reads from a completed case, each a plain number
    inside its bound (``planning/figures.py``)."""
    what = f"the record of {clipped(str(record['case']), 80)!r}"
    timings = record.get("timings", {})
    for name, upper in (("setup_s", HOUR), ("episode_s", DAY), ("evidence_s", DAY)):
        if name in timings:
            figure(timings[name], f"{what}: timings.{name}", upper)
    counters = record.get("counters")
    if not isinstance(counters, dict):
        raise ValueError(f"{what} has no counters")
    count(counters.get("executed_controls"), f"{what}: counters.executed_controls")
    count(counters.get("policy_calls"), f"{what}: counters.policy_calls")
    for renders in (record.get("renders") or {}).values():
        count(renders, f"{what}: renders")
    for number, chunk in enumerate(record.get("chunks") or [], start=1):
        if isinstance(chunk, dict) and "latency_s" in chunk:
            figure(chunk["latency_s"], f"{what}: chunk {number}'s latency_s", HOUR)
    if record["outcome"] == "success":
        cap = count((record.get("budget") or {}).get("control_cap"),
                    f"{what}: budget.control_cap", lowest=1)
        first = counters.get("first_success_control")
        if first is not None:
            count(first, f"{what}: counters.first_success_control", upper=cap)


@dataclass
class Tally:
    """Sums over completed cases' records, kept as they come (a running run's own)."""

    completed: int = 0
    setups_s: float = 0.0
    setups: int = 0
    waited_s: float = 0.0
    episodes_s: float = 0.0
    controls: int = 0
    renders: int = 0
    calls: int = 0
    successes: int = 0
    success_shares: float = 0.0
    scenes: dict[str, Tally] = field(default_factory=dict)
    """Each scene family's own sums (one level deep)."""

    def add(self, record: CaseRecord, *, nested: bool = True) -> None:
        """Count a case's timings, if it completed (an errored case's are not a case's)."""
        if record["outcome"] not in ("success", "failure"):
            return
        if nested:
            scene = scene_family(str((record.get("entry") or {}).get("suite", "")))
            self.scenes.setdefault(scene, Tally()).add(record, nested=False)
        self.completed += 1
        timings, counters = record.get("timings", {}), record["counters"]
        if "setup_s" in timings:
            self.setups_s += float(timings["setup_s"])
            self.setups += 1
        self.waited_s += _waited(record)
        self.episodes_s += float(timings.get("episode_s", 0.0))
        self.controls += int(counters["executed_controls"])
        self.renders += sum((record.get("renders") or {}).values()) or CAMERAS * (
            int(counters["executed_controls"]) + 1)
        self.calls += int(counters["policy_calls"])
        if record["outcome"] == "success":
            self.successes += 1
            self.success_shares += (float(counters["first_success_control"] or 0)
                                    / record["budget"]["control_cap"])

    def costs(self, where: str) -> tuple[PhaseCosts, Assumptions]:
        """The phase costs and assumptions so far; ValueError before any completed case."""
        if not self.completed:
            raise ValueError(f"{where} has no completed case to take timings from")
        # Without a probe a run cannot split a control into physics and rendering: the
        # control's whole cost goes to its renders, at the run's own renders per control.
        per_control = (self.episodes_s - self.waited_s) / max(self.controls, 1)
        per_render = per_control / max(self.renders / max(self.controls, 1), 1e-9)
        setup = self.setups_s / self.setups if self.setups else 0.0
        # A fast-mode set-up is one build, one reset and the settling: the run cannot tell
        # them apart, so the split (a reset about as long as a build, docs/scale.md) is assumed.
        costs = PhaseCosts(build_s=setup / 2, reset_s=setup / 2, settle_s=0.0, physics_s=0.0,
                           render_s=per_render, cpu_per_wall=1.0,
                           source=f"{where} ({self.completed} completed cases; a set-up "
                                  "split evenly between build and reset)")
        share = (self.success_shares / self.successes if self.successes
                 else Assumptions().success_share)
        assume = Assumptions(latency_s=self.waited_s / max(self.calls, 1),
                             latency_source=f"measured by {where}: {self.calls} calls",
                             success_rate=self.successes / self.completed, success_share=share)
        return costs, assume

    def table(self, where: str) -> tuple[CostTable, Assumptions]:
        """:meth:`costs`, with each scene family's phase costs from its own cases (the
        run's assumptions are the whole run's)."""
        costs, assume = self.costs(where)
        return CostTable(costs, {scene: tally.costs(f"{where}'s {scene} cases")[0]
                                 for scene, tally in self.scenes.items() if tally.completed}), assume


def _waited(record: CaseRecord) -> float:
    """Seconds the case waited on its policy: the recorded latency of each call."""
    return sum(float(chunk.get("latency_s", 0.0)) for chunk in record.get("chunks") or [])

