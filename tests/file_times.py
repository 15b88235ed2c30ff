"""The order the test files are handed to xdist's workers, from what each file cost.

``--dist loadfile`` gives a worker a whole file at a time, in the order of the collected
items, so a long file handed out last keeps one worker busy while the other idles. The
unit tests go first (a broken room fails in seconds); then the simulator files, the
longest first (the longest-processing-time rule), by the worker seconds each took in a
measured run (``file_times.json``). A file not measured yet goes first among them: a new
file is not left to the end on a guess.

``--file-times=PATH`` writes this run's figures (the controller's sum of each file's
setup, call and teardown times): copy them into ``file_times.json`` after a change moves
them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

MEASURED = Path(__file__).with_name("file_times.json")


def measured_seconds() -> dict[str, float]:
    return dict(json.loads(MEASURED.read_text(encoding="utf-8"))["seconds"])


def order(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Sort ``items`` in place: unit files first, then simulator files longest first."""
    simulated = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("simulator")}
    longest = max(seconds.values(), default=0.0) + 1.0

    def key(item: pytest.Item) -> tuple[bool, float]:
        path = item.nodeid.split("::")[0]
        return path in simulated, -seconds.get(path, longest)

    items.sort(key=key)


class Recorder:
    """Each file's worker seconds, summed on the controller (or the only process)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("::")[0]] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput"):
            return
        figures = {path: round(s, 1) for path, s in sorted(self.seconds.items(), key=lambda kv: -kv[1])}
        self.out.write_text(json.dumps({"seconds": figures}, indent=1) + "\n", encoding="utf-8")
