"""A missing, hanging or dying policy server costs seconds and says so.

Real servers (``python -m pytest_libero.serve``) on 127.0.0.1, real pytest sessions
through pytester, the real simulator where a case must run.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from scripted_policies import TESTS_DIR

from harness.runs import records_by_case, run_folder
from harness.servers import Served, free_port, serve_argv, serving
from pytest_libero.catalog.selection import SelectionRequest
from pytest_libero.config.plan import Watchdog, make_plan
from pytest_libero.config.profiles import parse_profile
from pytest_libero.episode.host import run_isolated
from pytest_libero.evidence.reader import read_actions

pytest_plugins = ["pytester"]

SMALL = ["--libero-budget-mode=decisions", "--libero-max-policy-calls=2", "--libero-replan-interval=1"]
WEBSOCKET_PROFILES = ("smolvla", "pi0", "pi05", "openvla-oft")


@contextmanager
def served(policy: str, *options: str, port: int | None = None) -> Iterator[Served]:
    """``python -m pytest_libero.serve`` with a policy from tests/scripted_policies.py."""
    port = port or free_port()
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}
    with serving(serve_argv(policy, port, options=options), port, env=env, poll_s=2.0) as server:
        yield server


@pytest.mark.parametrize(("profile", "hint"), [
    ("smolvla", "python -m pytest_libero.serve --policy pytest_libero.bridges.lerobot:make"),
    ("pi05", "uv run scripts/serve_policy.py --env LIBERO"),
])
def test_no_server_is_a_usage_error_before_any_case(
    pytester: pytest.Pytester, profile: str, hint: str
) -> None:
    endpoint = f"ws://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = pytester.runpytest(f"--libero-profile={profile}", f"--libero-endpoint={endpoint}",
                                "--libero-server-wait=1", "--libero-scope=all")
    elapsed = time.monotonic() - started
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert elapsed < 20, f"{elapsed:.1f}s to learn that no server is there"
    error = "\n".join(result.stderr.lines)
    assert f"no policy server answered at {endpoint} within 1s" in error
    assert f"profile {profile!r}" in error and hint in error and "no case was run" in error
    # The operator is told at once, before the wait is over.
    assert f"no policy server at {endpoint} yet; waiting up to 1s" in error
    assert "Traceback" not in error
    assert not (pytester.path / "libero-results").exists()  # no run folder, no simulator
    assert "test_libero_task" not in "\n".join(result.stdout.lines)


def test_a_hanging_policy_is_blamed_not_the_simulator(tmp_path: Path) -> None:
    profile = parse_profile(b'name = "hangs"\n[policy]\nfactory = "scripted_policies:HangsOnReset"\n',
                            "hangs.toml")
    plan = make_plan(profile, SelectionRequest(scope="smoke"), adapter="libero", render="consumed",
                     video_stride=1)
    started = time.monotonic()
    record = run_isolated(plan, plan.entries[0], tmp_path / "case",
                          Watchdog(build_s=600, step_s=120, policy_s=120, policy_connect_s=2.0,
                                   policy_name="the hanging policy"))
    assert time.monotonic() - started < 30
    error = record["error"]
    assert (error["kind"], error["cause"]) == ("policy_transport", "policy_hang")
    assert "no connect to the hanging policy for 2s during policy_reset" in error["message"]
    assert "simulator" not in error["message"]
    assert record["identity"] == {}  # no environment was built


@pytest.mark.simulator
@pytest.mark.parametrize(("workers", "tasks"), [([], 3), (["-n", "2"], 4)], ids=["serial", "xdist"])
def test_a_server_that_dies_stops_the_run_and_resume_finishes_it(
    pytester: pytest.Pytester, workers: list[str], tasks: int
) -> None:
    """Serially, case 0 runs, case 1 meets the dead server and case 2, set up ahead, is
    left unattempted: three tasks are enough. Two workers each run a case before the
    server dies, so they keep four (each case is a fresh environment, ~7 s)."""
    port = free_port()
    args = ["--libero-profile=smolvla", f"--libero-endpoint=ws://127.0.0.1:{port}",
            "--libero-server-wait=2", "--libero-scope=development", f"--libero-task-ids=0-{tasks - 1}",
            "--libero-min-success=0", *SMALL, *workers]
    with served("scripted_policies:CountsSinceReset", "die_at_episode=2", port=port) as server:
        result = pytester.runpytest(*args)
        server.process.wait(30)  # it died at the second episode's first request
    assert result.ret == pytest.ExitCode.INTERRUPTED  # not OK, whatever the gate says
    run = run_folder(pytester.path / "libero-results", "smolvla")
    summary = json.loads((run / "summary.json").read_text())
    counts = summary["counts"]
    assert counts["unattempted"] >= 1 and counts["success"] == 0
    assert counts["selected"] == tasks == counts["completed"] + counts["errored"] + counts["unattempted"]
    records = records_by_case(run)
    for record in records.values():  # every error keeps its own transport cause
        if record["outcome"] == "errored":
            assert record["error"]["kind"] == "policy_transport"
            assert record["error"]["cause"] in ("connection_lost", "server_unavailable")
    assert counts["errored"] >= 1
    # A case set up ahead that never had its turn left no case folder.
    assert summary["unattempted"] and not any(
        (run / "cases" / case).exists() for case in summary["unattempted"])
    resume = f"--libero-resume={run}"
    assert resume in summary["stopped"] and "stopped answering" in summary["stopped"]
    out = "\n".join(result.stdout.lines)
    assert f"run stopped: the policy server at ws://127.0.0.1:{port} stopped answering" in out
    assert summary["gates"] and not any(g["passed"] for g in summary["gates"])
    assert "Traceback" not in out  # one-line causes; tracebacks stay in the record

    with served("scripted_policies:CountsSinceReset", port=port):
        finish = pytester.runpytest(*[a for a in args if a != "--libero-min-success=0"], resume)
    assert finish.ret == pytest.ExitCode.TESTS_FAILED  # native failures: a zero-ish policy
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"]["unattempted"] == 0 and summary["stopped"] is None
    assert set(records_by_case(run)) == {f"libero_10-0{i}" for i in range(tasks)}


@pytest.mark.simulator
def test_a_server_that_comes_back_in_time_is_used(pytester: pytest.Pytester) -> None:
    port = free_port()
    restarted: list[str] = []
    with served("scripted_policies:CountsSinceReset", "die_at_episode=2", port=port) as first:

        def restart() -> None:
            first.process.wait(120)
            time.sleep(1.0)  # down for a while: the next case's probe has to wait
            with served("scripted_policies:CountsSinceReset", port=port):
                restarted.append("up")
                while not done.is_set():
                    time.sleep(0.1)

        done = threading.Event()
        thread = threading.Thread(target=restart)
        thread.start()
        try:
            result = pytester.runpytest(
                "--libero-profile=smolvla", f"--libero-endpoint=ws://127.0.0.1:{port}",
                "--libero-server-wait=60", "--libero-scope=development", "--libero-task-ids=0-2",
                *SMALL)
        finally:
            done.set()
            thread.join(60)
    assert restarted == ["up"]
    result.assert_outcomes(failed=2, errors=1)
    run = run_folder(pytester.path / "libero-results", "smolvla")
    records = records_by_case(run)
    assert records["libero_10-01"]["error"]["cause"] == "connection_lost"
    assert records["libero_10-02"]["outcome"] == "failure"  # ran against the new server
    assert json.loads((run / "summary.json").read_text())["stopped"] is None


@pytest.mark.simulator
@pytest.mark.parametrize("profile", WEBSOCKET_PROFILES)
def test_a_served_stateful_policy_starts_every_episode_fresh(
    pytester: pytest.Pytester, profile: str
) -> None:
    with served("scripted_policies:CountsSinceReset") as server:
        result = pytester.runpytest(f"--libero-profile={profile}", f"--libero-endpoint={server.uri}",
                                    "--libero-isolation=none", *SMALL)
    result.assert_outcomes(failed=2)
    run = run_folder(pytester.path / "libero-results", profile)
    for case in ("libero_10-00", "libero_10-01"):
        firsts = [float(c.actions[0, 0]) for c in read_actions(run / "cases" / case)
                  if c.actions is not None]
        assert firsts == [0.01, 0.02], f"{profile} {case}: the policy was not reset ({firsts})"


@pytest.mark.simulator
def test_overshoots_error_when_strict_and_are_clipped_and_counted_when_asked(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    profile = pytester.makefile(".toml", overshoots='''
        name = "overshoots"
        [policy]
        factory = "scripted_policies:Overshoots"
    ''')
    one = [f"--libero-profile={profile}", "--libero-scope=task_coverage", "--libero-suite=libero_10",
           "--libero-task-ids=0", *SMALL]
    strict = pytester.runpytest(*one, "--libero-run-id=strict")
    strict.assert_outcomes(errors=1)
    strict.stdout.fnmatch_lines(["*invalid_action*normalized range*out_of_bounds*"])
    clipped = pytester.runpytest(*one, "--libero-run-id=clip", "--libero-out-of-bounds=clip")
    clipped.assert_outcomes(failed=1)
    clipped.stdout.fnmatch_lines(["*clipped actions: 4 value(s) in 2 chunk(s) of 1 case(s)*"
                                  "largest excess 0.02*"])
    root = pytester.path / "libero-results" / "overshoots"
    [record] = records_by_case(root / "clip").values()
    assert record["outcome"] == "failure"
    assert record["clipping"] == {"mode": "clip", "chunks": 2, "values": 4,
                                  "max_excess": pytest.approx(0.02)}
    assert [c.get("clipped") for c in record["chunks"]] == [
        {"values": 2, "max_excess": pytest.approx(0.02)}] * 2
    summary = json.loads((root / "clip" / "summary.json").read_text())
    assert summary["clipping"]["values"] == 4 and summary["clipping"]["cases"] == 1
    run = json.loads((root / "clip" / "run.json").read_text())
    assert run["plan"]["profile"]["out_of_bounds"] == "clip"
    for chunk in read_actions(root / "clip" / "cases" / "libero_10-00"):
        assert chunk.actions is not None and chunk.actions[0, 6] == 1.02  # the raw chunk
        executed = chunk.executed_actions
        assert executed is not None and executed.shape == (1, 7)
        assert (executed[0, 1], executed[0, 6]) == (-1.0, 1.0)  # what ran, clipped
        assert np.array_equal(executed[0, [0, 2, 3, 4, 5]], np.zeros(5))
