"""The run plan: operator options + profile resolved into what every case will do.

Built once per process from pytest options; deterministic, so every xdist worker
derives the same cases and budgets from the same command line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_libero.catalog.entries import Catalog, Entry, load_catalog
from pytest_libero.catalog.selection import SelectionRequest, select, shard
from pytest_libero.config.profiles import Profile
from pytest_libero.perturb import registry
from pytest_libero.perturb.kind import Moment
from pytest_libero.perturb.levels import perturb_identity
from pytest_libero.protocol.budgets import Budget, decisions_budget, horizon_budget
from pytest_libero.protocol.clock import REALTIME, SYNCHRONOUS
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.identity import ood_identity, protocol_identity, realtime_identity
from pytest_libero.protocol.parameters import BUDGET_MODES, TRACKS
from pytest_libero.protocol.text import echo

RENDER_MODES = ("consumed", "all")
EVIDENCE_LEVELS = ("full", "replayable", "dataset")
"""full: every delivered observation, lossless; replayable: hashes, actions, video;
dataset: full, and both cameras' images at every control (evidence/controls.py: the
writer's ``LEVELS``, the same tuple)."""
EVERY_CONTROL = "dataset"
"""The level that renders every camera at every control, to keep each control's images."""
DEFAULT_EVIDENCE = {"fast": "full", "full": "replayable"}
POLICY_MARGIN_S = 30.0
"""Beyond a policy's own limits: its client's timeout fires first and names the cause."""


@dataclass(frozen=True)
class Gates:
    """The operator's CI gates; all optional. ``baseline`` is a run folder."""

    min_success: float | None
    baseline: Path | None
    alpha: float
    min_safe_success: float | None = None
    """Safe successes over completed monitored episodes (docs/safety.md)."""

    @property
    def active(self) -> bool:
        return (self.min_success is not None or self.baseline is not None
                or self.min_safe_success is not None)


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
    selected: tuple[Entry, ...]
    """The whole selection, across shards and resumed runs."""
    owned: tuple[Entry, ...]
    """This run folder's part: the selection, or this shard of it."""
    adapter: str
    """A registered adapter name or ``module:factory`` (the simulator side)."""
    render: str
    """"consumed": render a camera only for controls whose image is used; "all"."""
    video_stride: int
    evidence: str = "full"
    """How much of each episode the case folder keeps (EVIDENCE_LEVELS)."""
    kinds: tuple[str, ...] = ()
    """Perturbation kinds of the operator's own (``module:Class``), registered by every
    process that runs or verifies a case of this plan."""
    clock: str = SYNCHRONOUS
    """``synchronous`` (the world waits for each reply) or ``realtime`` (each reply is
    usable after its measured latency, protocol/clock.py): a track of its own."""
    shard: tuple[int, int] | None = None
    inapplicable: tuple[tuple[Entry, str], ...] = ()
    """Generated perturbations the selection asked for that cannot apply to their entry,
    each with the reason: collected as skipped cases, never part of ``selected`` (so a
    run without them is complete) and listed in run.json's ``not_applicable``."""
    renderer: dict[str, Any] | None = field(default=None, compare=False)
    """The fingerprint of the GL stack this process's cases render with
    (``evidence/renderer.py``), set once it is measured: every record's identity holds
    it. Not a setting: it stays out of :meth:`as_dict` and of every protocol identity."""

    def only(self, case_ids: Iterable[str]) -> RunPlan:
        """The same plan narrowed to these cases (resume; a worker told by the controller)."""
        wanted = set(case_ids)
        return replace(self, entries=tuple(e for e in self.entries if e.case_id in wanted))

    @property
    def mode(self) -> str:
        return self.selection.mode

    @property
    def identity(self) -> str:
        """The protocol identity of this run's mode (fast mode's is pinned, P12); the
        realtime track has its own, so it is never merged with or compared to a
        synchronous run."""
        if self.clock == REALTIME:
            return realtime_identity(self.mode)
        return protocol_identity(self.mode)

    @property
    def ood_identity(self) -> str | None:
        """The OOD cases' identity, when the selection holds any (native ones keep theirs)."""
        return ood_identity(self.mode) if any(e.is_ood for e in self.selected) else None

    @property
    def perturb_identity(self) -> str | None:
        """The perturbed cases' identity, when the selection holds any."""
        perturbed = any(e.perturbation is not None for e in self.selected)
        return perturb_identity(self.mode) if perturbed else None

    def variant_identity(self, entry: Entry) -> str | None:
        """The identity an OOD or perturbed case's record carries (its ``entry.identity``):
        the same as run.json's for that kind of case; None for a native case."""
        if entry.is_ood:
            return ood_identity(self.mode)
        if entry.perturbation is not None:
            return perturb_identity(self.mode)
        return None

    @property
    def extra_identities(self) -> dict[str, str]:
        """The identities beside the protocol's that this run's cases carry (run.json,
        summary.json; merge and resume compare them)."""
        found = {"ood_identity": self.ood_identity, "perturb_identity": self.perturb_identity}
        return {key: value for key, value in found.items() if value}

    @property
    def partial(self) -> list[str]:
        """Why a full-mode run cannot stand beside published full results (none: it can).

        Suites the selection covers only in part are judged per suite in the summary.
        """
        if self.mode != "full":
            return []
        reasons = []
        if self.selection.partial_states:
            reasons.append(f"init states {_ranges(self.selection.states)} of 0-49")
        if self.budget_mode != "horizon":
            reasons.append(f"budget mode {self.budget_mode}, not the reference horizons")
        return reasons

    @property
    def evidence_class(self) -> str:
        """P11: built-in policies prove the infrastructure, never a capability."""
        return "infrastructure" if self.profile.infrastructure else "capability"

    def budget_for(self, entry: Entry) -> Budget:
        if self.budget_mode == "horizon":
            horizon, source = self.catalog.horizon(entry.suite)
            source = f"catalog horizon for {entry.suite}: {source}"
            return horizon_budget(horizon, source, self.replan_interval)
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
            "mode": self.mode,
            "evidence": self.evidence,
            "partial": self.partial,
            "not_applicable": {e.case_id: reason for e, reason in self.inapplicable},
            **({"kinds": list(self.kinds)} if self.kinds else {}),
            **({"clock": self.clock} if self.clock != SYNCHRONOUS else {}),
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
    adapter: str,
    render: str,
    video_stride: int,
    evidence: str | None = None,
    kinds: tuple[str, ...] = (),
    clock: str = SYNCHRONOUS,
) -> RunPlan:
    """Combine profile defaults with operator overrides, refusing bad values clearly."""
    catalog = load_catalog()
    registry.load_all(kinds)
    asked = [(e, why_not_applicable(e)) for e in map(registry.worded, select(catalog, selection))]
    inapplicable = tuple((e, reason) for e, reason in asked if reason is not None)
    selected = tuple(e for e, reason in asked if reason is None)
    mode = budget_mode or profile.budget_mode
    if mode not in BUDGET_MODES:
        raise SetupError(f"--libero-budget-mode={echo(mode)} is unknown; allowed: {', '.join(BUDGET_MODES)}")
    calls = profile.max_policy_calls if max_policy_calls is None else max_policy_calls
    interval = profile.replan_interval if replan_interval is None else replan_interval
    if calls < 1:
        raise SetupError(f"--libero-max-policy-calls must be at least 1, got {calls}")
    if interval < 1:
        raise SetupError(f"--libero-replan-interval must be at least 1, got {interval}")
    if render not in RENDER_MODES:
        raise SetupError(f"--libero-render={echo(render)} is unknown; allowed: {', '.join(RENDER_MODES)}")
    if video_stride < 1:
        raise SetupError(f"--libero-video-stride must be at least 1, got {video_stride}")
    level = evidence or DEFAULT_EVIDENCE.get(selection.mode, "full")
    if level not in EVIDENCE_LEVELS:
        raise SetupError(
            f"--libero-evidence={echo(level)} is unknown; allowed: {', '.join(EVIDENCE_LEVELS)}"
        )
    chosen_track = track or profile.track
    if chosen_track not in TRACKS:
        raise SetupError(f"--libero-track={echo(chosen_track)} is unknown; allowed: {', '.join(TRACKS)}")
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
        kinds=kinds,
        clock=_checked_clock(clock, profile, selected),
        render="all" if level == EVERY_CONTROL else render,  # every control's images are kept
        video_stride=video_stride,
        evidence=level,
        inapplicable=inapplicable,
    )
    if plan.perturb_identity is not None:
        # It hashes installed data (the instruction table): damage is refused here, before
        # anything is written, not when run.json is.
        perturb_identity(plan.mode)
    if shard_of is None:
        return plan
    part = tuple(shard(selected, *shard_of, cost=lambda e: plan.budget_for(e).control_cap))
    return replace(plan, entries=part, owned=part)


def _checked_clock(clock: str, profile: Profile, selected: tuple[Entry, ...]) -> str:
    """The realtime track measures a served policy's own latency: refused where that
    means nothing, or where a perturbation sets the delays itself."""
    if clock == SYNCHRONOUS:
        return clock
    if not profile.served:
        raise SetupError(f"--libero-realtime: profile {profile.name!r} runs in this process, "
                         "where a call's latency measures nothing a robot would wait for; "
                         "serve the policy (python -m pytest_libero.serve) and use a served "
                         "profile, or leave --libero-realtime out")
    for entry in selected:
        perturbation = entry.perturbation
        if perturbation is not None and Moment.CONTROL in registry.kind(perturbation.kind).moments():
            raise SetupError(f"--libero-realtime measures every delay; --libero-perturb="
                             f"{perturbation.kind}:{perturbation.level} sets them itself: "
                             "run the two apart")
    return clock


def why_not_applicable(entry: Entry) -> str | None:
    """Why an entry's generated perturbation cannot apply to it (its kind says, e.g.
    position with nothing to move, environment with no room), known before anything runs;
    None when it can, or for any other case."""
    reason = registry.not_applicable(entry)
    return None if reason is None else f"{entry.case_id}: {reason}"


def _ranges(values: tuple[int, ...]) -> str:
    """0,1,2,5 -> "0-2,5": a state list as an operator would write it."""
    parts: list[str] = []
    start = prev = None
    for v in (*values, None):
        if start is not None and (v is None or v != prev + 1):  # type: ignore[operator]
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if v is not None and start is None:
            start = v
        prev = v
    return ",".join(parts)


@dataclass(frozen=True)
class Watchdog:
    """The watchdog's limits: how long the simulator may go without a sign of life
    (building, stepping) and how long waits on the policy may last.

    Waiting on the policy (connecting at its reset, a call) is timed by the policy's
    limits, not the simulator's, and a wait that outlives them is reported as the
    policy's fault, naming ``policy_name``. Which phase gets which limit:
    ``pytest_libero.episode.host.watchdog.allowance``.
    """

    build_s: float
    step_s: float
    policy_s: float
    policy_connect_s: float
    policy_name: str

    @classmethod
    def for_plan(cls, plan: RunPlan, *, build_s: float, step_s: float) -> Watchdog:
        """The simulator's allowances as given; the policy's from its own limits plus a
        margin, so its client times out (and says why) before the watchdog fires."""
        profile = plan.profile
        return cls(
            build_s=build_s,
            step_s=step_s,
            policy_s=profile.call_timeout + POLICY_MARGIN_S,
            # An episode start connects (within wait_s), then makes the transport's own
            # calls (GR00T: get_modality_config and reset).
            policy_connect_s=(profile.wait_s + 2 * profile.connect_timeout + POLICY_MARGIN_S
                              + profile.transport_impl.episode_start_calls * profile.call_timeout),
            policy_name=profile.policy_label,
        )
