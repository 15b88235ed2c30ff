"""harness/, the helpers tests, bench and the release tools share: a server that cannot
start says why, a served policy is always stopped, the /proc walk sees real processes,
and a results root with other than one run folder is named as such."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synthetic import synthetic_record

from harness import proctree
from harness.runs import all_records, run_folder, run_folders
from harness.servers import ServerDidNotStart, free_port, serve_argv, serving
from pytest_libero.episode.record import record_to_json


def test_a_server_that_exits_at_once_says_why_without_waiting_out_the_wait() -> None:
    started = time.monotonic()
    exits = [sys.executable, "-c", "print('no checkpoint at /nowhere'); raise SystemExit(3)"]
    with pytest.raises(ServerDidNotStart, match=r"exited with 3(.|\n)*no checkpoint at /nowhere"):
        with serving(exits, free_port(), wait_s=60):
            pass  # never reached
    assert time.monotonic() - started < 30


def test_a_served_policy_answers_and_is_stopped_and_reaped() -> None:
    port = free_port()
    with serving(serve_argv("zero", port, options=["chunk=2"]), port) as server:
        pid = server.process.pid
        assert server.uri == f"ws://127.0.0.1:{port}"
        assert proctree.alive(pid)
        assert "pytest_libero.serve" in proctree.cmdline(pid)
        assert pid in proctree.descendants(os.getpid())
    assert server.process.returncode is not None
    assert not proctree.unreaped(pid)


def test_the_walk_sees_a_child_and_its_end() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in proctree.children()[os.getpid()]
        # Under load /proc may show an empty command line for a moment around the exec.
        deadline = time.monotonic() + 5
        while not proctree.cmdline(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proctree.cmdline(child.pid).startswith("sleep 30")
        rss, _ = proctree.memory_kib(child.pid)
        assert rss > 0
    finally:
        child.kill()
    time.sleep(0.2)
    assert proctree.state(child.pid) == "Z" and not proctree.alive(child.pid)
    child.wait()
    assert proctree.state(child.pid) is None and proctree.memory_kib(child.pid) == (0, 0)


def test_a_results_root_must_hold_exactly_one_run(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="expected one run folder"):
        run_folder(tmp_path)
    for run in ("zero/a", "zero/b/shard-1-of-2"):
        (tmp_path / run).mkdir(parents=True)
        (tmp_path / run / "run.json").write_text("{}")
        (tmp_path / run / "results.jsonl").write_text(
            record_to_json(synthetic_record("libero_10-00", "failure")) + "\n")
    assert [p.relative_to(tmp_path).as_posix() for p in run_folders(tmp_path)] == [
        "zero/a", "zero/b/shard-1-of-2"]
    with pytest.raises(AssertionError, match="found"):
        run_folder(tmp_path, "zero")
    assert [r["case"] for r in all_records(tmp_path)] == ["libero_10-00", "libero_10-00"]
