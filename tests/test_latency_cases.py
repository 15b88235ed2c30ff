"""Latency on real LIBERO cases: the latency kind beside its twin, and the realtime track
against a real websocket server that takes 120 ms a call. Each chunk's values name its
call and index, so the record shows, control by control, which action ran; verify
re-executes both tracks from their records. Three calls of four controls a case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_clock import reference_schedule

from harness.runs import records_by_case, run_pytest
from harness.servers import free_port, serve_argv, serving
from pytest_libero.evidence.reader import read_actions
from pytest_libero.protocol.clock import measured_delay

pytestmark = pytest.mark.simulator

INTERVAL, CALLS, HORIZON = 4, 3, 6
NAMING = f'''
import time

import numpy as np


class Naming:
    """Chunks whose values name their call and index; ``sleep_ms`` per call."""

    metadata = {{}}

    def __init__(self, sleep_ms=0):
        self.sleep_s = float(sleep_ms) / 1000
        self.calls = 0

    def reset(self):
        self.calls = 0

    def infer(self, observation):
        self.calls += 1
        time.sleep(self.sleep_s)
        rows = [[self.calls / 100, i / 100, 0, 0, 0, 0, 1.0 if self.calls % 2 else -1.0]
                for i in range({HORIZON})]
        return {{"actions": np.asarray(rows, dtype=np.float64)}}

    def close(self):
        pass


def make(sleep_ms=0):
    return Naming(sleep_ms)
'''
BUDGET = ["--libero-budget-mode=decisions", f"--libero-max-policy-calls={CALLS}",
          f"--libero-replan-interval={INTERVAL}", "--libero-scope=development", "--libero-task-ids=0"]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("latency")
    (folder / "naming.py").write_text(NAMING)
    return folder


def env(work: Path) -> dict[str, str]:
    root = Path(__file__).resolve().parents[1]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(work), str(root)])}


@pytest.fixture(scope="module")
def served(work: Path) -> Iterator[Any]:
    def start(sleep_ms: int) -> Any:
        port = free_port()
        return serving(serve_argv("naming:make", port, options=[f"sleep_ms={sleep_ms}"]), port,
                       env=env(work))
    yield start


def run(work: Path, uri: str, run_id: str, *extra: str) -> Path:
    profile = work / f"{run_id}.toml"
    profile.write_text(f'name = "naming"\ntrack = "rgb"\n[policy]\ntransport = "websocket"\n'
                       f'endpoint = "{uri}"\n')
    done = run_pytest(["-q", f"--libero-profile={profile}", *BUDGET, f"--libero-run-id={run_id}",
                       *extra], work, env=env(work), timeout=900)
    folder = work / "libero-results" / "naming" / run_id
    assert (folder / "summary.json").is_file(), done.stdout + done.stderr
    return folder


def ran(case_dir: Path) -> dict[int, tuple[int, int]]:
    """Each control's (call, index) as the action's own values name it."""
    found: dict[int, tuple[int, int]] = {}
    for chunk in read_actions(case_dir):
        assert chunk.complete and chunk.sent_at_control is not None
        actions = chunk.executed_actions
        first = chunk.sent_at_control + (chunk.first_executed_index or 0)
        for i, action in enumerate([] if actions is None else actions):
            found[first + i] = (round(action[0] * 100), round(action[1] * 100))
    return found


def check_the_clock(record: dict[str, Any]) -> list[int]:
    """The record obeys the rule control by control; returns the delays it recorded."""
    chunks = record["chunks"]
    delays = [c["delay_controls"] for c in chunks]
    controls = record["counters"]["executed_controls"]
    sent, plan = reference_schedule([HORIZON] * len(chunks), delays, INTERVAL, controls)
    assert [c["sent_at_control"] for c in chunks] == sent
    found = ran(Path(record["evidence_dir"]))
    assert found == {c: p for c, p in enumerate(plan) if p is not None}
    assert record["counters"]["held_controls"] == controls - len(found)
    assert record["counters"]["stale_actions"] == sum(min(d, HORIZON) for d in delays)
    return delays


def verified(run_dir: Path, work: Path) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(run_dir)],
                          env=env(work), capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return {v["case"]: v["status"] for v in json.loads((run_dir / "verify.json").read_text())["cases"]}


def test_the_latency_kind_runs_late_replies_beside_its_twin_and_verifies(work: Path, served: Any) -> None:
    with served(0) as server:
        folder = run(work, server.uri, "kind", "--libero-perturb=latency:2,latency:4")
    found = records_by_case(folder)
    assert sorted(found) == ["libero_10-00", "libero_10-00~latency2", "libero_10-00~latency4"]
    assert check_the_clock(found["libero_10-00"]) == [0, 0, 0]
    assert found["libero_10-00"]["counters"]["held_controls"] == 0
    assert check_the_clock(found["libero_10-00~latency2"]) == [2, 2, 2]
    # A delay (8) longer than what a chunk covers (6): the robot holds throughout.
    assert check_the_clock(found["libero_10-00~latency4"]) == [8, 8]
    assert found["libero_10-00~latency4"]["counters"]["held_controls"] == 12
    assert found["libero_10-00~latency2"]["perturbation"]["parameters"] == {"delay_controls": 2}
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["latency"]["clock"] == "synchronous" and summary["latency"]["calls"] == 8
    assert summary["robustness"]["kinds"]["latency"]["paired"]["pairs"] == 2
    assert set(verified(folder, work).values()) == {"verified"}


def test_the_realtime_track_delays_each_reply_by_its_measured_latency_and_verifies(
    work: Path, served: Any,
) -> None:
    with served(120) as server:
        folder = run(work, server.uri, "realtime", "--libero-realtime")
    [record] = records_by_case(folder).values()
    delays = check_the_clock(record)
    measured = [c["latency_s"] for c in record["chunks"]]
    assert delays == [measured_delay(s) for s in measured] and min(delays) >= 3  # 120 ms: d >= 3
    run_json = json.loads((folder / "run.json").read_text())
    assert run_json["plan"]["clock"] == "realtime"
    assert run_json["protocol_identity"].startswith("libero-realtime-v1:")
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["latency"]["clock"] == "realtime" and summary["latency"]["p50_s"] >= 0.12
    assert summary["latency"]["held_control_ratio"] > 0
    assert verified(folder, work) == {"libero_10-00": "verified"}
