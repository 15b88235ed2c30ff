"""Signals the run did not act on (issue 60, class R11).

A CI script that starts pytest as a background job (``trap "" INT``, or
``signal.signal(SIGINT, SIG_IGN)`` before exec) gives it SIGINT ignored, and its
children inherit that: a SIGINT to the process group is then acted on by no one but
ffmpeg, which installs its own handler. The encoders died, the case errored as
``evidence`` ("ffmpeg exit status 255") and the run went on, blaming the policy's run
for the machine's signal. The encoders now run in a process group of their own
(``evidence/ffmpeg.py``): such a signal changes nothing, and a real Ctrl-C still stops
the run with no process left behind (the case process is killed, its encoders read EOF
and end).

Each test is a real run of the zero policy, one case of few controls, in a session of
its own so that the test can signal its whole group as a terminal or a CI runner would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness import proctree
from harness.hostile import Hostile
from harness.runs import pytest_argv, records_by_case, run_folder

pytestmark = pytest.mark.simulator

CASE = ["--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
        "--libero-task-ids=0", "--libero-budget-mode=decisions", "--libero-replan-interval=5"]
WAIT_S = 240.0


def encoders(root: int) -> list[int]:
    """The ffmpeg processes below ``root`` encoding a stream right now (not the forkserver's
    brief ``ffmpeg -version``, which a poll can also catch)."""
    return [p for p in proctree.descendants(root)
            if "ffmpeg" in (line := proctree.cmdline(p)).split(" ", 1)[0] and " rawvideo " in line]


def started(command: list[str], cwd: Path, sigint: signal.Handlers) -> subprocess.Popen[bytes]:
    """``command`` in a session of its own, SIGINT set to ``sigint`` before exec."""
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))


def signal_mid_episode(run: subprocess.Popen[bytes]) -> list[int]:
    """SIGINT to the run's whole group once its case's encoders are writing; every
    process below it at that moment."""
    deadline = time.monotonic() + WAIT_S
    seen: list[int] = []
    while time.monotonic() < deadline and run.poll() is None and not (seen := encoders(run.pid)):
        time.sleep(0.1)
    # How the run ended, when it did so unseen.
    assert seen, f"the case's encoders were never seen running:\n{ended(run)[-3000:]}"
    everything = proctree.descendants(run.pid)
    os.killpg(run.pid, signal.SIGINT)
    return everything


def ended(run: subprocess.Popen[bytes]) -> str:
    """What the run printed once it ended; one that has not ended within WAIT_S is killed,
    and what it printed by then is returned with a last line saying so (its returncode
    then is -9, so the caller's assertion shows this output)."""
    try:
        return run.communicate(timeout=WAIT_S)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        printed = run.communicate()[0].decode(errors="replace")
        return f"{printed}\n(the run had not ended {WAIT_S:.0f} s after the signal: killed)"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


def gone(everything: list[int]) -> list[tuple[int, str]]:
    """Those of ``everything`` still alive after a bounded wait for them to end."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(proctree.alive(p) for p in everything):
        time.sleep(0.2)
    return [(p, proctree.cmdline(p)) for p in everything if proctree.alive(p)]


def test_a_sigint_the_run_ignores_is_not_a_case_s_error(tmp_path: Path) -> None:
    run = started(pytest_argv(*CASE, "--libero-max-policy-calls=8"), tmp_path, signal.SIG_IGN)
    try:
        everything = signal_mid_episode(run)
    finally:
        output = ended(run)
    assert run.returncode == 1, output  # the zero policy's own verdict: its case failed
    [record] = records_by_case(run_folder(tmp_path / "libero-results", "zero")).values()
    assert record["outcome"] == "failure" and record["error"] is None, record.get("error")
    assert "ffmpeg exit status" not in output and "1 failure, 0 errored" in output, output
    assert record["counters"]["policy_calls"] == 8, record["counters"]  # the whole episode ran
    assert gone(everything) == []


def test_a_real_ctrl_c_to_the_group_still_stops_the_run_and_its_encoders(tmp_path: Path) -> None:
    run = started(pytest_argv(*CASE, "--libero-max-policy-calls=400"), tmp_path, signal.SIG_DFL)
    try:
        everything = signal_mid_episode(run)
    finally:
        output = ended(run)
    assert run.returncode == 2 and "KeyboardInterrupt" in output, output  # interrupted
    assert gone(everything) == []  # the encoders too, though the signal never reached them


HOSTILE: list[Hostile] = [
    Hostile(11, "SIGINT to the process group of `pytest --libero-profile=zero` started with SIGINT "
            "ignored (a CI script's background job), mid-episode (the encoders alone died: the case "
            "errored as evidence, \"ffmpeg exit status 255\", and the run went on)",
            "nothing: the case runs to its end with its evidence, the run's exit code is its own, "
            "no process is left behind",
            "tests/test_hostile_signals.py::test_a_sigint_the_run_ignores_is_not_a_case_s_error"),
    Hostile(11, "a real Ctrl-C (SIGINT to the group, not ignored) mid-episode, the encoders now in a "
            "process group of their own",
            "the run stops (KeyboardInterrupt, exit 2); the case process is killed and its encoders "
            "end with it: no process left behind",
            "tests/test_hostile_signals.py::test_a_real_ctrl_c_to_the_group_still_stops_the_run_and_"
            "its_encoders"),
]
