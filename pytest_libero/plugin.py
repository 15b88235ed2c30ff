"""The pytest plugin: options, one case per selected entry, outcomes, summary.

Thin on purpose: it turns options into a :class:`RunPlan`, parametrizes the
conformance test with the plan's entries, and hands records to the controller-side
recorder. The simulator is never imported here.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_libero.allure_report import allure_active, report_case
from pytest_libero.case import run_case_with_evidence
from pytest_libero.catalog import SelectionRequest, parse_shard, parse_task_ids
from pytest_libero.distributed import (
    WORKER_CASES,
    WORKER_RUN_DIR,
    XdistController,
    configure_workers,
    parse_gpus,
    prefer_worksteal,
)
from pytest_libero.errors import SetupError
from pytest_libero.isolation import Watchdog, run_isolated
from pytest_libero.merge import load_run, run_difference
from pytest_libero.launcher import LaunchedServer
from pytest_libero.plan import RunPlan, make_plan
from pytest_libero.policy.contract import Policy
from pytest_libero.profiles import load_profile, parse_policy_options
from pytest_libero.recorder import RECORD_PROPERTY, Gates, Recorder, load_baseline, run_identity
from pytest_libero.results import RunFolder, read_results

PLAN_KEY = pytest.StashKey[RunPlan]()
RECORDER_KEY = pytest.StashKey[Recorder]()
RUN_DIR_KEY = pytest.StashKey[Path]()


@dataclass(frozen=True)
class _Option:
    name: str
    help: str
    default: str | None = None

    @property
    def flag(self) -> str:
        return f"--libero-{self.name}"

    @property
    def dest(self) -> str:
        return "libero_" + self.name.replace("-", "_")


OPTIONS = (
    _Option("profile", "model profile: a shipped name (zero, random, replay, ...) or a path "
            "to a .toml file. Without it no episode runs."),
    _Option("scope", "selection scope: smoke (libero_10 tasks 0-1), development "
            "(libero_10, ids 0-4), task_coverage (--libero-suite + --libero-task-ids), all "
            "(130 entries)", "smoke"),
    _Option("suite", "suite for scope task_coverage/development: libero_spatial, "
            "libero_object, libero_goal, libero_90, libero_10"),
    _Option("task-ids", "task ids in native order, e.g. 0,1,4 or 0-9"),
    _Option("mode", "fast (each selected entry once) or full (refused until a validated "
            "native schedule exists)", "fast"),
    _Option("budget-mode", "horizon (the catalog's per-suite reference horizon) or decisions "
            "(max policy calls x replan interval); default from the profile"),
    _Option("max-policy-calls", "policy-call cap D for budget mode decisions; default from "
            "the profile"),
    _Option("replan-interval", "controls K executed from each chunk before asking again; "
            "default from the profile"),
    _Option("track", "observation track: rgb, or rgb+proprio (reported separately); default "
            "from the profile"),
    _Option("policy-option", "KEY=VALUE passed to the profile's policy factory, repeatable "
            "(e.g. actions=path.npy for replay); ini: one per line"),
    _Option("endpoint", "policy server address (ws://HOST:PORT), overriding the profile's"),
    _Option("call-timeout", "seconds one policy call may take before the case errors; "
            "overrides the profile's"),
    _Option("min-success", "gate: exit 1 unless every case completed and the overall "
            "success rate is at least RATE (0-1)"),
    _Option("baseline", "gate: exit 1 when this run is significantly worse than the run "
            "folder RUN_DIR on the paired cases (exact one-sided McNemar)"),
    _Option("baseline-alpha", "significance level of the baseline gate", "0.05"),
    _Option("isolation", "process (each case's simulator in a watched child process: a "
            "crash or hang costs that case only) or none (in the pytest process)", "process"),
    _Option("step-timeout", "watchdog: seconds a control step may take before the case's "
            "simulator is killed (isolation=process)", "120"),
    _Option("build-timeout", "watchdog: seconds building, resetting and settling an "
            "environment may take (isolation=process)", "600"),
    _Option("render", "consumed (render a camera only for the controls whose image a "
            "policy or the video uses; same bytes) or all (every camera, every control)",
            "consumed"),
    _Option("video-stride", "one video frame every N controls", "1"),
    _Option("adapter", "benchmark adapter: a registered name or module:factory", "libero"),
    _Option("shard", "run part I of N (1-based, e.g. 2/4) of the selection, parts balanced "
            "by budget; give every shard the same --libero-run-id"),
    _Option("resume", "continue the interrupted run in RUN_DIR: only its unattempted cases "
            "run, appended to the same folder"),
    _Option("gpus", "GPU indices, one per xdist worker (CUDA_VISIBLE_DEVICES and "
            "MUJOCO_EGL_DEVICE_ID); without -n, one worker per GPU"),
    _Option("results", "root folder for result folders (<root>/<profile>/<run id>)",
            "libero-results"),
    _Option("run-id", "name this run's folder; refused if it exists (default: UTC time + "
            "random suffix)"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("libero", "LIBERO evaluation (pytest-libero)")
    for option in OPTIONS:
        repeatable = option.name == "policy-option"
        group.addoption(
            option.flag,
            dest=option.dest,
            action="append" if repeatable else "store",
            default=None,
            help=option.help + (f" [default: {option.default}]" if option.default else ""),
        )
        ini_type: Literal["linelist", "string"] = "linelist" if repeatable else "string"
        parser.addini(
            option.dest,
            help=option.help,
            type=ini_type,
            default=[] if repeatable else (option.default or ""),
        )


def option_value(config: pytest.Config, name: str) -> Any:
    """The CLI value if given, else the ini value (pytest-asyncio's pattern)."""
    dest = "libero_" + name.replace("-", "_")
    value = config.getoption(dest)
    if value is None:
        value = config.getini(dest)
    return value if value not in ("", []) else None


def _int_option(config: pytest.Config, name: str) -> int | None:
    value = option_value(config, name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise SetupError(f"--libero-{name}={value!r} is not an integer") from None


def _float_option(config: pytest.Config, name: str) -> float | None:
    value = option_value(config, name)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise SetupError(f"--libero-{name}={value!r} must be a positive number of seconds")
    return seconds


def build_plan(config: pytest.Config) -> RunPlan | None:
    profile_name = option_value(config, "profile")
    if profile_name is None:
        return None
    task_ids = option_value(config, "task-ids")
    selection = SelectionRequest(
        scope=option_value(config, "scope") or "smoke",
        suite=option_value(config, "suite"),
        task_ids=parse_task_ids(task_ids) if task_ids is not None else None,
        mode=option_value(config, "mode") or "fast",
    )
    profile = load_profile(profile_name).with_overrides(
        options=parse_policy_options(option_value(config, "policy-option")),
        endpoint=option_value(config, "endpoint"),
        call_timeout=_float_option(config, "call-timeout"),
    )
    return make_plan(
        profile,
        selection,
        budget_mode=option_value(config, "budget-mode"),
        max_policy_calls=_int_option(config, "max-policy-calls"),
        replan_interval=_int_option(config, "replan-interval"),
        track=option_value(config, "track"),
        shard_of=parse_shard(shard) if (shard := option_value(config, "shard")) else None,
        adapter=option_value(config, "adapter") or "libero",
        render=option_value(config, "render") or "consumed",
        video_stride=_int_option(config, "video-stride") or 1,
    )


def gates(config: pytest.Config) -> Gates:
    """The operator's CI gates, validated."""
    min_success = _rate_option(config, "min-success")
    alpha = _rate_option(config, "baseline-alpha")
    baseline_dir = option_value(config, "baseline")
    baseline = load_baseline(Path(baseline_dir)) if baseline_dir else None
    return Gates(min_success, baseline, Path(baseline_dir) if baseline_dir else None,
                 alpha if alpha is not None else 0.05)


def _rate_option(config: pytest.Config, name: str) -> float | None:
    value = option_value(config, name)
    if value is None:
        return None
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise SetupError(f"--libero-{name}={value!r} must be a number between 0 and 1")
    return rate


def isolation(config: pytest.Config) -> str:
    mode = option_value(config, "isolation") or "process"
    if mode not in ("process", "none"):
        raise pytest.UsageError(f"--libero-isolation={mode!r}: allowed: process, none")
    return str(mode)


def watchdog(config: pytest.Config, plan: RunPlan) -> Watchdog:
    """Per-phase allowances; a policy call may take its own timeout plus a margin."""
    step = _float_option(config, "step-timeout") or 120.0
    build = _float_option(config, "build-timeout") or 600.0
    return Watchdog(build_s=build, step_s=step, policy_s=max(step, plan.profile.call_timeout + 30))


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
        watchdog(config, plan)
        if is_controller:
            from pytest_libero.inventory import load_inventory, verify_entries

            verify_entries([e.as_dict() for e in plan.entries], load_inventory())
            plan.profile.build_policy().close()  # a bad factory or option is a usage error
            if config.option.collectonly:
                config.stash[PLAN_KEY] = plan  # listing cases writes no run folder
                _collect_conformance(config)
                return
            recorder = start_recorder(config, plan)
            plan = recorder.plan
        else:
            workerinput = config.workerinput  # type: ignore[attr-defined]
            plan = plan.only(workerinput[WORKER_CASES])
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[PLAN_KEY] = plan
    _collect_conformance(config)
    if not is_controller:
        config.stash[RUN_DIR_KEY] = Path(workerinput[WORKER_RUN_DIR])
        return
    config.stash[RECORDER_KEY] = recorder
    config.stash[RUN_DIR_KEY] = recorder.folder.path
    config.pluginmanager.register(recorder, "libero-recorder")
    if config.pluginmanager.hasplugin("xdist"):
        prefer_worksteal(config)
        controller = XdistController(recorder.folder.path, [e.case_id for e in plan.entries])
        config.pluginmanager.register(controller, "libero-xdist")


def _collect_conformance(config: pytest.Config) -> None:
    """Without test paths on the command line, the shipped conformance suite runs."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(conformance_dir())]


def start_recorder(config: pytest.Config, plan: RunPlan) -> Recorder:
    """Open the run folder: a new one, or the one --libero-resume continues."""
    resume = option_value(config, "resume")
    if resume:
        clashing = ["--libero-run-id"] if option_value(config, "run-id") else []
        if config.getoption("libero_results") is not None:
            clashing.append("--libero-results")
        if clashing:
            raise SetupError(f"--libero-resume continues its own folder; drop {', '.join(clashing)}")
        folder = RunFolder(Path(resume), resume=True)
        previous = load_run(folder.path)
        difference = run_difference(previous, run_identity(plan, ""), same_shard=True)
        if difference:
            raise SetupError(f"--libero-resume={resume}: cannot continue that run here: {difference}")
        finished = {r["case"] for r in read_results(folder.path)}
        plan = plan.only(e.case_id for e in plan.entries if e.case_id not in finished)
        return Recorder.resume(plan, folder, gates(config))
    root = Path(option_value(config, "results") or "libero-results")
    if not root.is_absolute():
        root = config.invocation_params.dir / root
    return Recorder.start(plan, root, option_value(config, "run-id"), gates(config))


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
    try:
        server.start()
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.add_cleanup(server.stop)


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


class CaseErrored(Exception):
    """Raised in setup so an errored episode is a pytest *error*, not a failure."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(record["summary"])
        self.record = record

    def report_text(self) -> str:
        error = self.record["error"] or {}
        return f"{self.record['case']}: {self.record['summary']}\n\n{error.get('traceback', '')}"


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
) -> dict[str, Any]:
    """Run the case's episode during setup; an errored episode errors the case."""
    case_dir = request.config.stash[RUN_DIR_KEY] / "cases" / libero_entry.case_id
    if isolation(request.config) == "process":
        record = run_isolated(libero_plan, libero_entry, case_dir, watchdog(request.config, libero_plan))
    else:
        policy = request.getfixturevalue("libero_policy")
        record = run_case_with_evidence(libero_plan, libero_entry, policy, case_dir)
    request.node.user_properties.append((RECORD_PROPERTY, json.dumps(record, default=str)))
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
