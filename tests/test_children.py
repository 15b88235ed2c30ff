"""The bounded child process (pytest_libero/children.py), with real processes.

A function in a spawned process that returns, sleeps past its bound, leaves with
``os._exit(3)``, is killed by a signal, raises, or leaves a grandchild in its process
group; a command that ends, runs past its bound, leaves a process in its group, or is
interrupted. Each test checks what the caller gets and that nothing the child started
is still running afterwards.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_libero import children
from pytest_libero.children import Died, Raised, Ran, Returned, TimedOut

BOUND_S = 120.0
"""A bound no healthy child here comes near (the machine may be busy)."""


# -- what the spawned children run (imported by name in the child) -------------------


def add(first: int, second: int) -> int:
    return first + second


def sleep_after_pid(pid_file: str) -> None:
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(600)


def exit_3() -> None:
    os._exit(3)


def killed_by(number: int) -> None:
    os.kill(os.getpid(), number)
    time.sleep(600)


def raise_value_error() -> None:
    raise ValueError("the child's own words\nover two lines")


def leave_grandchild(sleep_s: float) -> int:
    """Start a process in this one's process group, and return its pid at once."""
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({sleep_s})"]).pid


def say_and_register(words: str, at_exit: str) -> str:
    print(words, flush=True)
    print(words + " on stderr", file=sys.stderr, flush=True)
    atexit.register(lambda: Path(at_exit).write_text("exit handlers ran"))
    return words


def unpicklable() -> object:
    return lambda: None


# -- helpers ---------------------------------------------------------------------------


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] not in ("Z", "X")


def gone_soon(pid: int, within_s: float = 10.0) -> bool:
    """A killed orphan may take a moment to be seen as gone."""
    deadline = time.monotonic() + within_s
    while running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids a failing test may leave running: killed afterwards."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see processes")


# -- call: a function in a spawned process ---------------------------------------------


def test_a_function_that_returns_gives_its_value() -> None:
    assert children.call(add, 2, 3, timeout_s=BOUND_S) == Returned(5)


def test_a_function_past_its_bound_is_timed_out_and_killed(tmp_path: Path, leftovers: list[int]) -> None:
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    answer = children.call(sleep_after_pid, str(pid_file), timeout_s=6)
    took = time.monotonic() - started
    assert answer == TimedOut(6)
    assert 6 <= took < 60, took
    pid = int(pid_file.read_text())
    leftovers.append(pid)
    assert gone_soon(pid)


def test_a_child_that_exits_by_itself_died_with_its_exit_code() -> None:
    answer = children.call(exit_3, timeout_s=BOUND_S)
    assert answer == Died(3)
    assert isinstance(answer, Died) and answer.signal_name is None


@pytest.mark.parametrize("number", [signal.SIGKILL, signal.SIGTERM])
def test_a_child_killed_by_a_signal_died_naming_it(number: signal.Signals) -> None:
    answer = children.call(killed_by, int(number), timeout_s=BOUND_S)
    assert answer == Died(-int(number))
    assert isinstance(answer, Died) and answer.signal_name == number.name


def test_a_function_that_raises_gives_the_type_and_the_message() -> None:
    answer = children.call(raise_value_error, timeout_s=BOUND_S)
    assert answer == Raised("ValueError", "the child's own words\nover two lines")
    assert str(answer) == "ValueError: the child's own words\nover two lines"


def test_a_value_that_does_not_pickle_is_a_raise_not_a_hang() -> None:
    answer = children.call(unpicklable, timeout_s=BOUND_S)
    assert isinstance(answer, Raised), answer
    assert "its answer could not be sent back" in answer.message


def test_a_grandchild_in_the_child_s_group_is_killed_with_it(leftovers: list[int]) -> None:
    answer = children.call(leave_grandchild, 600.0, timeout_s=BOUND_S, group=True)
    assert isinstance(answer, Returned), answer
    leftovers.append(answer.value)
    assert gone_soon(answer.value)


def test_without_a_group_of_its_own_the_grandchild_is_left(leftovers: list[int]) -> None:
    """The grandchild test above can fail: without ``group`` the same grandchild lives on."""
    answer = children.call(leave_grandchild, 600.0, timeout_s=BOUND_S)
    assert isinstance(answer, Returned), answer
    leftovers.append(answer.value)
    time.sleep(1)
    assert running(answer.value)


def test_output_goes_to_the_file_and_without_teardown_no_exit_handler_runs(tmp_path: Path) -> None:
    log, at_exit = tmp_path / "child.log", tmp_path / "at-exit"
    assert children.call(say_and_register, "hello", str(at_exit), timeout_s=BOUND_S, output=log,
                         teardown=False) == Returned("hello")
    assert log.read_text().splitlines() == ["hello", "hello on stderr"]
    assert not at_exit.exists()


def test_an_interrupt_of_the_caller_kills_the_child(tmp_path: Path, leftovers: list[int]) -> None:
    pid_file = tmp_path / "pid"

    def interrupt(signum: int, frame: object) -> None:
        if pid_file.exists():
            raise KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, 0.2)

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(KeyboardInterrupt):
            children.call(sleep_after_pid, str(pid_file), timeout_s=BOUND_S)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    pid = int(pid_file.read_text())
    leftovers.append(pid)
    assert gone_soon(pid)


# -- run: a command, such as a child pytest ----------------------------------------------


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_command_s_exit_code_and_output(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    ended = children.run(python("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"),
                         output=log, leftover_s=5)
    assert ended == Ran(3)
    assert sorted(log.read_text().split()) == ["err", "out"]


def test_a_command_past_its_bound_is_timed_out_with_its_group(tmp_path: Path, leftovers: list[int]) -> None:
    pid_file = tmp_path / "pid"
    script = (f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
              f"'import time; time.sleep(600)']); open({str(pid_file)!r}, 'w').write(str(p.pid)); "
              "time.sleep(600)")
    started = time.monotonic()
    ended = children.run(python(script), output=tmp_path / "out.log", timeout_s=6, leftover_s=60)
    took = time.monotonic() - started
    assert ended == TimedOut(6)
    assert 6 <= took < 45, took  # the group was killed at once, not waited for
    pid = int(pid_file.read_text())
    leftovers.append(pid)
    assert gone_soon(pid)


def test_what_a_command_leaves_in_its_group_is_waited_for_then_killed(tmp_path: Path,
                                                                      leftovers: list[int]) -> None:
    pid_file = tmp_path / "pid"
    script = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
              f"'import time; time.sleep(600)']); open({str(pid_file)!r}, 'w').write(str(p.pid))")
    started = time.monotonic()
    ended = children.run(python(script), output=tmp_path / "out.log", timeout_s=BOUND_S, leftover_s=3)
    took = time.monotonic() - started
    pid = int(pid_file.read_text())
    leftovers.append(pid)
    assert ended == Ran(0)
    assert took >= 3, took
    assert gone_soon(pid)


def test_a_leftover_that_ends_by_itself_is_only_waited_for(tmp_path: Path) -> None:
    script = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
              "'import time; time.sleep(2)'])")
    started = time.monotonic()
    ended = children.run(python(script), output=tmp_path / "out.log", leftover_s=BOUND_S)
    took = time.monotonic() - started
    assert ended == Ran(0)
    assert 2 <= took < BOUND_S / 2, took
    assert isinstance(ended, Ran) and ended.seconds < 2 <= took  # its own end, not the leftover's


def test_the_command_is_told_while_it_runs(tmp_path: Path) -> None:
    ticks: list[float] = []
    ended = children.run(python("import time; time.sleep(3)"), output=tmp_path / "out.log",
                         tick=lambda: ticks.append(time.monotonic()), tick_s=0.2)
    assert ended == Ran(0)
    assert len(ticks) >= 5, ticks


INTERRUPTIBLE = ("import signal, sys, time\n"
                 "def stop(*_):\n"
                 "    print('stopped', flush=True)\n"
                 "    sys.exit(7)\n"
                 "signal.signal(signal.SIGINT, {handler})\n"
                 "print('started', flush=True)\n"
                 "time.sleep(600)\n")


def started(log: Path) -> None:
    if "started" not in log.read_text():
        return
    raise KeyboardInterrupt


def test_an_interrupt_is_passed_on_and_raised_once_the_command_ended(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    with pytest.raises(KeyboardInterrupt):
        children.run(python(INTERRUPTIBLE.format(handler="stop")), output=log, tick=lambda: started(log),
                     tick_s=0.1, stop_s=BOUND_S)
    assert log.read_text().split() == ["started", "stopped"]


def test_a_command_that_ignores_the_interrupt_is_killed_after_stop_s(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        children.run(python(INTERRUPTIBLE.format(handler="signal.SIG_IGN")), output=log,
                     tick=lambda: started(log), tick_s=0.1, stop_s=2, leftover_s=1)
    assert 2 <= time.monotonic() - begun < 60
    assert log.read_text().split() == ["started"]


def test_the_environment_is_the_one_given(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    env = children.clean_environment({**os.environ, "PYTEST_ADDOPTS": "-x", "PYTEST_PLUGINS": "p",
                                      "PYTEST_XDIST_WORKER": "gw3", "KEPT": "yes"})
    assert {"PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_WORKER"}.isdisjoint(env)
    assert env["KEPT"] == "yes"
    asked = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_XDIST_WORKER", "KEPT")
    script = f"import os; print(sorted(k for k in os.environ if k in {asked!r}))"
    assert children.run(python(script), output=log, env=env, cwd=tmp_path) == Ran(0)
    assert log.read_text().strip() == "['KEPT']"
