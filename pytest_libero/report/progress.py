"""Progress you can watch while long cases run.

A case at full horizon runs for minutes; on a terminal its counters are drawn live
after pytest's cursor. Everywhere else (``-q``, pipes, CI logs) each finished case gets
one line instead. The plugin calls :func:`register` once per process after the run
plan exists, and wraps each case in :func:`case_progress`.

Where the counters come from: in a serial run, the case running in this process.
Under xdist, workers can only talk to the controller through reports, so each worker
rewrites ``<dir>/<worker id>.json`` in a folder the controller made, and the
controller's drawing thread reads them.

pytest's fd-level capture points fd 1 at a temporary file while a case runs, so the
live line goes to a duplicate of the terminal taken at configure time, and it steps
aside (is cleared, then redrawn) around every report pytest writes.

Once a case has completed, both say how much of the run is left: the plan's cost model
(``pytest-libero plan``) fed the run's own finished cases (report/eta.py). The ETA clock
and the finished lines listen to the controller's case hooks (``hookspecs.py``), which
hand them each case's typed record, read once (``results.feed``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import pytest

from pytest_libero.episode.record import CaseRecord
from pytest_libero.files import json_text
from pytest_libero.policy.contract import Observation, Reply
from pytest_libero.protocol.clock import ChunkTiming
from pytest_libero.report.eta import Remaining, eta_text

if TYPE_CHECKING:
    from _pytest._io import TerminalWriter

WORKER_PROGRESS_DIR = "libero_progress_dir"
REFRESH_S = 0.25
"""At most this often: a redraw on the controller, a rewrite of a worker's file."""
MIN_ROOM = 12
"""Fewer free columns than this after pytest's cursor and the live line waits."""


@dataclass
class Status:
    """What a running case has done so far."""

    case_id: str
    control_cap: int
    started: float = field(default_factory=time.time)
    policy_calls: int = 0
    executed_controls: int = 0

    def describe(self, now: float) -> str:
        elapsed = max(0, int(now - self.started))
        return (f"{self.case_id} {self.executed_controls}/{self.control_cap} ctl, "
                f"{self.policy_calls} calls, {elapsed}s")


Board = Sequence[tuple[str, Status]]
"""The running cases, each with its worker's id ("" in a serial run)."""


def live_text(board: Board, now: float) -> str:
    """One line for every running case: ``gw0 libero_10-00 140/520 ctl, ... | gw1 ...``."""
    return " | ".join(f"{worker} {s.describe(now)}".lstrip() for worker, s in board)


def fit(text: str, room: int) -> str:
    """The text cut to ``room`` columns, or nothing when too little of it would show."""
    return text[:room] if room >= MIN_ROOM else ""


def display_mode(*, tty: bool, verbosity: int, capture: str,
                 environ: Mapping[str, str]) -> Literal["live", "lines"]:
    """A live line only where a person watches a terminal that nothing else writes to.

    CI is detected as pytest does (``CI`` or ``BUILD_NUMBER`` set); with ``-s`` the
    cases' own output would run through the line.
    """
    ci = "CI" in environ or "BUILD_NUMBER" in environ
    plain = environ.get("TERM") == "dumb" or capture not in ("fd", "sys")
    return "live" if tty and verbosity >= 0 and not ci and not plain else "lines"


class Throttle:
    """Says yes at most once per interval; the first ask always passes."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.last: float | None = None

    def ready(self) -> bool:
        now = self.clock()
        if self.last is not None and now - self.last < self.interval:
            return False
        self.last = now
        return True

    def reset(self) -> None:
        self.last = None


class Sink(Protocol):
    """Where a running case's status goes: this process's board or a worker's file."""

    def publish(self, status: Status) -> None: ...

    def retire(self) -> None: ...


class CaseProgress:
    """One running case's progress: fed counters by the case host (episode/host/) or a listener."""

    def __init__(self, case_id: str, control_cap: int, sink: Sink | None = None) -> None:
        self.case_id = case_id
        self.control_cap = control_cap
        self.status = Status(case_id, control_cap)
        self.sink = sink

    def update(self, counters: Mapping[str, int]) -> None:
        """``counters`` holds ``policy_calls`` and/or ``executed_controls`` so far."""
        self.status.policy_calls = counters.get("policy_calls", self.status.policy_calls)
        self.status.executed_controls = counters.get("executed_controls",
                                                     self.status.executed_controls)
        if self.sink is not None:
            self.sink.publish(self.status)

    # EpisodeListener, for cases that run in this process (isolation none).
    def on_observation(self, call: int, observation: Observation) -> None:
        pass

    def on_decision(self, call: int, reply: Reply) -> None:
        self.update({"policy_calls": call})

    def on_reply(self, call: int, reply: Reply, timing: ChunkTiming) -> None:
        pass

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray],
                   call: int | None = None) -> None:
        self.update({"executed_controls": control})


class LocalBoard:
    """Serial run: the case running in this process, read by the drawing thread."""

    def __init__(self) -> None:
        self.status: Status | None = None

    def publish(self, status: Status) -> None:
        self.status = status

    def retire(self) -> None:
        self.status = None

    def board(self) -> Board:
        status = self.status
        return [] if status is None else [("", status)]


class WorkerFile:
    """xdist worker: its running case in ``<dir>/<worker id>.json``, rewritten atomically."""

    def __init__(self, folder: Path, worker: str, interval: float = REFRESH_S) -> None:
        self.path = folder / f"{worker}.json"
        self.throttle = Throttle(interval)

    def publish(self, status: Status) -> None:
        # Leading edge: a skipped update shows with the next heartbeat past the interval.
        if not self.throttle.ready():
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(json_text(asdict(status), sort_keys=False), encoding="utf-8")
            tmp.replace(self.path)
        except OSError:
            pass  # progress is a courtesy; the case must not notice

    def retire(self) -> None:
        self.throttle.reset()
        self.path.unlink(missing_ok=True)


class WorkerFolder:
    """Controller under xdist: makes the folder, tells the workers, reads their files."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="pytest-libero-progress-"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_PROGRESS_DIR] = str(self.path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        (self.path / f"{node.gateway.id}.json").unlink(missing_ok=True)  # a dead worker's case

    def board(self) -> Board:
        found = []
        for path in sorted(self.path.glob("*.json"), key=lambda p: (len(p.stem), p.stem)):
            try:
                found.append((path.stem, Status(**json.loads(path.read_text(encoding="utf-8")))))
            except (OSError, ValueError, TypeError):
                continue  # its case ended since the listing, or the file is not ours
        return found

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class LiveLine:
    """Draws the board after pytest's cursor and steps aside whenever pytest writes.

    The text goes at the cursor's column (``CSI <col> G``), the rest of the line is
    cleared (``CSI K``) and the cursor is parked back at that column, so pytest's next
    character lands where it would have anyway.
    """

    def __init__(self, config: pytest.Config, fd: int, board: Callable[[], Board],
                 interval: float = REFRESH_S, eta: Callable[[], str] | None = None) -> None:
        self.config = config
        self.fd = fd
        self.board = board
        self.eta = eta
        self.interval = interval
        self.lock = threading.RLock()
        self.paused = 0
        self.drawn_at: int | None = None  # the column of the text on screen, if any
        self.shown = ""
        self.writer: TerminalWriter | None = None  # pytest's, once the session starts
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="libero-progress", daemon=True)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.config.pluginmanager.get_plugin("terminalreporter") is None:
            return
        self.writer = self.config.get_terminal_writer()
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.refresh()

    def refresh(self) -> None:
        """Redraw when the text changed; a no-op while pytest is writing."""
        with self.lock:
            if self.paused or self.writer is None or self.stopped.is_set():
                return
            column = self.writer.width_of_current_line
            gap = " " if column and not self._after_space() else ""
            # The last column stays free: the text never wraps, so it can always be cleared.
            text = fit(self._text(), self._columns() - column - len(gap) - 1)
            text = gap + text if text else ""
            if text == self.shown and self.drawn_at == column:
                return
            if not text:
                self.clear()
                return
            self._write(f"\x1b[{column + 1}G{text}\x1b[K\x1b[{column + 1}G")
            self.drawn_at, self.shown = column, text

    def _text(self) -> str:
        """The running cases, after how much of the run is left once that is known."""
        board = live_text(self.board(), time.time())
        left = self.eta() if self.eta is not None and board else ""
        return f"{left} | {board}" if left else board

    def clear(self) -> None:
        with self.lock:
            if self.drawn_at is not None:
                self._write(f"\x1b[{self.drawn_at + 1}G\x1b[K")
            self.drawn_at, self.shown = None, ""

    def _after_space(self) -> bool:
        """Whether pytest's line ends in a space already (``test_libero.py ``)."""
        return str(getattr(self.writer, "_current_line", "")).endswith(" ")

    def _columns(self) -> int:
        try:
            return os.get_terminal_size(self.fd).columns
        except OSError:
            return self.writer.fullwidth if self.writer is not None else 80

    def _write(self, text: str) -> None:
        try:
            os.write(self.fd, text.encode("utf-8", errors="replace"))
        except OSError:
            self.stopped.set()  # the terminal went away

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Clear the line while pytest writes; draw it again right after."""
        with self.lock:
            self.paused += 1
            try:
                if self.writer is not None:
                    self.writer.flush()
                self.clear()
                yield
            finally:
                if self.writer is not None:
                    self.writer.flush()  # pytest's text reaches the terminal before ours
                self.paused -= 1
        self.refresh()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)
        self.clear()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logstart(self) -> Generator[None, object, object]:
        with self.aside():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self) -> Generator[None, object, object]:
        with self.aside():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logfinish(self) -> Generator[None, object, object]:
        with self.aside():
            return (yield)

    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_testnodedown(self) -> Generator[None, object, object]:
        with self.aside():
            return (yield)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self) -> Generator[None, object, object]:
        # Innermost: gone before pytest writes its final progress after the loop.
        try:
            return (yield)
        finally:
            self.stop()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self) -> Generator[None, object, object]:
        self.stop()
        return (yield)

    def pytest_internalerror(self) -> None:
        self.stop()


def finished_line(record: CaseRecord, seconds: float) -> str:
    """``libero_10-00 finished in 11.9s: no native success: control cap reached ...``."""
    summary = str(record.get("summary") or record.get("outcome", "")).splitlines()
    note = f"; {record['reply_note']}" if record.get("reply_note") else ""
    return f"{record['case']} finished in {seconds:.1f}s: {summary[0] if summary else ''}{note}"


class FinishedLines:
    """Off a live terminal: one line per finished case, between pytest's own output.

    pytest's serial reporter starts each test's line with a newline of its own, so
    there the line is left open (no blank line follows it); letters (``-q``, xdist)
    and xdist's ``[gw0]`` lines would run on, so there it is ended. The line is written
    when the case has finished, so the estimate beside it counts the case.
    """

    def __init__(self, config: pytest.Config, *, left_open: bool,
                 eta: Callable[[], str] | None = None) -> None:
        self.config = config
        self.left_open = left_open
        self.eta = eta

    def pytest_libero_case_finished(self, record: CaseRecord | None, duration: float) -> None:
        if record is None:
            return
        line = finished_line(record, duration)
        self._write(f"{line} ({self.eta()})" if self.eta is not None else line)

    def _write(self, line: str) -> None:
        reporter: pytest.TerminalReporter | None = self.config.pluginmanager.get_plugin(
            "terminalreporter")
        if reporter is None:
            return
        reporter.ensure_newline()
        writer = self.config.get_terminal_writer()
        if writer.width_of_current_line:  # letters carry no file prefix to end the line
            writer.line()
        if self.left_open:
            writer.write(line)
        else:
            writer.line(line)
        writer.flush()


class RunClock:
    """Controller: tells the run's :class:`Remaining` when each case starts and ends.

    A case's record counts when it is recorded; the finished lines, which show
    :meth:`text`, are written after that (``pytest_libero_case_finished``).
    """

    def __init__(self, remaining: Remaining, long: bool) -> None:
        self.remaining = remaining
        self.long = long

    def pytest_libero_case_started(self, case: str) -> None:
        self.remaining.start(case, time.time())

    def pytest_libero_case_recorded(self, record: CaseRecord) -> None:
        self.remaining.finish(record["case"], record)

    def pytest_libero_case_finished(self, case: str, record: CaseRecord | None) -> None:
        if record is None:  # it ran no episode: it holds no worker any more
            self.remaining.finish(case, None)

    def text(self) -> str:
        """``3 of 10 done, about 4m10s left``, or shorter for the live line."""
        now = time.time()
        if not self.long and self.remaining.seconds_left(now) is None:
            return ""  # the live line has pytest's own count beside it
        return eta_text(self.remaining, now, short=not self.long)


SINK_KEY = pytest.StashKey[Sink]()


def register(config: pytest.Config, remaining: Remaining | None = None) -> None:
    """Set up publishing (every process) and showing (the controller) for this run;
    ``remaining``: the controller's estimate of what is left, fed as cases end."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        shared = workerinput.get(WORKER_PROGRESS_DIR)  # only when the controller draws
        if shared:
            config.stash[SINK_KEY] = WorkerFile(Path(shared), workerinput["workerid"])
        return
    mode = display_mode(tty=sys.stdout.isatty(), verbosity=config.get_verbosity(),
                        capture=str(config.getoption("capture", "fd")), environ=os.environ)
    clock = None if remaining is None else RunClock(remaining, long=mode == "lines")
    if clock is not None:
        config.pluginmanager.register(clock, "libero-progress-clock")
    eta = None if clock is None else clock.text
    if mode == "lines":
        left_open = config.get_verbosity() >= 0 and not _distributed(config)
        config.pluginmanager.register(FinishedLines(config, left_open=left_open, eta=eta),
                                      "libero-progress")
        return
    fd = os.dup(sys.stdout.fileno())  # the terminal itself: capture cannot redirect this
    config.add_cleanup(lambda: os.close(fd))
    board: Callable[[], Board]
    if _distributed(config):
        folder = WorkerFolder()
        config.add_cleanup(folder.remove)
        config.pluginmanager.register(folder, "libero-progress-workers")
        board = folder.board
    else:
        local = LocalBoard()
        config.stash[SINK_KEY] = local
        board = local.board
    live = LiveLine(config, fd, board, eta=eta)
    config.add_cleanup(live.stop)
    config.pluginmanager.register(live, "libero-progress")


def _distributed(config: pytest.Config) -> bool:
    """Whether xdist will run the cases in workers (its own test, before it configures)."""
    return config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))


def worker_count(config: pytest.Config) -> int:
    """The processes that will run cases: xdist's workers, or this one."""
    return len(config.getoption("tx")) if _distributed(config) else 1


@contextmanager
def case_progress(config: pytest.Config, case_id: str, control_cap: int) -> Iterator[CaseProgress]:
    """Publish the case as running for as long as the block runs."""
    sink = config.stash.get(SINK_KEY, None)
    progress = CaseProgress(case_id, control_cap, sink)
    if sink is not None:
        sink.publish(progress.status)
    try:
        yield progress
    finally:
        if sink is not None:
            sink.retire()
