"""The run plan: operator options + profile resolved into what every case will do.

Built once per process from pytest options; deterministic, so every xdist worker
derives the same cases and budgets from the same command line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_libero.catalog import Catalog, Entry, SelectionRequest, load_catalog, select, shard
from pytest_libero.episode import Budget, decisions_budget, horizon_budget
from pytest_libero.errors import SetupError
from pytest_libero.profiles import Profile
from pytest_libero.protocol import BUDGET_MODES, TRACKS


@dataclass(frozen=True)
class RunPlan:
    """Everything fixed before the first case: profile, selection, budgets, track."""

    profile: Profile
    selection: SelectionRequest
    entries: tuple[Entry, ...]
    """The cases this process runs: the selection, or its shard, less finished ones."""
    budget_mode: str
    max_policy_calls: int
    replan_interval: int
    track: str
    catalog: Catalog = field(repr=False)
    selected: tuple[Entry, ...] = ()
    """The whole selection, across shards and resumed runs."""
    owned: tuple[Entry, ...] = ()
    """This run folder's part: the selection, or this shard of it."""
    shard: tuple[int, int] | None = None
    adapter: str = "libero"
    """A registered adapter name or ``module:factory`` (the simulator side)."""
    render: str = "consumed"
    """"consumed": render a camera only for controls whose image is used; "all"."""
    video_stride: int = 1

    def only(self, case_ids: Iterable[str]) -> RunPlan:
        """The same plan narrowed to these cases (resume; a worker told by the controller)."""
        wanted = set(case_ids)
        return replace(self, entries=tuple(e for e in self.entries if e.case_id in wanted))

    @property
    def evidence_class(self) -> str:
        """P11: built-in policies prove the infrastructure, never a capability."""
        return "infrastructure" if self.profile.infrastructure else "capability"

    def budget_for(self, entry: Entry) -> Budget:
        if self.budget_mode == "horizon":
            horizon, source = self.catalog.horizon(entry.suite)
            return horizon_budget(horizon, f"catalog horizon for {entry.suite}: {source}", self.replan_interval)
        return decisions_budget(self.max_policy_calls, self.replan_interval)

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile.identity(),
            "evidence_class": self.evidence_class,
            "selection": self.selection.as_dict(),
            "cases": [e.case_id for e in self.owned],
            "selection_cases": [e.case_id for e in self.selected],
            "shard": list(self.shard) if self.shard else None,
            "budget_mode": self.budget_mode,
            "max_policy_calls": self.max_policy_calls if self.budget_mode == "decisions" else None,
            "replan_interval": self.replan_interval,
            "track": self.track,
            "adapter": self.adapter,
            "render": self.render,
            "video_stride": self.video_stride,
        }


def make_plan(
    profile: Profile,
    selection: SelectionRequest,
    *,
    budget_mode: str | None = None,
    max_policy_calls: int | None = None,
    replan_interval: int | None = None,
    track: str | None = None,
    shard_of: tuple[int, int] | None = None,
    adapter: str = "libero",
    render: str = "consumed",
    video_stride: int = 1,
) -> RunPlan:
    """Combine profile defaults with operator overrides, refusing bad values clearly."""
    catalog = load_catalog()
    selected = tuple(select(catalog, selection))
    mode = budget_mode or profile.budget_mode
    if mode not in BUDGET_MODES:
        raise SetupError(f"--libero-budget-mode={mode!r} is unknown; allowed: {', '.join(BUDGET_MODES)}")
    calls = profile.max_policy_calls if max_policy_calls is None else max_policy_calls
    interval = profile.replan_interval if replan_interval is None else replan_interval
    if calls < 1:
        raise SetupError(f"--libero-max-policy-calls must be at least 1, got {calls}")
    if interval < 1:
        raise SetupError(f"--libero-replan-interval must be at least 1, got {interval}")
    if render not in ("consumed", "all"):
        raise SetupError(f"--libero-render={render!r} is unknown; allowed: consumed, all")
    if video_stride < 1:
        raise SetupError(f"--libero-video-stride must be at least 1, got {video_stride}")
    chosen_track = track or profile.track
    if chosen_track not in TRACKS:
        raise SetupError(f"--libero-track={chosen_track!r} is unknown; allowed: {', '.join(TRACKS)}")
    plan = RunPlan(
        profile=profile,
        selection=selection,
        entries=selected,
        budget_mode=mode,
        max_policy_calls=calls,
        replan_interval=interval,
        track=chosen_track,
        catalog=catalog,
        selected=selected,
        owned=selected,
        shard=shard_of,
        adapter=adapter,
        render=render,
        video_stride=video_stride,
    )
    if shard_of is None:
        return plan
    part = tuple(shard(selected, *shard_of, cost=lambda e: plan.budget_for(e).control_cap))
    return replace(plan, entries=part, owned=part)
