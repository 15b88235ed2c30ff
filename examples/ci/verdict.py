"""Turn a gated pytest-libero run into a CI verdict: the gate, or the infrastructure.

    python verdict.py RUN_DIR PYTEST_EXIT_CODE

pytest exits 1 both when the gate fails and when a case errored (an errored case fails
the gate: an incomplete evaluation certifies nothing). A CI job wants them apart: a
checkpoint below the threshold is a red result for the model, an errored case or a run
that never started is a red result for the machine. This reads the run's summary.json
and exits 0 (the gate passed), 1 (the gate failed on a complete evaluation) or 2 (an
infrastructure error: a usage error, no summary, an errored or unattempted case),
printing one line, as a GitHub Actions error annotation where it runs there.

Standard library only: copy it beside your CI file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

PASSED, GATE_FAILED, INFRASTRUCTURE = 0, 1, 2
PYTEST_OUTCOMES = (0, 1)
"""pytest's exit codes that mean the cases ran: all passed, or some failed."""


def verdict(run_dir: Path, pytest_exit: int) -> tuple[int, str]:
    """The CI exit code and the line that says why."""
    summary_path = run_dir / "summary.json"
    if pytest_exit not in PYTEST_OUTCOMES:
        return INFRASTRUCTURE, (f"pytest exited {pytest_exit} (2 interrupted, 3 internal error, "
                                "4 usage error, 5 no tests): the evaluation did not run; see its log")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        counts, gates = summary["counts"], summary["gates"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return INFRASTRUCTURE, f"no readable {summary_path} ({type(exc).__name__}: {exc})"
    incomplete = {name: counts.get(name, 0) for name in ("errored", "unattempted")}
    if any(incomplete.values()):
        return INFRASTRUCTURE, (f"{incomplete['errored']} errored and {incomplete['unattempted']} "
                                f"unattempted of {counts.get('selected')} cases: the errors are "
                                f"in {run_dir}/results.jsonl")
    if not gates:
        return INFRASTRUCTURE, "the run has no gate: pass --libero-min-success"
    rate = summary.get("overall", {})
    said = "; ".join(line for gate in gates for line in gate.get("lines", []))
    if all(gate.get("passed") is True for gate in gates):
        return PASSED, f"gate passed: {said or rate}"
    return GATE_FAILED, f"gate failed: {said or rate}"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].lstrip("-").isdigit():
        print("usage: python verdict.py RUN_DIR PYTEST_EXIT_CODE", file=sys.stderr)
        return INFRASTRUCTURE
    code, line = verdict(Path(argv[0]), int(argv[1]))
    title = {PASSED: "LIBERO gate passed", GATE_FAILED: "LIBERO gate failed",
             INFRASTRUCTURE: "LIBERO infrastructure error"}[code]
    if os.environ.get("GITHUB_ACTIONS") == "true":
        print(f"::{'notice' if code == PASSED else 'error'} title={title}::{line}")
    else:
        print(f"{title}: {line}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
