"""What ``evaluate`` returns: the run folder's summary, read back, with the figures a
training loop plots at hand. The run folder stays an ordinary one (verify, merge,
report, export and log work on it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_libero.results.layout import read_summary
from pytest_libero.results.run_reader import read_run


@dataclass(frozen=True)
class Evaluation:
    """One finished ``evaluate`` call."""

    run_dir: Path
    summary: dict[str, Any]
    """summary.json, as the run wrote it."""
    exit_code: int
    """pytest's: 0 every case passed (and the gates), 1 a case failed or a gate did not pass."""
    outcomes: dict[str, str]
    """case id -> success, failure or errored, for every case that ran."""

    @classmethod
    def read(cls, run_dir: Path, exit_code: int) -> Evaluation:
        read = read_run(run_dir)
        summary = read_summary(run_dir)
        return cls(run_dir, summary, exit_code, {r["case"]: r["outcome"] for r in read.records})

    @property
    def success_rate(self) -> float | None:
        """Successes over completed cases (errored ones are not counted); None when none completed."""
        rate = (self.summary.get("overall") or {}).get("rate")
        return None if rate is None else float(rate)

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% Wilson interval of :attr:`success_rate`."""
        low, high = (self.summary.get("overall") or {}).get("wilson95") or (0.0, 1.0)
        return float(low), float(high)

    @property
    def score(self) -> float | None:
        """The mean partial-credit score over completed cases that have one (docs/records.md,
        *Progress and score*): how far the policy gets, where success alone moves slowly;
        None without scored cases."""
        mean = ((self.summary.get("overall") or {}).get("score") or {}).get("mean")
        return None if mean is None else float(mean)

    @property
    def suites(self) -> dict[str, float | None]:
        """Each suite's success rate."""
        return {name: block.get("rate") for name, block in (self.summary.get("suites") or {}).items()}

    @property
    def gate(self) -> str:
        """``passed``, ``failed`` or ``none`` (no gate was asked for)."""
        gates = self.summary.get("gates") or []
        if not gates:
            return "none"
        return "passed" if all(g.get("passed") for g in gates) else "failed"

    def __str__(self) -> str:
        rate = "n/a" if self.success_rate is None else f"{self.success_rate:.1%}"
        low, high = self.interval
        return (f"{rate} success ({low:.1%}-{high:.1%}, 95% Wilson) over {len(self.outcomes)} cases, "
                f"gate {self.gate}: {self.run_dir}")
