"""The pytest plugin's hooks: options, one case per selected entry, outcomes, summary.

Hooks only: settings are read once per process (``config.settings``), the controller's
checks and run folder and each case's run are ``pytest_libero.session``'s; the hooks
stash the :class:`~pytest_libero.session.Session` and hand it on. The simulator is never
imported here.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_libero import unsupported_python
from pytest_libero.catalog.entries import Entry
from pytest_libero.config import options
from pytest_libero.config.options import option_value
from pytest_libero.config.settings import read_settings
from pytest_libero.config.workers import (
    XdistController,
    configure_workers,
    parse_gpus,
    prefer_worksteal,
)
from pytest_libero.conformance.collection import suite_directory, suite_folder
from pytest_libero.episode.record import RECORD_PROPERTY, UNATTEMPTED_PROPERTY, CaseRecord, record_to_json
from pytest_libero.export.trackers import TrackerLog
from pytest_libero.policy.openpi.launcher import LaunchedServer
from pytest_libero.policy.probe import preflight
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.rendering import ROBOSUITE_ESCAPE_WARNING
from pytest_libero.report import progress as live_progress
from pytest_libero.report.allure import AllureEnvironment, allure_active, report_case
from pytest_libero.report.eta import Remaining
from pytest_libero.report.figures import RobustnessFigure
from pytest_libero.report.terminal import TerminalSummary
from pytest_libero.results.decider import DecidedLoop
from pytest_libero.results.feed import CaseFeed
from pytest_libero.results.layout import SERVER_LOG_NAME, case_path
from pytest_libero.session import (
    CaseErrored,
    Decided,
    Session,
    Unattempted,
    case_entry,
    controller_session,
    run_case,
    worker_session,
)

SESSION_KEY = pytest.StashKey[Session]()
NEXT_ENTRY_KEY = pytest.StashKey[Entry | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    options.register(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks other plugins may implement (``hookspecs.py``)."""
    from pytest_libero import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def conformance_dir() -> Path:
    """The shipped conformance suite; collected when no test path is given."""
    return suite_folder()


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return suite_directory(path, parent)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` with --libero-gpus starts one worker per GPU."""
    gpus = option_value(config, "gpus")
    return len(parse_gpus(gpus)) if gpus else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    python_problem = unsupported_python()
    if python_problem is not None:
        raise pytest.UsageError(python_problem)
    message, module = ROBOSUITE_ESCAPE_WARNING
    for category in ("SyntaxWarning", "DeprecationWarning"):  # pytest's own filters come first in a test
        config.addinivalue_line("filterwarnings", f"ignore:{message}:{category}:{module}")
    workerinput = getattr(config, "workerinput", None)
    under_xdist = config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") != "no"
    try:
        gpus = option_value(config, "gpus")
        if gpus and workerinput is None:
            if not config.pluginmanager.hasplugin("xdist"):
                raise SetupError("--libero-gpus needs pytest-xdist's workers; it is disabled "
                                 "(-p no:xdist?) or not installed")
            configure_workers(config, parse_gpus(gpus))
        settings = read_settings(config)
        if settings is None:
            return
        session = (worker_session(settings, workerinput) if workerinput is not None
                   else controller_session(settings, collect_only=config.option.collectonly,
                                           under_xdist=under_xdist))
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION_KEY] = session
    config.add_cleanup(session.close)
    _collect_conformance(config)
    if session.run_dir is None:  # --collect-only
        return
    live_progress.register(config, None if workerinput is not None else Remaining.for_plan(
        session.plan, session.order, live_progress.worker_count(config), session.settings.prebuild))
    recorder = session.recorder
    if recorder is None:  # an xdist worker: the controller records
        return
    config.pluginmanager.register(recorder, "libero-recorder")
    # The one reader of the cases' reports: each record kept by the recorder, then told
    # to the listeners of hookspecs.py (the ETA clock and finished lines registered
    # above, the decider, a lab's own plugin); the run's end likewise, after summary.json.
    config.pluginmanager.register(CaseFeed(config.hook, [e.case_id for e in session.plan.entries],
                                           recorder), "libero-case-feed")
    config.pluginmanager.register(AllureEnvironment(recorder.folder.path),
                                  "libero-allure-environment")
    trackers = session.settings.trackers
    if trackers.wandb or trackers.mlflow:
        config.pluginmanager.register(TrackerLog(recorder.folder.path, trackers),
                                      "libero-trackers")
    config.pluginmanager.register(TerminalSummary(recorder), "libero-terminal-summary")
    config.pluginmanager.register(RobustnessFigure(recorder.folder.path), "libero-robustness-figure")
    decider = recorder.decider
    if decider is not None:
        config.pluginmanager.register(decider, "libero-decider")
    workers = config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") != "no"
    if decider is not None and not workers:  # (--libero-gpus may have asked for workers)
        config.pluginmanager.register(DecidedLoop(decider), "libero-decided-loop")
    if config.pluginmanager.hasplugin("xdist"):
        prefer_worksteal(config)
        controller = XdistController(recorder.folder.path,
                                     [e.case_id for e in session.plan.entries], session.plan.mode,
                                     order=session.order,
                                     decided=None if decider is None else lambda: decider.decided)
        config.pluginmanager.register(controller, "libero-xdist")


def _collect_conformance(config: pytest.Config) -> None:
    """Without test paths on the command line, the shipped conformance suite runs."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(conformance_dir())]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Launch the profile's policy server, if it has one, once, on the controller."""
    ours = session.config.stash.get(SESSION_KEY, None)
    if ours is None or ours.recorder is None or ours.plan.profile.launch is None:
        return
    profile = ours.plan.profile
    assert profile.launch is not None
    server = LaunchedServer(profile.launch, profile.endpoint or "",
                            ours.recorder.folder.path / SERVER_LOG_NAME)
    session.config.add_cleanup(server.stop)
    try:
        server.start()
        preflight(profile)
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "libero_entry" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash.get(SESSION_KEY, None)
    if session is None:
        skip = pytest.mark.skip(reason="no --libero-profile given: no LIBERO episode runs")
        metafunc.parametrize("libero_entry", [pytest.param(None, id="no-profile", marks=skip)])
        return
    # A generated perturbation that cannot apply to its entry is shown, skipped with the
    # reason; it is not part of the selection, so the run is complete without it.
    skipped = [pytest.param(entry, id=entry.case_id, marks=pytest.mark.skip(reason=reason))
               for entry, reason in session.plan.inapplicable]
    metafunc.parametrize(
        "libero_entry",
        [*(pytest.param(entry, id=entry.case_id) for entry in session.plan.entries), *skipped],
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A run that decides early runs its cases in its own order (``--libero-decide``:
    native for exact, drawn for anytime); every xdist worker sorts alike."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None or session.order is None:
        return
    rank = {case: n for n, case in enumerate(session.order)}
    last = len(rank)

    def position(item: pytest.Item) -> int:
        entry = case_entry(item)
        return rank.get(entry.case_id, last) if entry is not None else last

    items.sort(key=position)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Tell each case which case this process runs after it (under xdist too: a worker
    takes its next item off the queue before it runs this one), so that case's set-up
    can start while this one runs."""
    item.stash[NEXT_ENTRY_KEY] = case_entry(nextitem)


@pytest.fixture(scope="session")
def libero_plan(pytestconfig: pytest.Config) -> Any:
    session = pytestconfig.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip("no --libero-profile given: no LIBERO episode runs")
    return session.plan


@pytest.fixture
def libero_case(request: pytest.FixtureRequest, libero_entry: Any) -> CaseRecord:
    """Run the case's episode during setup; an errored episode errors the case, a policy
    server that is gone leaves this case and the rest unattempted."""
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip("no --libero-profile given: no LIBERO episode runs")
    outcome = run_case(session, libero_entry, config=request.config,
                       next_entry=request.node.stash.get(NEXT_ENTRY_KEY, None))
    if isinstance(outcome, Unattempted):
        request.session.shouldstop = outcome.stop
        request.node.user_properties.append((UNATTEMPTED_PROPERTY, outcome.stop))
        pytest.skip(f"not attempted: {outcome.gone}")
    if isinstance(outcome, Decided):
        pytest.skip(f"not run: {outcome.line}")
    request.node.user_properties.append((RECORD_PROPERTY, record_to_json(outcome)))
    if allure_active(request.config) and session.run_dir is not None:
        report_case(outcome, case_path(session.run_dir, libero_entry.case_id))
    if outcome["outcome"] == "errored":
        raise CaseErrored(outcome)
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Show an errored episode as its recorded cause, not as fixture internals."""
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, CaseErrored):
        report.longrepr = call.excinfo.value.report_text()
    return report
