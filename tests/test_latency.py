"""Latency without a simulator: what summary.json, the terminal and the Allure environment
say of it, and the options that are refused with a reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from synthetic import synthetic_record

from pytest_libero.report.allure import write_environment
from pytest_libero.report.terminal import latency_lines
from pytest_libero.results.latency import latency_summary

pytest_plugins = ["pytester"]


def timed(case: str, latencies: list[float], *, held: int = 0, controls: int = 20,
          decisions: int = 4) -> dict[str, Any]:
    chunks = [{"call": n, "latency_s": s} for n, s in enumerate(latencies, start=1)]
    return dict(synthetic_record(case, "failure", chunks=chunks, counters={
        "executed_controls": controls, "held_controls": held, "decisions": decisions,
        "stale_actions": held // 2}))


def test_the_summary_gives_percentiles_and_the_clock_s_figures_per_run_and_suite() -> None:
    records = [timed("libero_10-00", [n / 100 for n in range(101)], held=5),
               timed("libero_goal-03", [2.0], held=0, controls=20, decisions=1)]
    block = latency_summary(records, "realtime")  # type: ignore[arg-type]
    assert block is not None and block["clock"] == "realtime" and block["calls"] == 102
    assert block["max_s"] == 2.0
    ten = block["suites"]["libero_10"]
    assert (ten["p50_s"], ten["p95_s"], ten["p99_s"], ten["max_s"]) == pytest.approx((0.5, 0.95, 0.99, 1.0))
    assert block["held_control_ratio"] == 5 / 40
    assert block["decisions_per_simulated_s"] == pytest.approx(5 / (40 * 0.05))
    assert block["suites"]["libero_goal"]["calls"] == 1
    assert block["suites"]["libero_10"]["held_control_ratio"] == 5 / 20


def test_records_without_latencies_give_no_block() -> None:
    assert latency_summary([synthetic_record("libero_10-00", "failure")], "synchronous") is None


def test_the_terminal_and_the_allure_environment_show_the_percentiles(tmp_path: Path) -> None:
    block = latency_summary([timed("libero_10-00", [0.1, 0.2, 0.3], held=4)], "realtime")  # type: ignore[list-item]
    assert block is not None
    lines = latency_lines(block)
    assert lines[0] == ("latency per call (realtime track): p50 200.0 ms, p95 290.0 ms, "
                        "p99 298.0 ms, max 300.0 ms over 3 calls")
    assert lines[1].startswith("held controls: 20.0% of the simulated time; 4.00 decisions")
    write_environment(tmp_path, {"run_id": "r", "plan": {"clock": "realtime"}}, {"latency": block})
    text = (tmp_path / "environment.properties").read_text()
    assert "plan.clock=realtime" in text
    assert ("latency=p50 200.0 ms, p95 290.0 ms, p99 298.0 ms, max 300.0 ms over 3 calls "
            "(realtime track)") in text


@pytest.mark.parametrize(("args", "said"), [
    (["--libero-profile=zero", "--libero-realtime"],
     "--libero-realtime: profile 'zero' runs in this process, where a call's latency measures nothing"),
    (["--libero-profile=pi05", "--libero-realtime", "--libero-perturb=latency:2"],
     "--libero-realtime measures every delay; --libero-perturb=latency:2 sets them itself"),
    (["--libero-profile=zero", "--libero-perturb=latency:5"],
     "--libero-perturb='latency:5': cannot read it"),
])
def test_what_latency_refuses_is_a_usage_error_naming_it(pytester: pytest.Pytester, args: list[str],
                                                          said: str) -> None:
    done = pytester.runpytest_subprocess(*args, "--collect-only", "-q")
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    assert said in done.stderr.str(), done.stderr.str()
    assert not (pytester.path / "libero-results").exists()
