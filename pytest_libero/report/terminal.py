"""The LIBERO section of the terminal summary: evidence class, counts and rates.

Formatting a run summary is shared by the live session and ``pytest-libero merge``;
:class:`TerminalSummary` prints it at the end of a session.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_libero.results.recorder import Recorder


def format_rate(label: str, rate: dict[str, Any]) -> str:
    if rate["rate"] is None:
        return f"{label}: no completed episode"
    low, high = rate["wilson95"]
    return (
        f"{label}: {rate['successes']}/{rate['completed']} = {rate['rate']:.1%} "
        f"(95% Wilson {low:.1%}-{high:.1%})"
    )


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """What the terminal shows: the evidence class, every count, every rate."""
    label = (
        " (infrastructure evidence, not a capability claim)"
        if summary.get("evidence_class") == "infrastructure"
        else ""
    )
    counts = summary["counts"]
    lines = [
        f"profile {summary.get('profile')}{label}",
        ", ".join(f"{counts[k]} {k}" for k in counts),
    ]
    lines += [format_rate(s, r) for s, r in sorted(summary["suites"].items())]
    lines.append(format_rate("overall", summary["overall"]))
    clipping = summary.get("clipping") or {}
    if clipping.get("values"):
        lines.append(
            f"clipped actions: {clipping['values']} value(s) in {clipping['chunks']} chunk(s) "
            f"of {clipping['cases']} case(s) were outside [-1, 1] (largest excess "
            f"{clipping['max_excess']:.4g}) and clipped before execution"
        )
    return lines


class TerminalSummary:
    """The LIBERO section at the end of the session, from the controller's recorder."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        recorder = self.recorder
        terminalreporter.section("LIBERO")
        for line in summary_lines(recorder.summary()):
            terminalreporter.write_line(line)
        if recorder.stopped is not None:
            terminalreporter.write_line(f"run stopped: {recorder.stopped}", red=True)
        for verdict in recorder.verdicts:
            for line in verdict.lines:
                terminalreporter.write_line(line, red=not verdict.passed, green=verdict.passed)
        for problem in recorder.write_errors:
            terminalreporter.write_line(problem, red=True)
        terminalreporter.write_line(f"results: {recorder.folder.path}")
