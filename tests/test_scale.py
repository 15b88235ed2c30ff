"""Issue 5 without the simulator: shards, GPU pinning through xdist, worker crashes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.selection import SelectionRequest, parse_shard, select, shard
from pytest_libero.config.plan import make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.protocol.errors import SetupError

pytest_plugins = ["pytester"]


def horizon_cost(suite: str) -> int:
    return load_catalog().horizon(suite)[0]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 8, 130])
def test_shards_are_disjoint_complete_and_balanced_by_budget(count: int) -> None:
    entries = select(load_catalog(), SelectionRequest("all"))
    cost = {e: horizon_cost(e.suite) for e in entries}
    parts = [shard(entries, i, count, cost.__getitem__) for i in range(1, count + 1)]
    flat = [e.case_id for part in parts for e in part]
    assert len(flat) == len(set(flat)) == 130  # disjoint, nothing lost
    assert set(flat) == {e.case_id for e in entries}
    for part in parts:  # each part keeps native order
        assert part == [e for e in entries if e in part]
    loads = [sum(cost[e] for e in part) for part in parts]
    assert max(loads) - min(loads) <= max(cost.values())  # balanced by cost, not count
    if count == 4:
        sizes = Counter(len(p) for p in parts)
        assert max(loads) / min(loads) < 1.02 and len(sizes) >= 1


PLAN_SETTINGS: dict[str, Any] = {"adapter": "libero", "render": "consumed", "video_stride": 1}


def test_plan_shards_use_the_budget_of_the_mode() -> None:
    profile = load_profile("zero")
    full = make_plan(profile, SelectionRequest("all"), **PLAN_SETTINGS)
    halves = [make_plan(profile, SelectionRequest("all"), shard_of=(i, 2), **PLAN_SETTINGS)
              for i in (1, 2)]
    cap = {e.case_id: full.budget_for(e).control_cap for e in full.entries}
    loads = [sum(cap[e.case_id] for e in h.entries) for h in halves]
    assert abs(loads[0] - loads[1]) <= max(cap.values())
    assert sorted(e.case_id for h in halves for e in h.entries) == sorted(e.case_id for e in full.entries)
    flat = [make_plan(profile, SelectionRequest("all"), budget_mode="decisions", shard_of=(i, 2),
                      **PLAN_SETTINGS) for i in (1, 2)]
    assert [len(h.entries) for h in flat] == [65, 65]  # equal caps: balanced by count
    assert halves[0].as_dict()["selection_cases"] == [e.case_id for e in full.entries]


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(SetupError, match="I/N"):
        parse_shard(text)


WORKER_TESTS = """
import json, os, pathlib, time, pytest

OUT = pathlib.Path({out!r})

@pytest.mark.parametrize("n", range(6))
def test_record_environment(n):
    worker = os.environ["PYTEST_XDIST_WORKER"]
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    egl = os.environ.get("MUJOCO_EGL_DEVICE_ID")
    with (OUT / f"{{worker}}-{{n}}.json").open("w") as f:
        json.dump({{"worker": worker, "gpu": gpu, "egl": egl}}, f)
    crash_marker = OUT / "crashed"
    if {crash} and gpu == "1" and not crash_marker.exists():
        crash_marker.write_text(worker)
        os._exit(1)   # the worker dies; xdist replaces it
    time.sleep({pause})
"""


def seen_workers(out: Path) -> dict[str, set[tuple[str | None, str | None]]]:
    by_worker: dict[str, set[tuple[str | None, str | None]]] = {}
    for path in out.glob("gw*.json"):
        record = json.loads(path.read_text())
        by_worker.setdefault(record["worker"], set()).add((record["gpu"], record["egl"]))
    return by_worker


@pytest.mark.parametrize("workers", [["-n", "2"], ["-n", "auto"], []], ids=["n2", "auto", "no-n"])
def test_each_worker_sees_exactly_one_gpu(pytester: pytest.Pytester, workers: list[str]) -> None:
    out = pytester.mkdir("out")
    pytester.makepyfile(test_env=WORKER_TESTS.format(out=str(out), crash=False, pause=0))
    result = pytester.runpytest_subprocess("--libero-gpus=0,1", *workers, "-p", "no:randomly")
    result.assert_outcomes(passed=6)
    by_worker = seen_workers(out)
    assert set(by_worker) == {"gw0", "gw1"}  # one worker per GPU, whatever -n said
    assert sorted(next(iter(v)) for v in by_worker.values()) == [("0", "0"), ("1", "1")]
    assert all(len(v) == 1 for v in by_worker.values())


def test_a_crashed_workers_replacement_keeps_its_gpu(pytester: pytest.Pytester) -> None:
    out = pytester.mkdir("out")
    tests = WORKER_TESTS.format(out=str(out), crash=True, pause=0.3).replace("range(6)", "range(24)")
    pytester.makepyfile(test_env=tests)
    result = pytester.runpytest_subprocess("--libero-gpus=0,1", "-n", "2")
    result.stdout.fnmatch_lines(["*replacing crashed worker*"])
    by_worker = seen_workers(out)
    crashed = (out / "crashed").read_text()
    replacements = set(by_worker) - {"gw0", "gw1"}
    assert replacements, by_worker
    for worker in replacements:
        assert by_worker[worker] == {("1", "1")}, by_worker  # the dead worker's GPU, not another
    gpus_in_use = Counter(next(iter(v))[0] for w, v in by_worker.items() if w != crashed)
    assert gpus_in_use == Counter({"0": 1, "1": 1})  # never two live workers on one GPU


def test_four_gpus_with_eight_workers_share_evenly(pytester: pytest.Pytester) -> None:
    out = pytester.mkdir("out")
    tests = WORKER_TESTS.format(out=str(out), crash=False, pause=0).replace("range(6)", "range(16)")
    pytester.makepyfile(test_env=tests)
    result = pytester.runpytest_subprocess("--libero-gpus=0,1,2,3", "-n", "8")
    result.assert_outcomes(passed=16)
    gpus = Counter(next(iter(v))[0] for v in seen_workers(out).values())
    assert gpus == Counter({"0": 2, "1": 2, "2": 2, "3": 2})


def test_bad_gpu_list_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-gpus=0,0", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*distinct GPU indices*"])
