"""Issue 62.1: each case's record is read once, on the controller, and handed to the
listeners of pytest-libero's own hooks (pytest_libero/hookspecs.py): a third-party plugin
(a lab's dashboard) hears every case's typed record, with and without xdist, and the
run's end after summary.json. No simulator: the scripted adapter runs a case in
milliseconds (tests/decide_adapter.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from decided_runs import run

from harness.runs import run_folder, run_records
from pytest_libero.results.feed import CaseFeed, case_of

DASHBOARD = '''
"""A lab's dashboard: another plugin, loaded with -p, that listens to pytest-libero."""
import json
import os
from pathlib import Path

import pytest

HEARD = Path(os.environ["DASHBOARD_HEARD"])


def tell(**said):
    with HEARD.open("a") as out:
        out.write(json.dumps({**said, "pid": os.getpid()}) + "\\n")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        tell(hook="controller")


@pytest.hookimpl(optionalhook=True)
def pytest_libero_case_started(case, nodeid):
    tell(hook="started", case=case, nodeid=nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_libero_case_recorded(record, report):
    results = Path(record["evidence_dir"]).parents[1] / "results.jsonl"
    kept = [json.loads(line) for line in results.read_text().splitlines()]
    tell(hook="recorded", case=record["case"], record=record, when=report.when,
         kept=record in kept)


@pytest.hookimpl(optionalhook=True)
def pytest_libero_case_finished(case, record, duration):
    tell(hook="finished", case=case, recorded=record is not None, duration=duration)


@pytest.hookimpl(optionalhook=True)
def pytest_libero_run_finished(session, run_dir, summary):
    written = json.loads((run_dir / "summary.json").read_text())
    tell(hook="run_finished", run_dir=str(run_dir), same=written == summary,
         exitstatus=int(session.exitstatus))
'''
CASES = [f"libero_90-{i:02d}" for i in range(4)]


def heard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          *args: str) -> tuple[Path, list[dict[str, Any]]]:
    """Run four scripted cases with the dashboard loaded (``-p``, from ``tmp_path``); the
    run folder and what the dashboard heard."""
    (tmp_path / "lab_dashboard.py").write_text(DASHBOARD)
    said = tmp_path / "heard.jsonl"
    monkeypatch.setenv("DASHBOARD_HEARD", str(said))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    done = run(tmp_path, "-p", "lab_dashboard", "--libero-task-ids=0-3", *args, success="1,2")
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout[-3000:] + done.stderr[-3000:]
    return run_folder(tmp_path / "libero-results", "zero"), [
        json.loads(line) for line in said.read_text().splitlines()]


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_third_party_plugin_hears_every_case_s_typed_record_on_the_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: tuple[str, ...]
) -> None:
    folder, said = heard(tmp_path, monkeypatch, *workers)
    (controller,) = [s["pid"] for s in said if s["hook"] == "controller"]
    assert {s["pid"] for s in said} == {controller}  # never in a worker
    hooks = [s for s in said if s["hook"] != "controller"]
    records = run_records(folder)
    # Every case's record, the typed record results.jsonl keeps, already kept there,
    # in the order results.jsonl has them.
    recorded = [s for s in hooks if s["hook"] == "recorded"]
    assert [s["record"] for s in recorded] == records
    assert sorted(s["case"] for s in recorded) == CASES
    assert all(s["kept"] and s["when"] == "teardown" for s in recorded)
    # Each case: started, recorded, finished, in that order, once each.
    for case in CASES:
        mine = [s["hook"] for s in hooks if s.get("case") == case]
        assert mine == ["started", "recorded", "finished"], (case, mine)
    finished = [s for s in hooks if s["hook"] == "finished"]
    assert all(s["recorded"] and s["duration"] >= 0 for s in finished)
    # The run's end: once, last, with summary.json written and the exit code set.
    assert hooks[-1] == {"hook": "run_finished", "run_dir": str(folder), "same": True,
                         "exitstatus": int(pytest.ExitCode.TESTS_FAILED), "pid": controller}
    assert [s["hook"] for s in hooks].count("run_finished") == 1


def test_the_feed_tells_a_case_with_no_record_as_finished_only() -> None:
    """A case that ran no episode (left unattempted, skipped once decided) is finished
    with no record; a report that is not a case of the run is nobody's business."""
    told: list[tuple[str, dict[str, Any]]] = []

    class Hooks:
        def __getattr__(self, name: str) -> Any:
            return lambda **kwargs: told.append((name, kwargs))

    class Keeper:
        def __init__(self) -> None:
            self.stopped: list[str] = []

        def keep(self, record: Any) -> None:
            raise AssertionError("no record to keep")

        def stop(self, why: str) -> None:
            self.stopped.append(why)

    keeper = Keeper()
    feed = CaseFeed(Hooks(), ["libero_10-00"], keeper)  # type: ignore[arg-type]
    nodeid = "test_libero.py::test_libero_task[libero_10-00]"
    feed.pytest_runtest_logstart(nodeid)
    for when in ("setup", "call", "teardown"):
        report = pytest.TestReport(nodeid, ("test_libero.py", 0, ""), {}, "skipped" if when == "setup"
                                   else "passed", None, when, duration=1.5,
                                   user_properties=[("libero_unattempted", "gone")] if when == "teardown"
                                   else [])
        feed.pytest_runtest_logreport(report)
    other = pytest.TestReport("test_x.py::test_y[1]", ("test_x.py", 0, ""), {}, "passed", None,
                              "teardown")
    feed.pytest_runtest_logstart(other.nodeid)
    feed.pytest_runtest_logreport(other)
    assert [name for name, _ in told] == ["pytest_libero_case_started", "pytest_libero_case_finished"]
    finished = told[1][1]
    assert finished["case"] == "libero_10-00" and finished["record"] is None
    assert finished["duration"] == 4.5
    assert keeper.stopped == ["gone"]
    assert case_of(nodeid) == "libero_10-00"


def test_the_documented_dashboard_implements_the_hooks_as_declared() -> None:
    """docs/architecture.md's example plugin names real hooks and only their arguments
    (pluggy would refuse it at registration otherwise)."""
    import ast
    import inspect

    from pytest_libero import hookspecs

    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    source = "#" + doc.split("\n# lab_dashboard.py", 1)[1].split("```", 1)[0]  # its first line a comment
    functions = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)]
    assert functions
    for function in functions:
        spec = getattr(hookspecs, function.name)
        declared = set(inspect.signature(spec).parameters)
        assert {arg.arg for arg in function.args.args} <= declared, function.name
