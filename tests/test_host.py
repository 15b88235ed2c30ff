"""The case host, driven with a scripted fake case process (tests/fake_case_process.py).

What only the host decides is tested here in milliseconds per process: which process
runs each case, when the next one sets up, the kept environment's chain, and that a
hang, a death, a lost set-up, a process that cannot start and a Ctrl-C each end as
they should. The same behaviours with the real simulator: tests/test_isolation.py,
tests/test_prebuild.py, tests/test_kept_environment.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_case_process import FakeLauncher, Fault, Script

from pytest_libero.catalog.entries import Entry
from pytest_libero.catalog.selection import SelectionRequest
from pytest_libero.config.plan import RunPlan, Watchdog, make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.episode.host import SimulatorHost
from pytest_libero.episode.host.launch import SOCKET_PATH_BYTES, SOCKET_SUFFIX_BYTES
from pytest_libero.episode.record import CaseRecord

LIMITS = Watchdog(build_s=1.5, step_s=1.0, policy_s=1.5, policy_connect_s=5.0,
                  policy_name="ws://127.0.0.1:1 (scripted)")


def plan_of(request: SelectionRequest) -> RunPlan:
    return make_plan(load_profile("zero"), request, adapter="libero", render="consumed",
                     video_stride=1)


FAST = plan_of(SelectionRequest("task_coverage", "libero_10", (0, 1, 2, 3)))
PERTURBED = plan_of(SelectionRequest("task_coverage", "libero_10", (0, 1), mode="full",
                                     init_states=(0, 1, 3), perturbations=(("camera", 1),)))


@pytest.fixture(autouse=True)
def early_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where set-ups done ahead log until their turn: checked empty after each test."""
    folder = tmp_path / "early"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


class Worker:
    """A host with scripted processes, running cases as a pytest worker does."""

    def __init__(self, root: Path, script: Script, plan: RunPlan = FAST, **host: Any) -> None:
        self.root = root
        self.plan = plan
        self.launcher = FakeLauncher(script, host.pop("refuse", None))
        self.host = SimulatorHost(launcher=self.launcher, **host)

    def run(self, cases: list[str], **kwargs: Any) -> dict[str, CaseRecord]:
        """Run ``cases`` in order, each told the next; records by case."""
        entries = {entry.case_id: entry for entry in self.plan.entries}
        found = {}
        for position, case in enumerate(cases):
            following = entries[cases[position + 1]] if position + 1 < len(cases) else None
            found[case] = self.case(entries[case], following, **kwargs)
        return found

    def case(self, entry: Entry, following: Entry | None, **kwargs: Any) -> CaseRecord:
        return self.host.run(self.plan, entry, self.root / entry.case_id, LIMITS,
                             next_entry=following, **kwargs)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    made = Worker(tmp_path, Script())
    yield made
    made.host.close()
    assert made.launcher.alive() == []


def first_four() -> list[str]:
    return [entry.case_id for entry in FAST.entries]


def test_each_case_runs_in_its_own_process_the_next_one_set_up_ahead(worker: Worker,
                                                                     early_logs: Path) -> None:
    found = worker.run(first_four())
    assert [r["outcome"] for r in found.values()] == ["failure"] * 4
    assert [r["set_up_ahead"] for r in found.values()] == [False, True, True, True]
    assert len({r["pid"] for r in found.values()}) == 4
    assert [case for case, _ in worker.launcher.started] == first_four()
    for case in first_four()[1:]:  # the set-up's output moved into the case's folder
        log = (worker.root / case / "simulator.log").read_text()
        assert f"setting up {case}" in log, log
    assert list(early_logs.iterdir()) == []
    assert worker.launcher.alive() == []  # nothing kept in fast mode


def test_without_prebuild_every_case_sets_up_at_its_turn(tmp_path: Path) -> None:
    worker = Worker(tmp_path, Script(), prebuild=False)
    found = worker.run(first_four())
    assert [r["set_up_ahead"] for r in found.values()] == [False] * 4


@pytest.mark.parametrize(("fault", "cause", "words"), [
    (Fault("hang", at=3), "simulator_hang", "no sign of life for 1s during step after 2 controls"),
    (Fault("policy-hang", at=3), "policy_hang",
     "no answer from ws://127.0.0.1:1 (scripted) for 2s during policy after 2 controls"),
    (Fault("SIGSEGV"), "simulator_crash", "died (killed by SIGSEGV) during step after 1 controls"),
    (Fault("SIGABRT"), "simulator_crash", "killed by SIGABRT"),
    (Fault("SIGKILL"), "simulator_crash", "killed by SIGKILL"),
    (Fault("hang", when="build"), "simulator_hang", "no sign of life for 2s during build"),
    # Dead, though its pipe stays open past the step's allowance: a crash, not a hang.
    (Fault("slow-exit"), "simulator_crash", "died (killed by SIGKILL) during step after 1 controls"),
])
def test_a_lost_case_process_costs_its_case_only(tmp_path: Path, fault: Fault, cause: str,
                                                 words: str) -> None:
    cases = first_four()
    worker = Worker(tmp_path, Script(faults={cases[1]: fault}), prebuild=False)
    found = worker.run(cases)
    lost = found[cases[1]]
    assert lost["outcome"] == "errored" and lost["error"]["cause"] == cause
    assert words in lost["error"]["message"], lost["error"]["message"]
    if cause != "policy_hang":  # the output tail, captured from the process's own log
        assert f"about to {fault.what}" in lost["error"]["message"]
    killed = fault.what if fault.what.startswith("SIG") else "SIGKILL"  # by the watchdog
    assert lost["child_exit"] == -getattr(signal, killed)
    assert lost["pid"] == worker.launcher.started[1][1].pid
    assert lost["evidence_dir"] == str(tmp_path / cases[1])
    assert [found[c]["outcome"] for c in (cases[0], cases[2], cases[3])] == ["failure"] * 3
    assert worker.launcher.alive() == []


@pytest.mark.parametrize("fault", [Fault("SIGSEGV", when="build"), Fault("hang", when="build")])
def test_a_lost_set_up_errors_its_own_case_at_its_turn(tmp_path: Path, early_logs: Path,
                                                       fault: Fault) -> None:
    cases = first_four()
    # The case before it runs long enough to outlast the set-up's allowance.
    script = Script(faults={cases[2]: fault}, long={cases[1]: 120})
    worker = Worker(tmp_path, script)
    found = worker.run(cases)
    assert found[cases[1]]["outcome"] == "failure"  # the case running meanwhile: untouched
    lost = found[cases[2]]
    assert lost["outcome"] == "errored"
    message = lost["error"]["message"]
    assert "during build after 0 controls" in message, message
    assert "(its set-up began while the previous case ran)" in message
    log = (tmp_path / cases[2] / "simulator.log").read_text()
    assert f"setting up {cases[2]}" in log and f"about to {fault.what}" in log
    assert found[cases[3]]["outcome"] == "failure"
    assert list(early_logs.iterdir()) == []


def test_a_set_up_that_ends_after_its_turn_runs_its_case(tmp_path: Path) -> None:
    worker = Worker(tmp_path, Script(build_s=0.6, step_s=0.01, steps=3))
    found = worker.run(first_four())
    assert [r["outcome"] for r in found.values()] == ["failure"] * 4
    assert [r["set_up_ahead"] for r in found.values()] == [False, True, True, True]


def test_a_case_whose_process_cannot_start_gets_an_error_record(tmp_path: Path) -> None:
    cases = first_four()
    worker = Worker(tmp_path, Script(), prebuild=False, refuse={cases[1]: None})
    found = worker.run(cases)
    failed = found[cases[1]]
    assert failed["outcome"] == "errored"
    assert failed["error"]["kind"] == "environment" and failed["error"]["type"] == "ProcessNotStarted"
    assert (f"could not start a case process for {cases[1]} (BlockingIOError: [Errno 11] Resource "
            "temporarily unavailable (scripted))") in failed["error"]["message"]
    assert failed["evidence_dir"] == str(tmp_path / cases[1])
    assert [found[c]["outcome"] for c in (cases[0], cases[2], cases[3])] == ["failure"] * 3


def test_a_set_up_ahead_that_cannot_start_leaves_its_case_to_its_turn(tmp_path: Path) -> None:
    cases = first_four()
    worker = Worker(tmp_path, Script(), refuse={cases[1]: 1})  # its first start: ahead
    with pytest.warns(RuntimeWarning, match=f"could not set up {cases[1]} ahead of its turn"):
        found = worker.run(cases)
    assert [r["outcome"] for r in found.values()] == ["failure"] * 4
    # This worker's later cases set up at their turns, the failure said once.
    assert [r["set_up_ahead"] for r in found.values()] == [False] * 4
    assert worker.host.prebuild is False


def test_a_set_up_nobody_runs_is_ended_and_its_log_removed(worker: Worker, early_logs: Path) -> None:
    entries = FAST.entries
    worker.case(entries[0], entries[1])
    assert worker.launcher.alive() == [entries[1].case_id]  # set up ahead, waiting
    assert len(list(early_logs.iterdir())) == 1
    worker.host.discard_prepared()  # a skip, a stop
    assert worker.launcher.alive() == [] and list(early_logs.iterdir()) == []
    # Another case than the one set up ahead comes: that set-up is ended, never run.
    worker.case(entries[1], entries[2])
    record = worker.case(entries[3], None)
    assert record["set_up_ahead"] is False
    assert [case for case, _ in worker.launcher.started] == [entries[0].case_id, entries[1].case_id,
                                                             entries[1].case_id, entries[2].case_id,
                                                             entries[3].case_id]


def test_ctrl_c_kills_the_running_case_and_close_ends_the_rest(worker: Worker,
                                                              early_logs: Path) -> None:
    entries = FAST.entries
    worker.case(entries[0], entries[1])

    def interrupt(counters: dict[str, int]) -> None:
        if counters.get("executed_controls", 0) >= 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        worker.case(entries[1], entries[2], progress=interrupt)
    started = dict(worker.launcher.started)
    assert not started[entries[1].case_id].is_alive()  # the interrupted case: killed at once
    assert worker.launcher.alive() == [entries[2].case_id]  # set up ahead meanwhile
    worker.host.close()  # the plugin's session cleanup
    assert worker.launcher.alive() == [] and list(early_logs.iterdir()) == []


def test_progress_is_told_every_sign_of_life(worker: Worker) -> None:
    seen: list[dict[str, int]] = []
    worker.case(FAST.entries[0], None, progress=seen.append)
    assert seen[-1] == {"policy_calls": 5, "executed_controls": 5}


def full_order(states_first: bool) -> list[str]:
    """libero_10 tasks 0 and 1 at states 0, 1, 3 with a camera twin each, as pytest
    collects them (each state, then its perturbed copy) or with the states first."""
    cases = [entry.case_id for entry in PERTURBED.entries]
    return sorted(cases, key=lambda c: (c[:12], "~" in c)) if states_first else cases


@pytest.mark.parametrize("states_first", [False, True])
def test_twin_states_continue_in_the_kept_environment_beside_their_perturbed_cases(
    tmp_path: Path, states_first: bool
) -> None:
    worker = Worker(tmp_path, Script(), plan=PERTURBED)
    order = full_order(states_first)
    if not states_first:
        assert order[:3] == ["libero_10-00-s0", "libero_10-00-s0~camera1", "libero_10-00-s1"]
    found = worker.run(order)
    for task in ("libero_10-00", "libero_10-01"):
        states = [found[f"{task}-s{s}"] for s in (0, 1, 3)]
        assert [r["environment"] for r in states] == [
            "fresh", "kept from state 0", "kept from state 1"], task
        assert len({r["pid"] for r in states}) == 1, task  # one process, its environment kept
        perturbed = [found[f"{task}-s{s}~camera1"] for s in (0, 1, 3)]
        assert [r["environment"] for r in perturbed] == ["fresh"] * 3
        assert [r["kept_use"] for r in perturbed] == [[False, False]] * 3  # never kept
        assert all(r["set_up_ahead"] for r in perturbed)  # like any fresh case
        assert not {r["pid"] for r in perturbed} & {states[0]["pid"]}
    # The next task's first state was set up ahead; nothing else was started.
    assert found["libero_10-01-s0"]["set_up_ahead"]
    assert len(worker.launcher.started) == 2 + 6
    worker.host.close()
    assert worker.launcher.alive() == []


def test_an_errored_state_ends_the_chain_and_the_next_state_starts_fresh(tmp_path: Path) -> None:
    worker = Worker(tmp_path, Script(faults={"libero_10-00-s1": Fault("SIGSEGV")}), plan=PERTURBED)
    found = worker.run(full_order(False)[:6])
    assert found["libero_10-00-s1"]["outcome"] == "errored"
    assert found["libero_10-00-s1"]["pid"] == found["libero_10-00-s0"]["pid"]  # it continued
    after = found["libero_10-00-s3"]
    assert after["environment"] == "fresh" and after["pid"] != found["libero_10-00-s0"]["pid"]
    # Nothing was kept to continue in: it was set up ahead while s1~camera1 ran.
    assert after["set_up_ahead"]
    worker.host.close()


def test_a_kept_process_that_died_while_waiting_is_replaced(tmp_path: Path) -> None:
    worker = Worker(tmp_path, Script(), plan=PERTURBED)
    entries = {entry.case_id: entry for entry in PERTURBED.entries}
    worker.case(entries["libero_10-00-s0"], entries["libero_10-00-s1"])
    [(_, kept)] = worker.launcher.started
    kept.kill()
    kept.join()
    record = worker.case(entries["libero_10-00-s1"], None)
    assert record["outcome"] == "failure" and record["environment"] == "fresh"
    worker.host.close()


def test_a_hung_process_is_killed_within_its_allowance(tmp_path: Path) -> None:
    worker = Worker(tmp_path, Script(faults={FAST.entries[0].case_id: Fault("hang", at=1)}))
    t0 = time.monotonic()
    record = worker.case(FAST.entries[0], None)
    assert record["error"]["cause"] == "simulator_hang"
    assert LIMITS.step_s <= time.monotonic() - t0 < LIMITS.step_s + 3.0


def test_a_temporary_folder_too_long_for_the_forkserver_socket_is_one_line(tmp_path: Path) -> None:
    """multiprocessing binds the forkserver's socket under TMPDIR; past 107 bytes that was
    an INTERNALERROR ("AF_UNIX path too long") before any case. Now it is a usage error
    naming the folder and the length that fits, before the simulator is imported."""
    long = tmp_path / ("d" * max(1, SOCKET_PATH_BYTES - SOCKET_SUFFIX_BYTES - len(str(tmp_path))))
    long.mkdir()
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--libero-profile=zero",
         "--libero-scope=development", "--libero-task-ids=0", f"--libero-results={tmp_path / 'r'}"],
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(long)}, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip() == (
        f"ERROR: the temporary folder {long} is {len(str(long))} bytes long: case processes "
        "start from a forkserver whose socket lives in it, and a socket path holds at most 107 "
        "bytes; set TMPDIR to a folder at most 75 bytes long (e.g. /tmp)")
    assert "Traceback" not in done.stdout + done.stderr and not (tmp_path / "r").exists()
