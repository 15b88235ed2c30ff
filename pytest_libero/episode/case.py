"""One case: open the native episode, run it against the policy, return its record.

The record is plain JSON-ready data; it is the single source for the pytest outcome,
the results line and every report. Nothing here raises for an episode problem:
errors are part of the record.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from pytest_libero.adapters import AdapterCache
from pytest_libero.catalog.entries import Entry
from pytest_libero.catalog.placement import Placement
from pytest_libero.config.plan import RunPlan
from pytest_libero.config.profiles import STATE_FED
from pytest_libero.episode.loop import (
    Delays,
    EpisodeListener,
    EpisodeResult,
    Tee,
    call_policy,
    error_record,
    run_episode,
    synchronous,
)
from pytest_libero.episode.phases import Phase
from pytest_libero.episode.record import BudgetRecord, CaseRecord, short_chunk_note
from pytest_libero.episode.setup import Setup, open_episode
from pytest_libero.evidence.controls import Scene
from pytest_libero.evidence.layout import DATASET, EvidenceError
from pytest_libero.evidence.renderer import identity as renderer_identity
from pytest_libero.files import write_json_atomic, write_text_atomic
from pytest_libero.goals.progress import ProgressRecord
from pytest_libero.goals.score import case_score
from pytest_libero.perturb import registry
from pytest_libero.policy.contract import STATE_FED_METADATA, EpisodeAware, Policy
from pytest_libero.policy.lent import as_lent
from pytest_libero.policy.limits import check_metadata, recorded_metadata
from pytest_libero.protocol.clock import REALTIME, measured_delay
from pytest_libero.protocol.errors import EpisodeError, PerturbationNotApplied
from pytest_libero.safety.signals import SIGNALS_NAME, Signals
from pytest_libero.safety.verdict import evaluate

Tell = Callable[[Phase], None]
"""Told each :class:`~pytest_libero.episode.phases.Phase` as the case moves on (a watchdog)."""


def run_case_with_evidence(
    plan: RunPlan,
    entry: Entry,
    policy: Policy,
    case_dir: Path,
    *,
    listener: EpisodeListener | None = None,
    phase: Tell | None = None,
    adapters: AdapterCache | None = None,
    setup: Setup | None = None,
    turn: float | None = None,
    placement: Placement | None = None,
) -> CaseRecord:
    """Run the case while streaming its evidence into ``case_dir`` (P10), at the plan's
    evidence level (``plan.evidence``: full keeps every observation, replayable their
    hashes). ``setup``, ``turn`` and ``placement``: as :func:`run_case`.

    A failure to write evidence errors the case with cause "evidence": a result whose
    evidence is missing cannot be trusted, whatever LIBERO said.
    """
    from pytest_libero.evidence.layout import EvidenceError
    from pytest_libero.evidence.writer import CaseEvidence

    try:
        evidence = CaseEvidence(case_dir, video_stride=plan.video_stride, level=plan.evidence)
    except (EvidenceError, OSError) as exc:
        if setup is not None:
            setup.close()
        record = errored_record(plan, entry, exc, kind="evidence")
    else:
        sink = evidence if listener is None else Tee(evidence, listener)
        record = run_case(plan, entry, policy, listener=sink, phase=phase,
                          safety_file=case_dir / SIGNALS_NAME, adapters=adapters,
                          setup=setup, turn=turn, placement=placement,
                          follow=evidence.follow if plan.evidence == DATASET else None)
        if phase is not None:
            phase(Phase.EVIDENCE)
        t0 = time.perf_counter()
        try:
            record["evidence"] = evidence.close(also=(SIGNALS_NAME,))
        except (EvidenceError, OSError) as exc:
            record["evidence"] = getattr(exc, "summary", None)
            if record["outcome"] != "errored":
                mark_errored(record, exc, kind="evidence")
        # Finishing the encoders' files: work they deferred while the simulator ran.
        record["timings"]["evidence_s"] = round(time.perf_counter() - t0, 3)
    record["evidence_dir"] = str(case_dir)
    keep_full_error_text(record, case_dir)
    try:
        write_json_atomic(case_dir / "episode.json", record)
    except OSError as exc:  # a full disk: the record still reaches results.jsonl
        if record["outcome"] != "errored":
            mark_errored(record, exc, kind="evidence")
            keep_full_error_text(record, None)
    return record


def run_case(
    plan: RunPlan,
    entry: Entry,
    policy: Policy,
    *,
    listener: EpisodeListener | None = None,
    phase: Tell | None = None,
    safety_file: Path | None = None,
    adapters: AdapterCache | None = None,
    setup: Setup | None = None,
    turn: float | None = None,
    placement: Placement | None = None,
    follow: Callable[[Scene], None] | None = None,
) -> CaseRecord:
    """Run the entry's episode and return its full record (P9-P11).

    ``adapters`` keeps the adapters across the cases of one long-lived process; without
    it each case builds its own. ``turn`` (a ``time.time()``) is when the case was handed
    to this process: its ``started_at``. ``setup`` is the episode already opened for it
    ahead of that turn; without it the case opens its own once the policy has answered
    its reset, handing the adapter ``placement``, the case host's answer for the case
    (``catalog/placement.py``). An episode that offers
    ``safety_signals()`` (the libero adapter's monitor) adds the safety verdict and
    engagement to the record, and its raw signals to ``safety_file``; one that offers
    ``goal_progress()`` adds each goal predicate's course and the score. ``follow`` is handed
    the episode's ``scene`` before its first control (evidence level dataset).
    """
    tell = phase or (lambda name: None)
    ahead = setup  # set up before the case's turn (``turn``), in this process
    started = time.time() if turn is None else turn
    timings: dict[str, float] = {}
    identity: dict[str, Any] = {}
    renders: dict[str, int] | None = None
    signals: Signals | None = None
    progress: ProgressRecord | None = None
    try:
        # Reach the policy before paying for a simulator: a dead server costs seconds.
        tell(Phase.POLICY_RESET)
        call_policy(policy.reset)
        check_metadata(policy.metadata, policy_named(plan))  # each connection may send anew
        if isinstance(policy, EpisodeAware):
            call_policy(policy.begin_episode, episode_task(entry))
        policy = as_lent(policy)  # evaluate()'s own object: its faults told in its terms
    except EpisodeError as exc:
        if setup is not None:
            setup.close()
        result = EpisodeResult(outcome="errored", error=error_record(exc))
    else:
        if setup is None:
            tell(Phase.BUILD)
            setup = open_episode(plan, entry, adapters, placement)
        try:
            result = _drive(plan, entry, policy, setup, turn, listener, tell, timings, follow)
        finally:
            if setup.episode is not None:
                identity = setup.episode.identity
                renders = setup.episode.renders()
                signals = getattr(setup.episode, "safety_signals", lambda: None)()
                progress = getattr(setup.episode, "goal_progress", lambda: None)()
                setup.close()
    record = _assemble(plan, entry, result, identity, timings, started,
                       recorded_metadata(policy.metadata))
    if ahead is not None and "setup_s" in timings:
        record["setup_started_at"] = round(ahead.finished_at - ahead.setup_s, 3)
    record["renders"] = renders
    if signals is not None:
        record["safety"], record["engagement"] = evaluate(signals, result.outcome == "success")
        if safety_file is not None:
            signals.save(safety_file)
    if progress is not None:
        record["progress"] = progress
        record["score"] = case_score(result.outcome, progress, record.get("engagement"))
    return record


def _drive(
    plan: RunPlan,
    entry: Entry,
    policy: Policy,
    setup: Setup,
    turn: float | None,
    listener: EpisodeListener | None,
    tell: Tell,
    timings: dict[str, float],
    follow: Callable[[Scene], None] | None = None,
) -> EpisodeResult:
    """Run the opened episode; a set-up that failed is the result."""
    episode = setup.episode
    if episode is None:
        if isinstance(setup.error, EpisodeError):
            return EpisodeResult(outcome="errored", error=error_record(setup.error))
        assert setup.error is not None
        return EpisodeResult(outcome="errored", error=error_record(setup.error, kind="environment"))
    timings["setup_s"] = setup.setup_s
    unapplied = registry.unproven(entry, episode.identity.get("perturbation"))
    if unapplied is not None:  # it would run the twin again under the perturbed case's name
        return EpisodeResult(outcome="errored", error=error_record(PerturbationNotApplied(
            f"{unapplied}: the adapter {plan.adapter!r} must apply it (perturb/registry.py "
            "applying) and record it in its episode's identity; the case was not run")))
    timings["setup_ahead_s"] = setup_ahead(setup, turn)
    if follow is not None:
        unfollowed = _follow(episode, follow, plan.adapter)
        if unfollowed is not None:
            return unfollowed
    tell(Phase.EPISODE)
    t0 = time.perf_counter()
    result = run_episode(
        episode,
        policy,
        plan.budget_for(entry),
        plan.profile.stop_rule,
        init_controls=episode.init_controls,
        listener=listener,
        out_of_bounds=plan.profile.out_of_bounds,
        delays=delays_of(plan, episode),
    )
    timings["episode_s"] = round(time.perf_counter() - t0, 3)
    return result


def _follow(episode: Any, follow: Callable[[Scene], None], adapter: str) -> EpisodeResult | None:
    """Hand the evidence the episode's scene (level dataset); an errored result when the
    adapter's episode has none, or its images cannot be kept."""
    scene = getattr(episode, "scene", None)
    try:
        if not callable(scene):
            raise EvidenceError(f"--libero-evidence=dataset keeps every control's images, but the "
                                f"adapter {adapter!r}'s episode has no scene() to give them; run it "
                                "at evidence level full")
        follow(scene)
    except EpisodeError as exc:
        return EpisodeResult(outcome="errored", error=error_record(exc))
    return None


def delays_of(plan: RunPlan, episode: Any) -> Delays:
    """Each reply's delay in controls: measured on the realtime track, else what the
    case's perturbation sets through its episode (an adapter without ``delay``: none)."""
    if plan.clock == REALTIME:
        return lambda call, latency_s: measured_delay(latency_s)
    delay: Delays = getattr(episode, "delay", synchronous)
    return delay


def setup_ahead(setup: Setup, turn: float | None) -> float:
    """Seconds of the set-up done before the case's turn came (0 when done at its turn)."""
    if turn is None:
        return 0.0
    began = setup.finished_at - setup.setup_s
    return round(min(max(turn - began, 0.0), setup.setup_s), 3)


def errored_record(
    plan: RunPlan,
    entry: Entry,
    exc: BaseException,
    *,
    kind: str,
    counters: Mapping[str, Any] | None = None,
    started: float | None = None,
) -> CaseRecord:
    """The record of a case that errored outside the episode loop (evidence, a crash)."""
    result = EpisodeResult(outcome="errored", error=error_record(exc, kind=kind))
    for name, value in (counters or {}).items():
        setattr(result.counters, name, value)
    return _assemble(plan, entry, result, {}, {}, started or time.time(), {})


ERROR_TEXT = "error.txt"


def keep_full_error_text(record: CaseRecord, case_dir: Path | None) -> None:
    """Move an error's cut text out of the record into the case folder's error.txt: kept
    once, in one file, never copied into every record and report."""
    error = record.get("error")
    if not error or "full_text" not in error:
        return
    text = error.pop("full_text")
    if case_dir is None:
        return
    try:
        write_text_atomic(case_dir / ERROR_TEXT, text)
    except OSError:
        return
    error["full_text_file"] = ERROR_TEXT


def mark_errored(record: CaseRecord, exc: BaseException, *, kind: str) -> None:
    """Turn a finished record into an errored one, keeping what LIBERO had said."""
    record["native_outcome"] = record["outcome"]
    record["outcome"] = "errored"
    if "score" in record:
        record["score"] = None  # an errored case has no score (goals/score.py)
    record["error"] = error_record(exc, kind=kind)
    record["summary"] = f"errored ({kind}): {exc}"


def policy_named(plan: RunPlan) -> str:
    """The case's policy, as a message names it: its server's address, or its profile."""
    profile = plan.profile
    return (f"the policy server at {profile.endpoint}" if profile.served and profile.endpoint
            else f"the policy of profile {profile.name!r}")


def state_fed(profile_says: str, policy_metadata: Mapping[str, Any]) -> str:
    """What the case fed as state: the profile's answer, unless the served policy says
    what it did instead (``pytest_libero/state_fed``, e.g. the LeRobot bridge's state=mean)."""
    declared = policy_metadata.get(STATE_FED_METADATA)
    return str(declared) if declared in STATE_FED else profile_says


def episode_task(entry: Entry) -> dict[str, Any]:
    """What an :class:`EpisodeAware` policy is told of the case it starts: the instruction
    it is sent and the native task's suite and index (a perturbed or OOD case's twin's).
    Never which init state, nor the case id, nor anything of a perturbation (P5)."""
    native = (entry.twin or entry.id).task
    return {"name": entry.language, "suite": native.suite, "task_id": native.index}


def _assemble(
    plan: RunPlan,
    entry: Entry,
    result: EpisodeResult,
    identity: dict[str, Any],
    timings: dict[str, float],
    started: float,
    policy_metadata: Mapping[str, Any],
) -> CaseRecord:
    record: CaseRecord = {
        "case": entry.case_id,
        "entry": entry.as_dict(plan.variant_identity(entry)),
        "profile": plan.profile.name,
        "evidence_class": plan.evidence_class,
        "evidence_level": plan.evidence,
        "track": plan.track,
        "budget": cast(BudgetRecord, plan.budget_for(entry).as_dict()),
        "stop_rule": plan.profile.stop_rule.describe(),
        "identity": identity,
        "policy_metadata": dict(policy_metadata),
        "state_fed": state_fed(plan.profile.state_fed, policy_metadata),
        "outcome": result.outcome,
        "termination": result.termination,
        "truncation": result.truncation,
        "counters": result.counters.as_record(),
        "chunks": result.chunks,
        "clipping": result.clipping.as_record(plan.profile.out_of_bounds),
        "error": result.error,
        "summary": result.describe(),
        "started_at": started,
        "timings": timings,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "egl_device": os.environ.get("MUJOCO_EGL_DEVICE_ID"),
        "pid": os.getpid(),
    }
    if plan.renderer is not None:  # the GL stack that rendered (or would have) its images
        record["identity"] = {**identity, "renderer": renderer_identity(plan.renderer)}
    if "perturbation" in identity:  # what the adapter drew and applied (docs/perturbations.md)
        record["perturbation"] = identity["perturbation"]
    horizons = [chunk["horizon"] for chunk in result.chunks if chunk["horizon"]]
    record["reply_horizon"] = min(horizons) if horizons else None
    note = short_chunk_note(record["reply_horizon"], record["budget"]["replan_interval"],
                            served=plan.profile.served)
    if note is not None:
        record["reply_note"] = note
    return record

