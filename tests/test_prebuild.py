"""The next case's set-up runs while the current case runs, and changes nothing else.

A worker's next case (pytest's ``nextitem``) gets its own case process, which builds,
resets, installs its state and settles while the current episode runs. These tests run
the real simulator: the bytes a prebuilt case delivers are those of a case built at its
turn, and a Ctrl-C in the middle of an overlap leaves no process of the run behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from serial_runs import CASES, serial_without_prebuild

from harness import proctree
from harness.runs import pytest_argv, records_by_case, run_folder

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]


def records(folder: Path) -> dict[str, dict[str, Any]]:
    return records_by_case(run_folder(folder, "zero"))


def evidence(folder: Path, case: str) -> tuple[str, str]:
    [case_dir] = folder.glob(f"zero/*/cases/{case}")
    return ((case_dir / "observations.jsonl").read_text(), (case_dir / "actions.jsonl").read_text())


def test_a_prebuilt_case_delivers_the_bytes_of_one_built_at_its_turn(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Not under tmp_path: under xdist that is too long a folder for the forkserver's socket.
    scratch = Path(tempfile.mkdtemp(prefix="prebuild-"))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    monkeypatch.setenv("TMPDIR", str(scratch))  # where a set-up done ahead logs until its turn
    roots = {"on": pytester.path / "on"}
    result = pytester.runpytest_subprocess(*CASES, "--libero-prebuild=on", "--libero-results=on")
    result.assert_outcomes(failed=3)
    # Set up at its turn: the serial run test_scale_cases.py compares with two workers.
    roots["off"], result, left_in_tmpdir = serial_without_prebuild(tmp_path_factory)
    result.assert_outcomes(failed=3)
    ahead, at_turn = (records(roots[mode]) for mode in ("on", "off"))
    for case in ("libero_10-00", "libero_10-01", "libero_10-02"):
        assert evidence(roots["on"], case) == evidence(roots["off"], case), case
        assert ahead[case]["identity"] == at_turn[case]["identity"], case
        assert ahead[case]["counters"] == at_turn[case]["counters"], case
        assert at_turn[case]["timings"]["setup_ahead_s"] == 0.0, case
        [case_dir] = roots["on"].glob(f"zero/*/cases/{case}")
        assert (case_dir / "simulator.log").is_file()
    # The worker's first case has nothing to overlap with; every later one was set up,
    # at least in part, while the case before it ran, and that is recorded as its own.
    assert ahead["libero_10-00"]["timings"]["setup_ahead_s"] == 0.0
    for case in ("libero_10-01", "libero_10-02"):
        timings = ahead[case]["timings"]
        assert 0.0 < timings["setup_ahead_s"] <= timings["setup_s"], (case, timings)
    assert len({r["pid"] for r in ahead.values()}) == 3  # a process of its own per case
    assert list(scratch.glob("pytest-libero-*")) == []  # the early logs moved into the cases
    assert left_in_tmpdir == []


def test_ctrl_c_during_an_overlap_leaves_no_process_behind(pytester: pytest.Pytester) -> None:
    # Case 00's episode is far longer than the test lets it run, on any machine: the
    # signal comes while it runs and 01 sets up.
    command = pytest_argv(*CASES[:-2], "--libero-max-policy-calls=400", "--libero-replan-interval=5")
    # SIGINT's default restored: a suite started as a background job ignores it, and its
    # children would inherit that and never see the Ctrl-C this test sends.
    run = subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        cases: list[int] = []
        while time.monotonic() < deadline and run.poll() is None:
            children = proctree.children()
            servers = [p for p in children.get(run.pid, []) if "forkserver" in proctree.cmdline(p)]
            cases = [p for server in servers for p in children.get(server, [])]  # forked by it
            if len(cases) == 2:  # a case running and the next one setting up
                break
            time.sleep(0.2)
        assert len(cases) == 2, run.stdout.read().decode() if run.stdout else ""
        time.sleep(0.5)
        everything = proctree.descendants(run.pid)
        run.send_signal(signal.SIGINT)
        output = run.communicate(timeout=120)[0].decode()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert "KeyboardInterrupt" in output, output
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(proctree.alive(p) for p in everything):
        time.sleep(0.2)
    assert [p for p in everything if proctree.alive(p)] == [], [
        (p, proctree.cmdline(p)) for p in everything]
    # The case set up ahead never had its turn: it left no case folder.
    assert list(pytester.path.glob("libero-results/zero/*/cases/libero_10-01")) == []
