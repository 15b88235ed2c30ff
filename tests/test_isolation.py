"""Simulator faults and resource limits cost one case, with the cause recorded.

Faults are induced through a real extension point: a benchmark adapter named with
--libero-adapter wraps LIBERO's and crashes or hangs on chosen cases. The host's side of
every fault (a hang in a set-up, a Ctrl-C, a process that cannot start) is also tested
in seconds with a scripted case process: tests/test_host.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.runs import records_by_case, run_folder

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

FAULTY_ADAPTER = '''
import os, signal, sys, time
from pytest_libero.adapters.libero import LiberoBenchmarkAdapter

# case id -> (when, what): "build" faults strike before the env exists, "step:N" at control N.
FAULTS = {
    "libero_90-00": ("step:2", "segfault"),
    "libero_90-01": ("step:3", "hang"),
    "libero_90-02": ("build", "abort"),  # set up ahead while 01 runs (a hang there: test_host.py)
    "libero_90-03": ("step:1", "oom-kill"),
    "libero_90-04": ("step:2", "abort"),
    "libero_90-06": ("build", "segfault"),  # set up ahead while the healthy 05 runs
}


def fault(what):
    print(f"faulty adapter: about to {what}", file=sys.stderr, flush=True)
    if what == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "oom-kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if what == "abort":
        os.abort()
    if what == "hang":
        time.sleep(3600)


class Faulty(LiberoBenchmarkAdapter):
    def open(self, entry, **kwargs):
        when, what = FAULTS.get(entry.case_id, (None, None))
        if when == "build":
            fault(what)
        episode = super().open(entry, **kwargs)
        if when and when.startswith("step:"):
            at = int(when.split(":")[1])
            step = episode.step
            count = [0]
            def faulty_step(action, observe_next=True):
                count[0] += 1
                if count[0] == at:
                    fault(what)
                return step(action, observe_next)
            episode.step = faulty_step
        return episode
'''


def records(root: Path) -> dict[str, dict[str, Any]]:
    return records_by_case(run_folder(root))


def test_crashes_and_hangs_cost_one_case_each(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(faulty_adapter=FAULTY_ADAPTER)
    pytester.syspathinsert()
    result = pytester.runpytest(
        "--libero-profile=zero", "--libero-adapter=faulty_adapter:Faulty",
        "--libero-scope=task_coverage", "--libero-suite=libero_90", "--libero-task-ids=0-7",
        "--libero-budget-mode=decisions", "--libero-max-policy-calls=4", "--libero-replan-interval=1",
        "--libero-step-timeout=5", "--libero-build-timeout=60",
    )
    result.assert_outcomes(errors=6, failed=2)
    found = records(pytester.path / "libero-results")
    expected = {
        "libero_90-00": ("simulator_crash", "killed by SIGSEGV", 1),
        "libero_90-01": ("simulator_hang", "no sign of life for 5s during step", 2),
        "libero_90-02": ("simulator_crash", "(killed by SIGABRT) during build", 0),
        "libero_90-03": ("simulator_crash", "killed by SIGKILL", 0),
        "libero_90-04": ("simulator_crash", "killed by SIGABRT", 1),
        "libero_90-06": ("simulator_crash", "(killed by SIGSEGV) during build", 0),
    }
    for case, (cause, words, controls) in expected.items():
        record = found[case]
        assert record["outcome"] == "errored", case
        assert record["error"]["kind"] == "environment" and record["error"]["cause"] == cause, case
        assert words in record["error"]["message"], (case, record["error"]["message"])
        assert record["counters"]["executed_controls"] == controls, case
        assert "faulty adapter: about to" in record["error"]["message"]  # captured output
    # Set up while the case before ran, each lost set-up is reported by its own case.
    for case in ("libero_90-02", "libero_90-06"):
        assert "its set-up began while the previous case ran" in found[case]["error"]["message"]
    for case in ("libero_90-05", "libero_90-07"):  # around the set-up that segfaulted
        healthy = found[case]
        assert healthy["outcome"] == "failure" and healthy["counters"]["executed_controls"] == 4
    # Every case ran in its own process; the pytest process never hosted a simulator.
    assert len({r["pid"] for r in found.values()}) == 8
    assert os.getpid() not in {r["pid"] for r in found.values()}
    result.stdout.fnmatch_lines(["*8 selected, 2 completed, 0 success, 2 failure, 6 errored*"])


def test_a_failing_video_encoder_errors_the_case(pytester: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real = subprocess.run(["python3", "-c", "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())"],
                          capture_output=True, text=True).stdout.strip() or "ffmpeg"
    fake = pytester.path / "ffmpeg"
    # Answers -version like ffmpeg, then refuses to encode anything.
    fake.write_text(f'#!/bin/sh\n[ "$2" = "-version" ] && exec "{real}" "$@"\n'
                    'echo "fake ffmpeg: encoder exploded" >&2\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(fake))
    result = pytester.runpytest_subprocess(
        "--libero-profile=zero", "--libero-budget-mode=decisions",
        "--libero-max-policy-calls=1", "--libero-replan-interval=1",
    )
    result.assert_outcomes(errors=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # not an internal error
    for record in records(pytester.path / "libero-results").values():
        assert record["error"]["kind"] == "evidence"
        assert "encoder exploded" in record["error"]["message"]


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Any:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()}); needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_results_disk_errors_cases_not_the_session(pytester: pytest.Pytester,
                                                          tiny_disk: Path) -> None:
    result = pytester.runpytest_subprocess(
        "--libero-profile=zero", f"--libero-results={tiny_disk}",
        "--libero-budget-mode=decisions", "--libero-max-policy-calls=12", "--libero-replan-interval=1",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*errored (evidence)*", "*No space left on device*"])
    result.stdout.fnmatch_lines(["*2 selected, 0 completed, 0 success, 0 failure, 2 errored*"])
