"""The pytest plugin: options, one case per selected entry, outcomes, summary.

Thin on purpose: it turns options into a :class:`RunPlan`, parametrizes the
conformance test with the plan's entries, and hands records to the controller-side
recorder. The simulator is never imported here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.adapters import load_adapter
from pytest_libero.catalog.entries import Entry
from pytest_libero.config import options
from pytest_libero.config.options import (
    build_plan,
    gates,
    isolation,
    option_value,
    prebuild,
    run_id,
    watchdog,
)
from pytest_libero.config.plan import RunPlan
from pytest_libero.config.workers import (
    WORKER_CASES,
    WORKER_RUN_DIR,
    XdistController,
    configure_workers,
    parse_gpus,
    prefer_worksteal,
)
from pytest_libero.episode.case import run_case_with_evidence
from pytest_libero.episode.fingerprint import measure_apart, measure_for_cases
from pytest_libero.episode.host import SimulatorHost
from pytest_libero.episode.record import (
    RECORD_PROPERTY,
    UNATTEMPTED_PROPERTY,
    CaseRecord,
    record_to_json,
    short_chunk_note,
)
from pytest_libero.policy.contract import Policy
from pytest_libero.policy.launcher import LaunchedServer
from pytest_libero.policy.probe import preflight, server_gone
from pytest_libero.protocol.errors import SetupError
from pytest_libero.report import progress as live_progress
from pytest_libero.report.allure import AllureEnvironment, allure_active, report_case
from pytest_libero.report.figures import RobustnessFigure
from pytest_libero.report.terminal import TerminalSummary
from pytest_libero.results.folder import read_results
from pytest_libero.results.merge import load_run, run_difference
from pytest_libero.results.recorder import Recorder, run_identity
from pytest_libero.results.renderers import conflict, joined, renderer_uses, session_use

PLAN_KEY = pytest.StashKey[RunPlan]()
RECORDER_KEY = pytest.StashKey[Recorder]()
RUN_DIR_KEY = pytest.StashKey[Path]()
HOST_KEY = pytest.StashKey[SimulatorHost]()
NEXT_ENTRY_KEY = pytest.StashKey[Entry | None]()
RENDERER_KEY = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    options.register(parser)


def conformance_dir() -> Path:
    """The shipped conformance suite; collected when no test path is given."""
    from pytest_libero import conformance

    return Path(conformance.__file__).parent


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` with --libero-gpus starts one worker per GPU."""
    gpus = option_value(config, "gpus")
    return len(parse_gpus(gpus)) if gpus else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    is_controller = not hasattr(config, "workerinput")
    try:
        gpus = option_value(config, "gpus")
        if gpus and is_controller:
            if not config.pluginmanager.hasplugin("xdist"):
                raise SetupError("--libero-gpus needs pytest-xdist's workers; it is disabled "
                                 "(-p no:xdist?) or not installed")
            configure_workers(config, parse_gpus(gpus))
        plan = build_plan(config)
        if plan is None:
            return
        isolation(config)
        prebuild(config)
        watchdog(config, plan)
        run_id(config)
        if is_controller:
            from pytest_libero.catalog.inventory import load_inventory, verify_entries

            load_adapter(plan.adapter)  # an adapter that cannot work is a usage error
            tasks = {e.task_id: e.as_dict() for e in plan.entries}  # a task once, all its states
            verify_entries(tasks.values(), load_inventory(ood=any(e.is_ood for e in plan.entries)))
            plan.profile.build_policy().close()  # a bad factory or option is a usage error
            if config.option.collectonly:
                config.stash[PLAN_KEY] = plan  # listing cases writes no run folder
                _collect_conformance(config)
                return
            server = None
            if _served(plan) and plan.profile.launch is None:
                server = preflight(plan.profile, on_wait=_tell_waiting(plan))  # before any run folder
                _tell_reply_horizon(plan, server)
            plan = replace(plan, renderer=_measure_renderer(config, plan))
            recorder = start_recorder(config, plan, server)
            plan = recorder.plan
        else:
            workerinput = config.workerinput  # type: ignore[attr-defined]
            plan = plan.only(workerinput[WORKER_CASES])
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[PLAN_KEY] = plan
    _collect_conformance(config)
    live_progress.register(config)
    if not is_controller:
        config.stash[RUN_DIR_KEY] = Path(workerinput[WORKER_RUN_DIR])
        return
    config.stash[RECORDER_KEY] = recorder
    config.stash[RUN_DIR_KEY] = recorder.folder.path
    config.pluginmanager.register(recorder, "libero-recorder")
    config.pluginmanager.register(TerminalSummary(recorder), "libero-terminal-summary")
    config.pluginmanager.register(AllureEnvironment(recorder.folder.path / "run.json"),
                                  "libero-allure-environment")
    config.pluginmanager.register(RobustnessFigure(recorder.folder.path), "libero-robustness-figure")
    if config.pluginmanager.hasplugin("xdist"):
        prefer_worksteal(config)
        controller = XdistController(recorder.folder.path, [e.case_id for e in plan.entries],
                                    plan.mode)
        config.pluginmanager.register(controller, "libero-xdist")


def _measure_renderer(config: pytest.Config, plan: RunPlan) -> dict[str, Any]:
    """The controller's fingerprint (run.json's ``renderer``): measured where this
    process's cases will render, or apart when xdist workers run them (each worker
    measures its own at its first case)."""
    if config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") != "no":
        return measure_apart()
    return measure_for_cases(isolation(config), plan.entries[0] if plan.entries else None)


def _case_plan(config: pytest.Config, plan: RunPlan, entry: Entry) -> RunPlan:
    """The plan with this process's renderer, measured once (an xdist worker measures
    at its first case, with that case's scene warming its case processes' server)."""
    if plan.renderer is not None:
        return plan
    renderer = config.stash.get(RENDERER_KEY, None)
    if renderer is None:
        renderer = config.stash[RENDERER_KEY] = measure_for_cases(isolation(config), entry)
    return replace(plan, renderer=renderer)


def _collect_conformance(config: pytest.Config) -> None:
    """Without test paths on the command line, the shipped conformance suite runs."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(conformance_dir())]


def start_recorder(config: pytest.Config, plan: RunPlan,
                   server: dict[str, Any] | None = None) -> Recorder:
    """Open the run folder: a new one, or the one --libero-resume continues; ``server``
    is what preflight learnt of the policy server (run.json's ``policy_server``)."""
    resume = option_value(config, "resume")
    if resume:
        clashing = ["--libero-run-id"] if option_value(config, "run-id") else []
        if config.getoption("libero_results") is not None:
            clashing.append("--libero-results")
        if clashing:
            raise SetupError(f"--libero-resume continues its own folder; drop {', '.join(clashing)}")
        previous = load_run(Path(resume), "--libero-resume")  # checked before it is changed
        difference = run_difference(previous, run_identity(plan, ""), same_shard=True)
        if difference:
            raise SetupError(f"--libero-resume={resume}: cannot continue that run here: {difference}")
        done = read_results(Path(resume))
        mixed = conflict(joined(renderer_uses(done, where="that run"), [session_use(plan.renderer)]))
        if mixed:
            raise SetupError(f"--libero-resume={resume}: cannot continue that run here: {mixed}. "
                             "A run's cases must all be rendered by one renderer; finish it "
                             "where it started, or start a new run")
        finished = {r["case"] for r in done}
        plan = plan.only(e.case_id for e in plan.entries if e.case_id not in finished)
        return Recorder.resume(plan, Path(resume), gates(config), server)
    root = Path(option_value(config, "results"))
    if not root.is_absolute():
        root = config.invocation_params.dir / root
    return Recorder.start(plan, root, run_id(config), gates(config), server)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Launch the profile's policy server, if it has one, once, on the controller."""
    config = session.config
    plan = config.stash.get(PLAN_KEY, None)
    if plan is None or plan.profile.launch is None or hasattr(config, "workerinput"):
        return
    if config.option.collectonly:
        return
    log = config.stash[RECORDER_KEY].folder.path / "server.log"
    server = LaunchedServer(plan.profile.launch, plan.profile.endpoint or "", log)
    config.add_cleanup(server.stop)
    try:
        server.start()
        preflight(plan.profile)
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None


def _served(plan: RunPlan) -> bool:
    """Whether the policy sits behind a server the plugin must find."""
    return plan.profile.served


def _tell_waiting(plan: RunPlan) -> Callable[[Exception], None]:
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


def _tell_reply_horizon(plan: RunPlan, server: dict[str, Any]) -> None:
    """Say once, before any case, that the server's chunks are shorter than K."""
    note = short_chunk_note(server.get("reply_horizon"), plan.replan_interval, served=True)
    if note is not None:
        sys.stderr.write(f"pytest-libero: {note} (preflight's probe)\n")
        sys.stderr.flush()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "libero_entry" not in metafunc.fixturenames:
        return
    plan = metafunc.config.stash.get(PLAN_KEY, None)
    if plan is None:
        skip = pytest.mark.skip(reason="no --libero-profile given: no LIBERO episode runs")
        metafunc.parametrize("libero_entry", [pytest.param(None, id="no-profile", marks=skip)])
        return
    metafunc.parametrize(
        "libero_entry",
        [pytest.param(entry, id=entry.case_id) for entry in plan.entries],
    )


def _host(config: pytest.Config) -> SimulatorHost:
    """This process's case processes, ended with the session."""
    host = config.stash.get(HOST_KEY, None)
    if host is None:
        host = config.stash[HOST_KEY] = SimulatorHost(prebuild=prebuild(config))
        config.add_cleanup(host.close)
    return host


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Tell each case which case this process runs after it (under xdist too: a worker
    takes its next item off the queue before it runs this one), so that case's set-up
    can start while this one runs."""
    item.stash[NEXT_ENTRY_KEY] = _case_entry(nextitem)


def _case_entry(item: pytest.Item | None) -> Entry | None:
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


class CaseErrored(Exception):
    """Raised in setup so an errored episode is a pytest *error*, not a failure."""

    def __init__(self, record: CaseRecord) -> None:
        super().__init__(record["summary"])
        self.record = record

    def report_text(self) -> str:
        """The cause in one line; the traceback and details stay in the record."""
        cause = self.record["summary"].splitlines()[0]
        where = self.record.get("evidence_dir")
        episode = Path(where) / "episode.json" if where else None
        details = str(episode) if episode and episode.is_file() else "the run's results.jsonl"
        return f"{self.record['case']}: {cause}\n(full error and traceback: {details})"


@pytest.fixture(scope="session")
def libero_plan(pytestconfig: pytest.Config) -> RunPlan:
    plan = pytestconfig.stash.get(PLAN_KEY, None)
    if plan is None:
        pytest.skip("no --libero-profile given: no LIBERO episode runs")
    return plan


@pytest.fixture(scope="session")
def libero_policy(libero_plan: RunPlan) -> Iterator[Policy]:
    policy = libero_plan.profile.build_policy()
    try:
        yield policy
    finally:
        policy.close()


@pytest.fixture
def libero_case(
    request: pytest.FixtureRequest, libero_plan: RunPlan, libero_entry: Any
) -> CaseRecord:
    """Run the case's episode during setup; an errored episode errors the case.

    A served policy is probed first: if its server is gone (nothing answers within
    wait_s), this case and the rest are left unattempted and the session stops.
    """
    run_dir = request.config.stash[RUN_DIR_KEY]
    case_dir = run_dir / "cases" / libero_entry.case_id
    if _served(libero_plan):
        gone = server_gone(libero_plan.profile)
        if gone is not None:
            stop = (f"{gone}; the remaining cases are left unattempted. Once the server is "
                    f"back, finish the run with the same command plus --libero-resume={run_dir} "
                    "(and without --libero-run-id or --libero-results)")
            request.session.shouldstop = stop
            request.node.user_properties.append((UNATTEMPTED_PROPERTY, stop))
            if isolation(request.config) == "process":
                _host(request.config).discard_prepared()
            pytest.skip(f"not attempted: {gone}")
    libero_plan = _case_plan(request.config, libero_plan, libero_entry)
    cap = libero_plan.budget_for(libero_entry).control_cap
    with live_progress.case_progress(request.config, libero_entry.case_id, cap) as progress:
        if isolation(request.config) == "process":
            record = _host(request.config).run(
                libero_plan, libero_entry, case_dir, watchdog(request.config, libero_plan),
                progress=progress.update, next_entry=request.node.stash.get(NEXT_ENTRY_KEY, None))
        else:
            policy = request.getfixturevalue("libero_policy")
            record = run_case_with_evidence(libero_plan, libero_entry, policy, case_dir,
                                            listener=progress)
    request.node.user_properties.append((RECORD_PROPERTY, record_to_json(record)))
    if allure_active(request.config):
        report_case(record, case_dir)
    if record["outcome"] == "errored":
        raise CaseErrored(record)
    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Show an errored episode as its recorded cause, not as fixture internals."""
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, CaseErrored):
        report.longrepr = call.excinfo.value.report_text()
    return report
