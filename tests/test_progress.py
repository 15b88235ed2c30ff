"""Issue 10: progress you can watch, on a terminal, under xdist, in CI logs and not in junitxml.

The terminal runs use a real pseudo-terminal and a small screen model (below) that
applies what a terminal would, so the tests see the screen a person sees, not bytes.
"""

from __future__ import annotations

import codecs
import fcntl
import json
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from synthetic import synthetic_record

from harness.runs import pytest_argv
from pytest_libero.report.progress import (
    SINK_KEY,
    LiveLine,
    LocalBoard,
    Status,
    Throttle,
    WorkerFile,
    WorkerFolder,
    case_progress,
    display_mode,
    finished_line,
    fit,
    live_text,
)

pytest_plugins = ["pytester"]

LIVE = re.compile(r"libero_10-0\d (\d+)/(\d+) ctl, (\d+) calls, (\d+)s")
ESCAPE = re.compile(r"\x1b\[\d*[GK]")


def tiny(calls: int, *task_ids: int) -> list[str]:
    """A zero policy for ``calls`` controls on libero_10's given tasks."""
    return ["--libero-profile=zero", "--libero-budget-mode=decisions",
            f"--libero-max-policy-calls={calls}", "--libero-replan-interval=1",
            "--libero-scope=task_coverage", "--libero-suite=libero_10",
            f"--libero-task-ids={','.join(map(str, task_ids))}"]


# -- a terminal, as far as pytest and the live line use one ---------------------------

CSI = re.compile(r"\x1b\[([0-9;?]*)([@-~])")
OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


class Screen:
    """Text, CR, LF, backspace, tab, CSI G (column) and K (clear right); colours ignored.

    Lines wrap at the width as a terminal's do, so a live line that overflowed would
    show up as an extra line.
    """

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self.lines: list[list[str]] = [[]]
        self.row = self.col = 0
        self.pending = ""

    def feed(self, data: str) -> None:
        text, self.pending, i = self.pending + data, "", 0
        while i < len(text):
            ch = text[i]
            if ch == "\x1b":
                match = CSI.match(text, i) or OSC.match(text, i)
                if match is None:
                    if len(text) - i < 64:  # a sequence cut in two by a read
                        self.pending = text[i:]
                        return
                    i += 2
                    continue
                if match.re is CSI:
                    self._csi(match.group(1), match.group(2))
                i = match.end()
                continue
            self._char(ch)
            i += 1

    def _csi(self, argument: str, final: str) -> None:
        if final == "G":
            self.col = max(0, int(argument or 1) - 1)
        elif final == "K" and argument in ("", "0"):
            del self.lines[self.row][self.col:]

    def _char(self, ch: str) -> None:
        if ch == "\r":
            self.col = 0
        elif ch == "\n":
            self.row += 1
            while len(self.lines) <= self.row:
                self.lines.append([])
        elif ch == "\b":
            self.col = max(0, self.col - 1)
        elif ch == "\t":
            self.col = min(self.columns - 1, (self.col // 8 + 1) * 8)
        elif ch >= " ":
            if self.col >= self.columns:
                self._char("\n")
                self.col = 0
            line = self.lines[self.row]
            line.extend(" " * (self.col + 1 - len(line)))
            line[self.col] = ch
            self.col += 1

    @property
    def current_line(self) -> str:
        return "".join(self.lines[self.row])

    @property
    def text(self) -> str:
        return "\n".join("".join(line).rstrip() for line in self.lines)


@dataclass
class PtyRun:
    returncode: int
    screen: Screen
    raw: str
    cursor_lines: list[str] = field(default_factory=list)  # the cursor's line after each read

    def live_lines(self) -> list[str]:
        return [line for line in self.cursor_lines if LIVE.search(line)]


def run_in_pty(args: list[str], cwd: Path, *, columns: int = 150, timeout: float = 240,
               env: dict[str, str] | None = None) -> PtyRun:
    """Run pytest on a pseudo-terminal of the given width and watch its screen."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("CI", "BUILD_NUMBER", "COLUMNS") and not k.startswith("PYTEST_XDIST")}
    environ.update(TERM="xterm", **(env or {}))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    process = subprocess.Popen(pytest_argv(*args),
                               cwd=cwd, env=environ, stdin=slave, stdout=slave, stderr=slave,
                               start_new_session=True)
    os.close(slave)
    screen, decoder = Screen(columns), codecs.getincrementaldecoder("utf-8")("replace")
    run = PtyRun(0, screen, "")
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1.0)[0]:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not data:
                break
            text = decoder.decode(data)
            run.raw += text
            screen.feed(text)
            run.cursor_lines.append(screen.current_line)
        else:
            process.kill()
            pytest.fail(f"pytest did not finish in {timeout}s; screen so far:\n{screen.text}")
    finally:
        os.close(master)
    run.returncode = process.wait(timeout=60)
    return run


def test_the_screen_model_applies_what_the_live_line_sends() -> None:
    screen = Screen(20)
    screen.feed("test_x.py \x1b[11G libero\x1b[K\x1b[11G")
    assert screen.current_line == "test_x.py  libero"
    screen.feed("\x1b[11G\x1b[K\x1b[32mF\x1b[0m")
    assert screen.current_line == "test_x.py F"
    screen.feed("\x1b[")
    screen.feed("1Gx\r\n" + "y" * 21)
    assert screen.text == "xest_x.py F\n" + "y" * 20 + "\ny"


# -- the pieces, without the simulator -------------------------------------------------

def test_the_live_text_names_each_case_with_its_counters_and_elapsed_time() -> None:
    status = Status("libero_10-00", 520, started=100.0, policy_calls=28, executed_controls=140)
    assert live_text([("", status)], now=135.9) == "libero_10-00 140/520 ctl, 28 calls, 35s"
    other = Status("libero_10-01", 520, started=130.0)
    assert live_text([("gw0", status), ("gw1", other)], now=135.0) == (
        "gw0 libero_10-00 140/520 ctl, 28 calls, 35s | gw1 libero_10-01 0/520 ctl, 0 calls, 5s")
    assert live_text([], now=0.0) == ""
    assert fit("x" * 50, 20) == "x" * 20
    assert fit("x" * 50, 5) == ""  # a stub of a line says nothing: wait for room


@pytest.mark.parametrize(("tty", "verbosity", "capture", "environ", "mode"), [
    (True, 0, "fd", {"TERM": "xterm"}, "live"),
    (True, 2, "sys", {}, "live"),
    (True, -1, "fd", {}, "lines"),  # -q
    (False, 0, "fd", {}, "lines"),  # a pipe, a file
    (True, 0, "fd", {"CI": "true"}, "lines"),
    (True, 0, "fd", {"BUILD_NUMBER": "7"}, "lines"),
    (True, 0, "fd", {"TERM": "dumb"}, "lines"),
    (True, 0, "no", {}, "lines"),  # -s: the cases' own output shares the terminal
])
def test_only_a_watched_terminal_gets_the_live_line(tty: bool, verbosity: int, capture: str,
                                                    environ: dict[str, str], mode: str) -> None:
    assert display_mode(tty=tty, verbosity=verbosity, capture=capture, environ=environ) == mode


def test_a_throttle_passes_once_per_interval() -> None:
    now = [0.0]
    throttle = Throttle(0.25, clock=lambda: now[0])
    answers = []
    for t in (0.0, 0.1, 0.24, 0.25, 0.3, 0.6):
        now[0] = t
        answers.append(throttle.ready())
    assert answers == [True, False, False, True, False, True]
    throttle.reset()
    assert throttle.ready()


def test_a_case_feeds_its_sink_with_partial_counters() -> None:
    class Config:
        stash = pytest.Stash()

    config = Config()
    board = LocalBoard()
    config.stash[SINK_KEY] = board
    with case_progress(config, "libero_10-03", 40) as progress:
        assert board.board()[0][1].describe(progress.status.started) == "libero_10-03 0/40 ctl, 0 calls, 0s"
        progress.on_decision(3, {})
        progress.on_control(7, None, lambda: None)
        progress.update({"policy_calls": 4})
        [(worker, status)] = board.board()
        assert (worker, status.policy_calls, status.executed_controls) == ("", 4, 7)
    assert board.board() == []
    with case_progress(Config(), "libero_10-03", 40) as progress:
        progress.update({"executed_controls": 1})  # nowhere to show it: a no-op


def test_worker_files_are_rewritten_throttled_and_read_in_worker_order() -> None:
    folder = WorkerFolder()
    try:
        files = {w: WorkerFile(folder.path, w, interval=60) for w in ("gw10", "gw2")}
        started = Status("libero_10-00", 30)
        files["gw10"].publish(started)
        files["gw2"].publish(Status("libero_10-01", 30))
        started.executed_controls = 5
        files["gw10"].publish(started)  # inside the interval: not written
        (folder.path / "gw3.json").write_text("{not json")  # unreadable: skipped, not fatal
        board = folder.board()
        assert [(w, s.case_id, s.executed_controls) for w, s in board] == [
            ("gw2", "libero_10-01", 0), ("gw10", "libero_10-00", 0)]
        files["gw10"].retire()
        files["gw10"].publish(started)  # a new case is shown at once
        assert [s.executed_controls for w, s in folder.board() if w == "gw10"] == [5]
        files["gw2"].retire()

        class Node:
            class gateway:
                id = "gw10"

        folder.pytest_testnodedown(Node(), None)  # a crashed worker's case disappears
        assert folder.board() == []
        assert not list(folder.path.glob("*.tmp"))
    finally:
        folder.remove()
    assert not folder.path.exists()


class FakeWriter:
    """What the live line reads from pytest's TerminalWriter."""

    def __init__(self, line: str, fullwidth: int = 60) -> None:
        self._current_line = line
        self.fullwidth = fullwidth
        self.flushes = 0

    @property
    def width_of_current_line(self) -> int:
        return len(self._current_line)

    def flush(self) -> None:
        self.flushes += 1


def drained(fd: int) -> str:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 65536).decode()
    except BlockingIOError:
        return ""


def test_the_live_line_draws_at_pytests_column_and_steps_aside_while_pytest_writes() -> None:
    read, write = os.pipe()  # not a terminal: the width falls back to pytest's
    board = LocalBoard()
    live = LiveLine(None, write, board.board)
    live.writer = FakeWriter("test_libero.py ")
    try:
        live.refresh()
        assert drained(read) == ""  # nothing running, nothing drawn
        board.publish(Status("libero_10-00", 30, started=time.time()))
        live.refresh()
        assert drained(read) == "\x1b[16Glibero_10-00 0/30 ctl, 0 calls, 0s\x1b[K\x1b[16G"
        live.refresh()
        assert drained(read) == ""  # unchanged: not redrawn
        with live.aside():
            assert drained(read) == "\x1b[16G\x1b[K"
            live.refresh()  # the thread, while pytest writes
            assert drained(read) == ""
            live.writer._current_line = "test_libero.py F"
        assert live.writer.flushes == 2  # pytest's text reached the terminal before ours
        assert drained(read) == "\x1b[17G libero_10-00 0/30 ctl, 0 calls, 0s\x1b[K\x1b[17G"
        live.writer._current_line = "x" * 50
        live.refresh()
        assert drained(read) == "\x1b[17G\x1b[K"  # too little room left: cleared, not cut short
        board.retire()
        live.stop()
        assert drained(read) == ""
    finally:
        os.close(read)
        os.close(write)


def test_a_finished_line_has_the_case_its_first_summary_line_and_duration() -> None:
    record = {"case": "libero_10-00", "summary": "errored (environment): it died\nOutput tail:\n..."}
    assert finished_line(record, 12.34) == "libero_10-00 finished in 12.3s: errored (environment): it died"


FINISHED_CONFTEST = """
from pytest_libero.report.progress import FinishedLines
from pytest_libero.results.feed import CaseFeed

def pytest_configure(config):
    left_open = config.get_verbosity() >= 0
    config.pluginmanager.register(FinishedLines(config, left_open=left_open), "finished")
    config.pluginmanager.register(CaseFeed(config.hook, ["a", "b"]), "feed")
"""
FINISHED_TESTS = """
import json
import pytest

RECORD = json.loads({record!r})

@pytest.mark.parametrize("case", ["a", "b"])
def test_case(case, record_property):
    record_property("libero_record", json.dumps(RECORD | {"case": case, "summary": f"{case} ok"}))
"""


@pytest.mark.parametrize(("flags", "expected"), [
    ((), [r"test_finished\.py \.", r"a finished in \d+\.\ds: a ok",
          r"test_finished\.py \.", r"b finished in \d+\.\ds: b ok +\[100%\]"]),
    (("-v",), [r".*test_case\[a\] PASSED +\[ 50%\]", r"a finished in .*: a ok",
               r".*test_case\[b\] PASSED +\[100%\]", r"b finished in .*: b ok"]),
    (("-q",), [r"\.", r"a finished in .*: a ok", r"\.", r"b finished in .*: b ok", r" +\[100%\]"]),
])
def test_finished_lines_sit_between_pytests_own_without_blank_lines(
        pytester: pytest.Pytester, flags: tuple[str, ...], expected: list[str]) -> None:
    pytester.makeconftest(FINISHED_CONFTEST)
    record = json.dumps(synthetic_record("libero_10-00", "failure"))
    pytester.makepyfile(test_finished=FINISHED_TESTS.replace("{record!r}", repr(record)))
    result = pytester.runpytest("-p", "no:cacheprovider", *flags)
    result.assert_outcomes(passed=2)
    start = next(i for i, line in enumerate(result.outlines) if re.fullmatch(expected[0], line))
    block = result.outlines[start:start + len(expected)]
    assert len(block) == len(expected), block
    assert all(re.fullmatch(pattern, line) for pattern, line in zip(expected, block)), block


# -- real runs: the simulator, on a pseudo-terminal or a pipe ---------------------------

def junit_text(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    assert "<testcase" in text
    return text


def assert_no_progress_in(junit: str) -> None:
    assert " ctl, " not in junit and "finished in" not in junit and "\x1b" not in junit


@pytest.mark.simulator
def test_a_terminal_shows_the_running_case_live_and_ends_clean(tmp_path: Path) -> None:
    started = time.monotonic()
    run = run_in_pty([*tiny(30, 0), "--libero-isolation=none", f"--junitxml={tmp_path / 'j.xml'}",
                      "-o", "junit_logging=all"], tmp_path, columns=120)
    wall = time.monotonic() - started
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.screen.text
    live = run.live_lines()
    # Drawn in place, on pytest's own line for the file, with the counters moving.
    assert live and all(line.startswith("test_libero.py libero_10-00 ") for line in live), live
    controls = {int(LIVE.search(line).group(1)) for line in live}
    assert {int(LIVE.search(line).group(2)) for line in live} == {30}
    assert len(controls) >= 3 and max(controls) > 0, controls
    # A few redraws a second at most.
    assert len(LIVE.findall(run.raw)) <= 5 * wall, (len(LIVE.findall(run.raw)), wall)
    screen = run.screen.text
    assert " ctl, " not in screen and "finished in" not in screen, screen
    assert re.search(r"^test_libero\.py F +\[100%\]$", screen, re.M), screen
    assert re.search(r"^=+ 1 failed in [\d.]+s.* =+$", screen, re.M), screen
    assert_no_progress_in(junit_text(tmp_path / "j.xml"))


@pytest.mark.simulator
def test_under_xdist_the_controller_shows_each_workers_case(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Not under tmp_path: under xdist that is too long a folder for the forkserver's socket.
    temp = Path(tempfile.mkdtemp(prefix="progress-"))
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    # 20 controls: long enough that both workers are in their episodes together even on
    # a machine loaded by a parallel test suite.
    run = run_in_pty([*tiny(20, 0, 1), "-n", "2"], tmp_path, columns=160,
                     env={"TMPDIR": str(temp)})
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.screen.text
    live = run.live_lines()
    assert any(re.search(r"gw\d libero_10-0\d \d+/20 ctl, \d+ calls, \d+s \| gw\d libero_10-0\d", line)
               for line in live), live
    screen = run.screen.text
    assert " ctl, " not in screen, screen
    assert re.search(r"^FF +\[100%\]$", screen, re.M), screen
    assert re.search(r"^=+ 2 failed in [\d.]+s.* =+$", screen, re.M), screen
    assert not [p for p in temp.iterdir() if p.name.startswith("pytest-libero-progress-")]


@pytest.mark.simulator
def test_a_pipe_gets_one_line_per_finished_case_and_no_live_line(pytester: pytest.Pytester) -> None:
    junit = pytester.path / "j.xml"
    result = pytester.runpytest_subprocess(*tiny(2, 0, 1), f"--junitxml={junit}",
                                           "-o", "junit_logging=all")
    result.assert_outcomes(failed=2)
    result.stdout.re_match_lines([
        r"^test_libero\.py F$",
        r"^libero_10-00 finished in \d+\.\ds: no native success: control cap reached after 2 controls, "
        r"2 policy calls, 2 decisions \(1 of 2 done, about \d+s left\)$",
        r"^test_libero\.py F$",
        r"^libero_10-01 finished in \d+\.\ds: no native success: control cap reached after 2 controls.* "
        r"\(2 of 2 done\) +\[100%\]$",
    ], consecutive=True)
    # What is left after the first: the model fed that case's own timings (its set-up and
    # episode), for one more like it; pytest's figure adds the call's and teardown's edges.
    first = re.search(r"^libero_10-00 finished in (\S+)s: .*about (\d+)s left", result.stdout.str(), re.M)
    assert first is not None
    assert 0.5 * float(first[1]) <= int(first[2]) + 0.5 <= 1.5 * float(first[1]), first[0]
    assert not ESCAPE.search(result.stdout.str()) and " ctl, " not in result.stdout.str()
    assert_no_progress_in(junit_text(junit))


@pytest.mark.simulator
def test_under_xdist_the_estimate_counts_the_case_not_started(pytester: pytest.Pytester) -> None:
    # -n 2 over three cases: when the first ends, the other worker is as far into its own
    # and the third has not begun, so about one more case's time is left, never "0s".
    # The first case on each worker also pays the worker's cold start (its pytest figure
    # is several times a warm case's), so the estimate is held against the case that had
    # not begun, which ran warm (the shorter of the other two figures, whichever order
    # they ended in): at least half of it, and no more than the whole first case.
    result = pytester.runpytest_subprocess(*tiny(2, 0, 1, 2), "-n", "2", "-p", "no:randomly")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    finished = re.findall(r"^(\S+) finished in (\S+)s: .*\((\d) of 3 done(?:, about (\S+) left)?\)",
                          out, re.M)
    assert [done for _, _, done, _ in finished] == ["1", "2", "3"], out
    took, left = float(finished[0][1]), finished[0][3]
    assert left.endswith("s") and "m" not in left, finished[0]
    warm = min(float(seconds) for _, seconds, _, _ in finished[1:])
    assert int(left[:-1]) >= 1 and 0.5 * warm <= int(left[:-1]) + 0.5 <= took + 0.5, finished


@pytest.mark.simulator
def test_quiet_on_a_terminal_gets_finished_lines_only(tmp_path: Path) -> None:
    run = run_in_pty([*tiny(2, 0), "-q"], tmp_path, columns=150)
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.screen.text
    assert not run.live_lines() and not ESCAPE.search(run.raw), run.raw
    assert re.search(r"^libero_10-00 finished in \d+\.\ds: no native success: control cap reached "
                     r"after 2 controls, 2 policy calls, 2 decisions \(1 of 1 done\)$",
                     run.screen.text, re.M), run.screen.text
