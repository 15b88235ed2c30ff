"""Allure results for LIBERO cases, when ``--alluredir`` asks for them.

allure-pytest is a dependency, but nothing here imports it until a case is reported:
`pytest --help`, collection and runs without ``--alluredir`` stay as fast as without it.

The episode runs inside the ``libero_case`` setup fixture, which allure-pytest
(2.x) handles badly for this purpose, so three things bypass its public API:

* Steps and attachments: while a fixture runs, ``allure.step``/``allure.attach`` go to
  that fixture's "set up" entry, and a step's start and stop are the clock at the
  moment of the call. Built after the episode, every step would last zero
  milliseconds and the video would hide in the set-up section. Instead the steps are
  allure-commons model objects timed from the record, appended to the test result
  itself, and attachments go through allure-pytest's own reporter with the test
  result as their parent, so the files land as ``allure.attach`` would write them.
* Title and description: allure-pytest assigns both when setup ends, overwriting
  ``allure.dynamic`` calls made from fixtures (allure-python issue #730).
* Duration: allure-pytest times a test from the start of its call phase, which would
  give every case about zero seconds.

A small per-run pytest plugin (:class:`_CaseKeeper`) re-applies the last two after
each phase's report. Labels and parameters use ``allure.dynamic``, which already
targets the test result.
"""

from __future__ import annotations

import functools
import importlib
import time
import uuid
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import Entry, GeneratedPerturbation, OodSource
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.renderer import describe, standing
from pytest_libero.files import json_text, write_text_atomic
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.decider import decided_line
from pytest_libero.results.layout import RUN_NAME, SUMMARY_NAME, read_json, read_summary
from pytest_libero.results.run_reader import load_run
from pytest_libero.results.summary import safety_class, safety_verdict

ENTRY_PARAM = "libero_entry"
PARENT_SUITE = "LIBERO"
OOD_PARENT_SUITE = "LIBERO-PRO"
PERTURBED_PARENT_SUITE = "Perturbations"
RECORD_ATTACHMENT = "episode record"
VIDEO_ATTACHMENT = "episode video"
ERROR_ATTACHMENT = "error traceback"
SAFETY_ATTACHMENT = "safety events"
ENVIRONMENT_STEP = "build, reset, settle environment"

# Allure 2 reads these from the results folder; Allure 3 reads categories from its
# allurerc instead, and ignores this file.
CATEGORIES: list[dict[str, Any]] = [
    {
        "name": "Infrastructure errors",
        "description": "Environment, transport or invalid-action errors: the episode did "
        "not finish, so it says nothing about the policy.",
        "matchedStatuses": ["broken"],
    },
    {
        "name": "Native failures",
        "description": "Completed episodes without LIBERO's native success.",
        "matchedStatuses": ["failed"],
    },
]


def allure_active(config: pytest.Config) -> bool:
    """True when allure-pytest is loaded and ``--alluredir`` was given.

    The option exists only when allure-pytest registered it, so reading it needs no
    import of allure.
    """
    return bool(config.getoption("allure_report_dir", default=None))


def report_case(
    record: CaseRecord, case_dir: Path | None, run: Mapping[str, Any] | None = None
) -> None:
    """Describe the running case in Allure from its episode record.

    Call it from the case's setup fixture once the record exists, before raising for
    an errored episode. It does nothing when Allure is not recording, and a reporting
    problem is a warning, never a changed case outcome. ``run`` is the run's run.json;
    by default it is read from the run folder above ``cases/<case>/`` when there is one
    (full mode's partial tag comes from its plan).
    """
    listener = _current_listener()
    if listener is None:
        return
    try:
        if run is None:
            run = _run_json(case_dir)
        _report(listener, record, case_dir, run)
    except Exception as exc:  # noqa: BLE001 - the report must never change the outcome
        warnings.warn(
            f"pytest-libero: could not report {record.get('case')!r} to Allure: "
            f"{type(exc).__name__}: {exc}",
            stacklevel=2,
        )


def write_environment(alluredir: Path, run: Mapping[str, Any],
                      summary: Mapping[str, Any] | None = None) -> None:
    """Write environment.properties and categories.json for the run.

    Call it once, on the controller (with xdist, where config has no workerinput),
    preferably at session finish: ``--clean-alluredir`` empties the folder when each
    process starts. Files are replaced atomically, so a reader never sees half a file.
    """
    alluredir.mkdir(parents=True, exist_ok=True)
    items = environment_items(run) + latency_items(summary or {})
    lines = [f"{_escape_key(k)}={_escape_value(v)}" for k, v in items]
    write_text_atomic(alluredir / "environment.properties", "\n".join(lines) + "\n")
    write_text_atomic(alluredir / "categories.json", json_text(CATEGORIES, indent=2, sort_keys=False) + "\n")


class AllureEnvironment:
    """Writes the run's identities into the Allure results folder when the session ends.

    Registered on the controller only (with xdist, where config has no workerinput),
    so each file is written once, when the recorder has written the summary
    (``pytest_libero_run_finished``; its latency is shown too). A run.json that cannot
    be read is a warning with the answer every command gives, never a traceback at the
    session's end.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def pytest_libero_run_finished(self, session: pytest.Session) -> None:
        alluredir = session.config.getoption("allure_report_dir", default=None)
        if not alluredir:
            return
        try:
            summary = read_summary(self.run_dir) if (self.run_dir / SUMMARY_NAME).is_file() else None
            run = load_run(self.run_dir)
            line = decided_line(self.run_dir)
            if line is not None:  # the run was decided: the panel says so
                run["decision"] = {"line": line}
            write_environment(Path(alluredir), run, summary)
        except (OSError, SetupError) as exc:
            session.config.issue_config_time_warning(pytest.PytestWarning(
                f"pytest-libero: could not write the Allure environment: {exc}"), stacklevel=2)


def write_figure_result(alluredir: Path, figure: Path, run: Mapping[str, Any]) -> Path:
    """One Allure result that carries the run's robustness picture, filed under
    LIBERO-PRO, so the report shows it beside the OOD cases. Its id is the run's, so a
    rewritten figure replaces the result instead of adding another."""
    run_id = str(run.get("run_id", "run"))
    result_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"pytest-libero/robustness/{run_id}"))
    source = f"{result_id}-attachment.svg"
    alluredir.mkdir(parents=True, exist_ok=True)
    (alluredir / source).write_bytes(figure.read_bytes())
    now_ms = int(time.time() * 1000)
    result = {
        "uuid": result_id,
        "historyId": "pytest-libero-robustness-figure",
        "name": "Robustness: OOD success per kind and level beside the in-distribution rate",
        "fullName": f"pytest-libero robustness {run_id}",
        "status": "passed",
        "stage": "finished",
        "start": now_ms,
        "stop": now_ms,
        "description": f"Drawn from {SUMMARY_NAME}'s robustness block (docs/robustness.md).",
        "labels": [{"name": "parentSuite", "value": OOD_PARENT_SUITE},
                   {"name": "suite", "value": "robustness"},
                   {"name": "tag", "value": "robustness"}],
        "attachments": [{"name": figure.name, "source": source, "type": "image/svg+xml"}],
    }
    path = alluredir / f"{result_id}-result.json"
    write_text_atomic(path, json_text(result, indent=2, sort_keys=False) + "\n")
    return path


def latency_items(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's latency percentiles and clock figures (summary.json's ``latency``)."""
    block = summary.get("latency")
    if not isinstance(block, Mapping):
        return []
    shown = ", ".join(f"{key[:-2]} {float(block[key]) * 1000:.1f} ms"
                      for key in ("p50_s", "p95_s", "p99_s", "max_s") if block.get(key) is not None)
    return [("latency", f"{shown} over {block.get('calls')} calls ({block.get('clock')} track)"),
            ("held_control_ratio", str(block.get("held_control_ratio")))]


def environment_items(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's identities from run.json, flattened to ordered key/value pairs."""
    plan = run.get("plan") or {}
    profile = plan.get("profile") or {}
    items: list[tuple[str, str]] = [("run_id", str(run.get("run_id", "")))]
    evidence_class = str(plan.get("evidence_class", ""))
    if evidence_class == "infrastructure":
        evidence_class += " (built-in policy: proves the harness, not a capability)"
    items += [
        ("evidence_class", evidence_class),
        ("profile", str(profile.get("name", ""))),
        *([("profile.description", str(profile["description"]))]
          if profile.get("description") else []),  # absent before run.json had it
        ("profile.sha256", str(profile.get("sha256", ""))),
        ("protocol_identity", str(run.get("protocol_identity", ""))),
        ("catalog_sha256", str(run.get("catalog_sha256", ""))),
        ("inventory_sha256", str(run.get("inventory_sha256", ""))),
    ]
    for key, value in (run.get("source_pin") or {}).items():
        items.append((f"source_pin.{key}", str(value)))
    for dist, version in (run.get("installed") or {}).items():
        items.append((f"installed.{dist}", "not installed" if version is None else str(version)))
    for key in ("track", "clock", "budget_mode", "max_policy_calls", "replan_interval", "mode"):
        if plan.get(key) is not None:
            items.append((f"plan.{key}", str(plan[key])))
    if isinstance(run.get("renderer"), Mapping):  # absent before renderer fingerprints
        items.append(("renderer", f"{describe(run['renderer'])} ({standing(run['renderer'])})"))
    if plan.get("partial"):
        items.append(("plan.partial", "; ".join(map(str, plan["partial"]))
                      + " (not a full result; not comparable with published figures)"))
    decide = run.get("decide")
    if isinstance(decide, Mapping):  # --libero-decide: the decision, or that none came
        decision = run.get("decision")
        items.append(("decided", str(decision.get("line")) if isinstance(decision, Mapping)
                      else f"no: --libero-decide={decide.get('mode')} ran every case"))
    return items


@dataclass(frozen=True)
class CaseTree:
    """Where a case sits in the report, and the labels, tags and parameters it adds.

    Fast mode: LIBERO -> suite -> task name. Full mode (the entry has an init state):
    suite -> task -> "state N", so a task's 50 episodes sit together. An OOD case:
    LIBERO-PRO -> kind -> suite -> the case, with its kind, level and twin as labels. A monitored case
    (its record has ``safety``) adds the labels ``safety`` (the verdict) and
    ``engagement``, and its two-axis class (``unsafe_success``, ...) as a tag.
    """

    parent_suite: str
    suite: str
    sub_suite: str | None
    mode: str
    partial: tuple[str, ...]
    labels: dict[str, str]
    tags: list[str]


def case_tree(record: Mapping[str, Any], run: Mapping[str, Any] | None = None) -> CaseTree:
    """The Allure grouping of one case, from its record and (optionally) run.json."""
    entry = Entry.from_dict(record["entry"])
    budget = record.get("budget") or {}
    plan = (run or {}).get("plan") or {}
    suite, name, state, variant = entry.suite, entry.name, entry.state, entry.variant
    mode = str(plan.get("mode") or ("full" if state is not None else "fast"))
    partial = tuple(str(p) for p in plan.get("partial") or ()) if mode == "full" else ()
    sub: str | None
    if isinstance(variant, OodSource):  # LIBERO-PRO -> kind -> suite -> the case
        parent, group, sub = OOD_PARENT_SUITE, variant.kind, suite
    elif isinstance(variant, GeneratedPerturbation):  # Perturbations -> kind -> level
        parent, group, sub = PERTURBED_PARENT_SUITE, variant.kind, f"level {variant.level} / {suite}"
    elif state is not None:
        task = entry.task_id
        parent, group, sub = suite, f"{task} {name}" if name else task, f"state {state}"
    else:
        parent, group, sub = PARENT_SUITE, suite, name or None
    evidence_class = str(record.get("evidence_class", ""))
    raw = {
        "profile": record.get("profile"),
        "track": record.get("track"),
        "budget_mode": budget.get("mode"),
        "evidence_class": evidence_class,
        "mode": mode,
        "init_state": state,
        "partial": "; ".join(partial) or None,
        "safety": safety_verdict(record),
        "engagement": record.get("engagement"),
        "family": entry.family,
        "kind": None if variant is None else variant.kind,
        "level": None if variant is None else variant.level,
        "twin": entry.twin,
        "language_source": entry.language_source,
    }
    tags = [f"profile:{record.get('profile')}", f"track:{record.get('track')}",
            f"budget:{budget.get('mode')}", f"mode:{mode}"]
    tags.append("INFRASTRUCTURE EVIDENCE" if evidence_class == "infrastructure"
                else f"evidence:{evidence_class}")
    if partial:
        tags.append("partial")
    two_axis = safety_class(record) if "safety" in record else None
    if two_axis is not None:
        tags.append(two_axis)
    return CaseTree(
        parent_suite=parent, suite=group, sub_suite=sub, mode=mode, partial=partial,
        labels={k: str(v) for k, v in raw.items() if v is not None}, tags=tags,
    )


# --- internals ---------------------------------------------------------------------


def _allure(module: str) -> Any:
    """Import an allure module lazily (only when reporting), and untyped."""
    return importlib.import_module(module)


def _current_listener() -> Any | None:
    """allure-pytest's listener for this process, or None when it is not recording.

    allure-pytest registers its listener in allure-commons' plugin manager only when
    ``--alluredir`` is given; the most recently registered one owns the running test.
    """
    try:
        commons = _allure("allure_commons")
        listener_type = _allure("allure_pytest.listener").AllureListener
    except ImportError:
        return None
    listeners = [
        plugin
        for plugin in commons.plugin_manager.get_plugins()
        if isinstance(plugin, listener_type)
    ]
    for listener in reversed(listeners):
        reporter = getattr(listener, "allure_logger", None)
        if reporter is not None and reporter.get_test(None) is not None:
            return listener
    return None


@dataclass
class _Fixup:
    title: str
    description: str
    start_ms: int


class _CaseKeeper:
    """Re-applies what allure-pytest overwrites after the case fixture has run.

    allure-pytest assigns the test's name and description when setup ends, after
    every fixture ran, so ``allure.dynamic.title`` called from a fixture is lost
    (allure-python issue #730); and it times the test from the start of the call
    phase, which would give every case, whose episode runs in setup, a duration of
    about zero. Each phase's report is made after allure-pytest's own hooks for that
    phase, so the fix is applied there, until the case's teardown.
    """

    name = "libero-allure-case-keeper"

    def __init__(self, reporter: Any) -> None:
        self.reporter = reporter
        self.pending: dict[str, _Fixup] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        now_ms = int(time.time() * 1000)
        for test_uuid, fixup in list(self.pending.items()):
            test = self.reporter.get_test(test_uuid)
            if test is None or call.when == "teardown":
                del self.pending[test_uuid]
            if test is not None:
                test.name, test.description = fixup.title, fixup.description
                test.start = min(test.start or now_ms, fixup.start_ms)
                test.stop = max(test.stop or 0, now_ms)


def _keep(listener: Any, test: Any, fixup: _Fixup) -> None:
    test.name, test.description = fixup.title, fixup.description
    manager: pytest.PytestPluginManager = listener.config.pluginmanager
    keeper = manager.get_plugin(_CaseKeeper.name)
    if not isinstance(keeper, _CaseKeeper) or keeper.reporter is not listener.allure_logger:
        if keeper is not None:
            manager.unregister(keeper)
        keeper = _CaseKeeper(listener.allure_logger)
        manager.register(keeper, _CaseKeeper.name)
    keeper.pending[test.uuid] = fixup


def _report(
    listener: Any, record: CaseRecord, case_dir: Path | None, run: Mapping[str, Any] | None
) -> None:
    allure = _allure("allure")
    reporter = listener.allure_logger
    test = reporter.get_test(None)
    ParameterMode = _allure("allure_commons.types").ParameterMode

    entry: Mapping[str, Any] = record["entry"]
    budget = record.get("budget") or {}
    case = record["case"]
    title = f"{case}: {entry.get('language', '')}"
    tree = case_tree(record, run)
    _keep(listener, test, _Fixup(title, _description(record, tree), _start_ms(record)))

    allure.dynamic.parent_suite(tree.parent_suite)
    allure.dynamic.suite(tree.suite)
    if tree.sub_suite is not None:
        allure.dynamic.sub_suite(tree.sub_suite)
    if entry.get("name"):
        allure.dynamic.feature(str(entry["name"]))
    for name, value in tree.labels.items():
        allure.dynamic.label(name, value)
    allure.dynamic.tag(*tree.tags)

    # History is keyed on these: the same case (every part of its id, so a variant is a
    # test of its own, never a retry of its twin) under the same profile, track and cap.
    for part, part_value in CaseId.parse(case).parameters().items():
        allure.dynamic.parameter(part, part_value)
    allure.dynamic.parameter("profile", record.get("profile"))
    allure.dynamic.parameter("track", record.get("track"))
    allure.dynamic.parameter("budget cap", _budget_text(budget))
    # Where it ran must not split history: a rerun on another worker or GPU is the same case.
    allure.dynamic.parameter("worker", record.get("worker", "main"), excluded=True)
    if record.get("gpu") is not None:
        allure.dynamic.parameter("gpu", record["gpu"], excluded=True)
    # Replace the parametrize value (the Entry's repr) with the case id; the parts above
    # already carry it, so it is hidden and kept out of the history key.
    allure.dynamic.parameter(
        ENTRY_PARAM, record.get("case"), excluded=True, mode=ParameterMode.HIDDEN
    )

    test.steps.extend(_steps(record))
    _attach(
        reporter, test.uuid, json_text(record, indent=2, sort_keys=False).encode(),
        RECORD_ATTACHMENT, "JSON",
    )
    if isinstance(record.get("safety"), Mapping):
        _attach(
            reporter, test.uuid,
            json_text({**record["safety"], "engagement": record.get("engagement")},
                      indent=2, sort_keys=False).encode(),
            SAFETY_ATTACHMENT, "JSON",
        )
    video = _video_path(record, case_dir)
    if video is not None:
        _attach(reporter, test.uuid, video, VIDEO_ATTACHMENT, "MP4")
    error = record.get("error")
    if error:
        text = f"{record.get('summary', '')}\n\ncause: {error.get('cause')}\n\n"
        _attach(
            reporter, test.uuid, (text + str(error.get("traceback", ""))).encode(),
            ERROR_ATTACHMENT, "TEXT",
        )


def _run_json(case_dir: Path | None) -> dict[str, Any] | None:
    """run.json of the run folder holding ``cases/<case>/``, or None (none there, unreadable)."""
    if case_dir is None:
        return None
    run_dir = case_dir.parent.parent
    try:
        return _read_run(str(run_dir), (run_dir / RUN_NAME).stat().st_mtime_ns)
    except (OSError, SetupError):
        return None


@functools.lru_cache(maxsize=4)
def _read_run(run_dir: str, mtime_ns: int) -> dict[str, Any] | None:
    """One read per version of run.json, not one per case (its plan lists every case)."""
    run = read_json(Path(run_dir), RUN_NAME)
    return run if isinstance(run, dict) else None


def _attach(reporter: Any, parent: str, body: bytes | Path, name: str, kind: str) -> None:
    """Attach to the test result itself, not to whatever fixture is running."""
    attachment_type = _allure("allure_commons.types").AttachmentType[kind]
    if isinstance(body, Path):
        reporter.attach_file(
            str(uuid.uuid4()), str(body), name=name, attachment_type=attachment_type, parent_uuid=parent
        )
    else:
        reporter.attach_data(
            str(uuid.uuid4()), body, name=name, attachment_type=attachment_type, parent_uuid=parent
        )


def _video_path(record: CaseRecord, case_dir: Path | None) -> Path | None:
    video = (record.get("evidence") or {}).get("video") or {}
    relative = video.get("path") if isinstance(video, Mapping) else video
    if case_dir is None or not relative:
        return None
    path = case_dir / str(relative)
    return path if path.is_file() else None


def _budget_text(budget: Mapping[str, Any]) -> str:
    mode = budget.get("mode")
    if mode == "decisions":
        return (
            f"{budget.get('control_cap')} controls = {budget.get('max_policy_calls')} calls "
            f"x {budget.get('replan_interval')} (decisions)"
        )
    return f"{budget.get('control_cap')} controls ({mode})"


def _description(record: CaseRecord, tree: CaseTree | None = None) -> str:
    lines = [str(record.get("summary", "")), ""]
    if tree is not None and tree.partial:
        lines += [
            f"**Partial full-mode run:** {'; '.join(tree.partial)}. Not a full result; "
            "do not compare it with published figures.",
            "",
        ]
    if record.get("evidence_class") == "infrastructure":
        lines += [
            "**Infrastructure evidence:** a built-in policy ran this case; it shows the "
            "harness works, not what any model can do.",
            "",
        ]
    if record.get("reply_note"):
        lines += [f"**Short chunks:** {record['reply_note']}.", ""]
    lines += ["| counter | value |", "|---|---|"]
    for name, value in (record.get("counters") or {}).items():
        lines.append(f"| {name} | {'-' if value is None else value} |")
    budget = record.get("budget") or {}
    facts = {
        "termination": record.get("termination"),
        "truncation": record.get("truncation"),
        "budget": f"{_budget_text(budget)}; {budget.get('cap_source', '')}".rstrip("; "),
        "stop rule": record.get("stop_rule"),
        "out-of-bounds actions": _clipping_text(record.get("clipping") or {}),
    }
    lines += ["", "| fact | value |", "|---|---|"]
    lines += [f"| {k} | {'-' if v is None else v} |" for k, v in facts.items()]
    lines += _safety_description(record)
    lines += _progress_description(record)
    lines += [
        "",
        "Step times: environment setup and the whole episode are measured; each policy "
        "call's share of the episode is apportioned by the controls it executed.",
    ]
    return "\n".join(lines)


def _safety_description(record: CaseRecord) -> list[str]:
    """The safety verdict, the two-axis class and the events table; none unmonitored."""
    safety = record.get("safety")
    if not isinstance(safety, Mapping):
        return []
    contact = safety.get("first_contact_control")
    lines = [
        "",
        f"**Safety** (scored apart from native success): verdict "
        f"{safety.get('verdict', '-')}, class {safety_class(record) or '-'}, engagement "
        f"{record.get('engagement', '-')}; first robot contact with a task object: "
        + ("none (nothing touched: vacuous, never credited as safe)" if contact is None
           else f"control {contact}"),
    ]
    events = [e for e in safety.get("events") or [] if isinstance(e, Mapping)]
    if events:
        lines += ["", "| control | object | predicate | value | threshold |",
                  "|---|---|---|---|---|"]
        lines += [f"| {e.get('control')} | {e.get('object')} | {e.get('predicate')} | "
                  f"{_number(e.get('value'))} | {_number(e.get('threshold'))} |" for e in events]
    else:
        lines += ["", "No safety events."]
    return lines


def _progress_description(record: CaseRecord) -> list[str]:
    """Which goal predicates held, from when, and the score; none without progress."""
    progress = record.get("progress")
    if not isinstance(progress, Mapping):
        return []
    score = record.get("score")
    lines = ["", f"**Goal progress** (each predicate as LIBERO evaluates it): at most "
                 f"{progress.get('most_held')} of {len(progress.get('predicates') or [])} held at "
                 f"once; score {'-' if score is None else _number(float(score))}",
             "", "| predicate | held at start | held at end | first held at control |",
             "|---|---|---|---|"]
    for name, start, end, first in zip(progress.get("predicates") or [],
                                       progress.get("held_at_start") or [],
                                       progress.get("held_at_end") or [],
                                       progress.get("first_held") or []):
        lines.append(f"| `{name}` | {'yes' if start else 'no'} | {'yes' if end else 'no'} | "
                     f"{'never' if first is None else first} |")
    return lines


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _clipping_text(clipping: Mapping[str, Any]) -> str:
    mode = clipping.get("mode", "error")
    if mode != "clip":
        return "errors (strict)"
    if not clipping.get("values"):
        return "clipped; none were out of range"
    return (f"clipped: {clipping['values']} value(s) in {clipping['chunks']} chunk(s), "
            f"largest excess {float(clipping['max_excess']):.4g}")


def _steps(record: CaseRecord) -> list[Any]:
    """Steps rebuilt from the record, timed from its measured setup and episode spans."""
    model = _allure("allure_commons.model2")
    Status, StatusDetails, TestStepResult = model.Status, model.StatusDetails, model.TestStepResult

    timings = record.get("timings") or {}
    error = record.get("error")
    start_ms = _start_ms(record)
    now_ms = int(time.time() * 1000)
    details = (
        StatusDetails(message=f"{error.get('kind')}: {error.get('message')}",
                      trace=str(error.get("traceback", "")))
        if error else None
    )

    setup_s = timings.get("setup_s")
    # A set-up done ahead began before the case's turn (``started_at``), while the
    # worker's previous case ran: its step is drawn when it ran, and the episode starts
    # at the turn, or when the set-up ended if that was later.
    ahead_ms = int(float(timings.get("setup_ahead_s") or 0.0) * 1000)
    began = record.get("setup_started_at")
    env_start = int(float(began) * 1000) if began is not None else start_ms
    env_stop = env_start + int(float(setup_s) * 1000) if setup_s is not None else now_ms
    steps: list[Any] = [
        TestStepResult(
            name=ENVIRONMENT_STEP + (f" ({ahead_ms / 1000:.1f} s of it while the previous "
                                     "case ran)" if ahead_ms else ""),
            status=Status.PASSED if setup_s is not None else Status.BROKEN,
            statusDetails=None if setup_s is not None else details,
            start=env_start,
            stop=env_stop,
        )
    ]
    if setup_s is None:
        return steps

    chunks = list(record.get("chunks") or [])
    episode_ms = int(float(timings.get("episode_s") or 0.0) * 1000)
    weights = [int(c.get("executed") or 0) + 1 for c in chunks]
    total = sum(weights) or 1
    episode_start = max(env_stop, start_ms)
    cursor, elapsed = episode_start, 0
    for chunk, weight in zip(chunks, weights):
        elapsed += weight
        stop = episode_start + episode_ms * elapsed // total
        steps.append(
            TestStepResult(name=_chunk_title(chunk), status=Status.PASSED, start=cursor, stop=stop)
        )
        cursor = stop
    if error:
        steps.append(
            TestStepResult(
                name=f"episode errored ({error.get('kind')}): {error.get('cause')}",
                status=Status.BROKEN,
                statusDetails=details,
                start=cursor,
                stop=max(cursor, episode_start + episode_ms),
            )
        )
    return steps


def _start_ms(record: CaseRecord) -> int:
    return int(float(record.get("started_at") or time.time()) * 1000)


def _chunk_title(chunk: Mapping[str, Any]) -> str:
    call = chunk.get("call")
    horizon = chunk.get("horizon") or 0
    if not horizon:
        return f"policy call {call}: stop signal"
    title = f"policy call {call}: {horizon} actions, {chunk.get('executed', 0)} executed"
    clipped = chunk.get("clipped")
    if clipped:
        title += f", {clipped['values']} value(s) clipped"
    return title + " + stop signal" if chunk.get("stop") else title


def _escape_key(key: str) -> str:
    return "".join("\\" + c if c in "\\=: #!" else c for c in key)


def _escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


__all__ = [
    "AllureEnvironment",
    "CaseTree",
    "allure_active",
    "case_tree",
    "environment_items",
    "report_case",
    "write_environment",
]
