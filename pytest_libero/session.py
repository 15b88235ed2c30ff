"""One pytest session's work, for the hooks in plugin.py to call.

The controller checks everything it can before a run folder exists (the adapter, the
installed distribution, the policy factory, the policy server, the renderer), then opens
the run folder; an xdist worker takes its part of the plan; each case then runs in this
process's case host (or in-process) and becomes a record. Settings are read once
(``config.settings``) and live on the :class:`Session` the hooks stash.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.catalog.entries import Entry, load_catalog
from pytest_libero.catalog.inventory import load_inventory
from pytest_libero.catalog.validation import load_validation
from pytest_libero.config.plan import RunPlan
from pytest_libero.config.settings import Settings
from pytest_libero.config.workers import WORKER_CASES, WORKER_ORDER, WORKER_RUN_DIR
from pytest_libero.episode.case import run_case_with_evidence
from pytest_libero.episode.fingerprint import measure_apart, measure_for_cases
from pytest_libero.episode.host import SimulatorHost
from pytest_libero.episode.record import CaseRecord, short_chunk_note
from pytest_libero.evidence.layout import RECORD_NAME
from pytest_libero.evidence.renderer import known_renderers, unusable
from pytest_libero.perturb.kinds.environment import room_table
from pytest_libero.perturb.kinds.semantic import instruction_table
from pytest_libero.policy.builtin.demo_files import check_demos
from pytest_libero.policy.contract import Policy
from pytest_libero.policy.probe import preflight, server_gone
from pytest_libero.protocol.errors import SetupError
from pytest_libero.report import progress as live_progress
from pytest_libero.results.decider import decided_line
from pytest_libero.results.decision_summary import decision_line
from pytest_libero.results.layout import RESULTS_NAME, case_path, resume_hint
from pytest_libero.results.published import load_published
from pytest_libero.results.recorder import Recorder


@dataclass
class Session:
    """This process's plan and where its cases go; the case host and the renderer's
    fingerprint are made on first need."""

    settings: Settings
    plan: RunPlan
    run_dir: Path | None
    """None when cases are only listed (``--collect-only``)."""
    recorder: Recorder | None = None
    """The controller's; None on xdist workers."""
    host: SimulatorHost | None = None
    policy: Policy | None = None
    """isolation=none: the one policy object every case of this process uses."""
    order: tuple[str, ...] | None = None
    """``--libero-decide``: the order this run hands its cases out in (items are sorted
    by it); None: native order."""
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


def controller_session(settings: Settings, *, collect_only: bool,
                       under_xdist: bool) -> Session:
    """Check what can be checked before any case, then open the run folder.

    Raises SetupError (a usage error) for an adapter that cannot work, a distribution
    that differs from the inventory, a policy that cannot be built, a server that does
    not answer as it must, or a run folder that cannot be used.
    """
    from pytest_libero.adapters import load_adapter
    from pytest_libero.catalog.inventory import verify_entries

    plan = settings.plan
    check_shipped_data()
    load_adapter(plan.adapter)
    tasks = {e.task_id: e.as_dict() for e in plan.entries}  # a task once, all its states
    verify_entries(tasks.values(), load_inventory(ood=any(e.is_ood for e in plan.entries)))
    plan.profile.build_policy().close()  # a bad factory or option is a usage error
    if collect_only:
        return Session(settings, plan, run_dir=None)  # listing cases writes no run folder
    server = None
    if plan.profile.served and plan.profile.launch is None:
        server = preflight(plan.profile, on_wait=tell_waiting(plan))  # before any run folder
        tell_reply_horizon(plan, server)
    # A scene compiled ahead in the forkserver pays off from a run's second case on; a
    # one-case run would compile it twice, before its only case can start.
    warm = plan.entries[0] if len(plan.entries) > 1 else None
    renderer = measure_apart() if under_xdist else measure_for_cases(settings.isolation, warm)
    no_gl = unusable(renderer)
    if no_gl is not None:  # before the run folder: a machine that cannot render runs nothing
        raise SetupError(no_gl)
    recorder = Recorder.open(settings, replace(plan, renderer=renderer), server)
    decider = recorder.decider
    if decider is not None and decider.decided and settings.resume is not None:
        assert decider.tracker.decision is not None
        said = decision_line(decider.tracker.decision.as_dict())
        sys.stderr.write(f"pytest-libero: {settings.resume} was {said}; the run is complete: "
                         "no case is left to run\n")
        sys.stderr.flush()
    return Session(settings, recorder.plan, recorder.folder.path, recorder,
                   order=None if decider is None else decider.running)


def check_shipped_data() -> None:
    """Read every data file the package ships, each through its own reader, so that a
    damaged installation is one usage error naming the file before any case
    (``protocol/shipped.py``), not a traceback where the file is first used: the
    renderers at the session's end, the room table at the first environment case."""
    load_catalog()
    load_inventory(ood=True)
    load_validation()
    room_table()
    instruction_table()
    known_renderers()
    load_published()
    check_demos()


def worker_session(settings: Settings, workerinput: dict[str, Any]) -> Session:
    """An xdist worker's part of the plan; it measures its renderer at its first case."""
    order = workerinput.get(WORKER_ORDER)
    return Session(settings, settings.plan.only(workerinput[WORKER_CASES]),
                   Path(workerinput[WORKER_RUN_DIR]),
                   order=None if order is None else tuple(order))


def tell_waiting(plan: RunPlan) -> Callable[[Exception], None]:
    """Say at once that nothing answers yet, so a forgotten server costs seconds."""
    def tell(exc: Exception) -> None:
        profile = plan.profile
        sys.stderr.write(
            f"pytest-libero: no policy server at {profile.endpoint} yet; waiting up to "
            f"{profile.wait_s:g}s (profile {profile.name!r}: policy.wait_s, or "
            f"--libero-server-wait). Start it with: {profile.start_hint}\n"
        )
        sys.stderr.flush()
    return tell


def tell_reply_horizon(plan: RunPlan, server: dict[str, Any]) -> None:
    """Say once, before any case, that the server's chunks are shorter than K."""
    note = short_chunk_note(server.get("reply_horizon"), plan.replan_interval, served=True)
    if note is not None:
        sys.stderr.write(f"pytest-libero: {note} (preflight's probe)\n")
        sys.stderr.flush()


class CaseErrored(Exception):
    """Raised in setup so an errored episode is a pytest *error*, not a failure."""

    def __init__(self, record: CaseRecord) -> None:
        super().__init__(record["summary"])
        self.record = record

    def report_text(self) -> str:
        """The cause in one line; the traceback and details stay in the record."""
        cause = self.record["summary"].splitlines()[0]
        where = self.record.get("evidence_dir")
        episode = Path(where) / RECORD_NAME if where else None
        details = str(episode) if episode and episode.is_file() else f"the run's {RESULTS_NAME}"
        return f"{self.record['case']}: {cause}\n(full error and traceback: {details})"


@dataclass(frozen=True)
class Decided:
    """The case was not run: the run's verdict was decided (``--libero-decide``)."""

    line: str


@dataclass(frozen=True)
class Unattempted:
    """The case was not attempted: the policy server is gone, the run stops here."""

    gone: str
    """What the probe found."""
    stop: str
    """Why the run stops, and how to finish it."""


def run_case(session: Session, entry: Entry, *, config: pytest.Config,
             next_entry: Entry | None) -> CaseRecord | Unattempted | Decided:
    """Run one case on this process (its case host, or in-process) and return its
    record; a served policy is probed first, and a server that is gone leaves this case
    and the rest unattempted. A run whose verdict is decided runs no more cases."""
    assert session.run_dir is not None
    if session.order is not None:
        decided = decided_line(session.run_dir)
        if decided is not None:
            if session.host is not None:
                session.host.discard_prepared()
            return Decided(decided)
    plan = _with_renderer(session, entry)
    if plan.profile.served:
        gone = server_gone(plan.profile)
        if gone is not None:
            if session.host is not None:
                session.host.discard_prepared()
            return Unattempted(gone,
                f"{gone}; the remaining cases are left unattempted. Once the server is "
                f"back, {resume_hint(session.run_dir)}")
    case_dir = case_path(session.run_dir, entry.case_id)
    cap = plan.budget_for(entry).control_cap
    with live_progress.case_progress(config, entry.case_id, cap) as progress:
        if session.settings.isolation == "process":
            return _host(session).run(plan, entry, case_dir, session.settings.watchdog,
                                      progress=progress.update, next_entry=next_entry)
        return run_case_with_evidence(plan, entry, _policy(session), case_dir,
                                      listener=progress)


def case_entry(item: pytest.Item | None) -> Entry | None:
    """The entry an item runs as a case, unless it is marked to be skipped (a ``skipif``
    whose condition is a string is not evaluated: a set-up nobody runs is discarded)."""
    if item is None or "libero_case" not in getattr(item, "fixturenames", ()):
        return None
    if item.get_closest_marker("skip") is not None or any(
        any(not isinstance(condition, str) and condition
            for condition in (*mark.args, mark.kwargs.get("condition", False)))
        for mark in item.iter_markers("skipif")
    ):
        return None
    callspec = getattr(item, "callspec", None)
    entry = callspec.params.get("libero_entry") if callspec is not None else None
    return entry if isinstance(entry, Entry) else None


def _with_renderer(session: Session, entry: Entry) -> RunPlan:
    """The plan with this process's renderer, measured once (an xdist worker measures
    at its first case, with that case's scene warming its case processes' server)."""
    if session.plan.renderer is None:
        session.plan = replace(session.plan, renderer=measure_for_cases(
            session.settings.isolation, entry))
    return session.plan


def _host(session: Session) -> SimulatorHost:
    if session.host is None:
        session.host = SimulatorHost(prebuild=session.settings.prebuild)
        session.closers.append(session.host.close)
    return session.host


def _policy(session: Session) -> Policy:
    if session.policy is None:
        policy: Policy = session.plan.profile.build_policy()
        session.policy = policy
        session.closers.append(policy.close)
    return session.policy
