"""What ``evaluate``'s caller sees while its run goes on (``api/progress.py``).

The run folder is real files written as a run writes them (run.json first, then one
results.jsonl line per finished case, the last one possibly half written); the terminal
is a stream that says it is one. The real ``evaluate`` telling a callback is in
tests/test_evaluate.py.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pytest_libero.api.progress import Told


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def a_run(tmp_path: Path) -> Path:
    (tmp_path / "run.json").write_text(json.dumps({"plan": {"selection_cases": ["a", "b", "c"]}}))
    return tmp_path


def finish(run_dir: Path, *outcomes: str, torn: bool = False) -> None:
    with (run_dir / "results.jsonl").open("a") as results:
        results.write("".join(json.dumps({"case": o, "outcome": o}) + "\n" for o in outcomes))
        if torn:
            results.write('{"case": "c", "outc')  # the writer is midway through a line


def test_a_callback_is_told_each_change_and_a_half_written_line_waits(tmp_path: Path) -> None:
    run_dir, told = a_run(tmp_path), []
    watcher = Told(run_dir, lambda *a: told.append(a), Terminal())
    watcher.update()  # no results.jsonl yet
    finish(run_dir, "success")
    watcher.update()
    watcher.update()  # nothing new: not told again
    finish(run_dir, "failure", torn=True)
    watcher.update()
    assert told == [(1, 3, 1), (2, 3, 1)]
    assert watcher.terminal.getvalue() == ""  # type: ignore[attr-defined]  # a callback replaces the bar


def test_a_terminal_gets_tqdm_s_bar(tmp_path: Path) -> None:
    run_dir, terminal = a_run(tmp_path), Terminal()
    watcher = Told(run_dir, None, terminal)
    finish(run_dir, "success", "failure")
    watcher.update()
    watcher.close()
    drawn = terminal.getvalue()
    assert "pytest-libero evaluate:" in drawn and "2/3" in drawn and "successes=1" in drawn, drawn
    assert drawn.endswith("\n")


def test_without_tqdm_a_terminal_gets_one_redrawn_line(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    run_dir, terminal = a_run(tmp_path), Terminal()
    watcher = Told(run_dir, None, terminal)
    finish(run_dir, "success")
    watcher.update()
    finish(run_dir, "errored")
    watcher.update()
    watcher.close()
    assert terminal.getvalue() == ("\rpytest-libero evaluate: 1/3 cases, 1 successes"
                                   "\rpytest-libero evaluate: 2/3 cases, 1 successes\n")


def test_a_log_file_gets_nothing(tmp_path: Path) -> None:
    run_dir, log = a_run(tmp_path), io.StringIO()
    watcher = Told(run_dir, None, log)
    finish(run_dir, "success")
    watcher.update()
    watcher.close()
    assert log.getvalue() == ""
