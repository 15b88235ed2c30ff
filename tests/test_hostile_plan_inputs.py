"""``pytest-libero plan``'s inputs are untrusted (issue 60, classes R2 and R3): its probe
cache is read only as a bounded regular file of strict, plausible figures, else probed
over with one line saying why; its own numbers and a finished run's recorded timings
(``--from``) are finite and plausible, else one line and exit 4; and no wall time is
ever printed in 300 digits.

The probe cache is read in a child process of its own under a memory limit and a timeout
(before the fix, a cache linked to /dev/zero grew ``plan`` to 21.6 GB), the renderer's
fingerprint and the probe stubbed there. ``--from`` reads a real run folder (the plugin
with the scripted adapter, tests/decide_adapter.py), one record edited per row.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from decided_runs import run

from harness.hostile import Hostile
from harness.runs import run_folder
from pytest_libero.planning.command import plan_main
from pytest_libero.planning.probe import CACHE_VERSION
from pytest_libero.planning.report import duration
from pytest_libero.report.eta import duration_text

FIGURES = {"build_s": 3.0, "reset_s": 3.0, "physics_s": 0.01, "render_s": 0.12, "cpu_per_wall": 1.0}
GOOD = {"version": CACHE_VERSION, "scenes": {"libero_10": FIGURES},
        "renderer": {"renderer": "llvmpipe", "backend": "egl"}}
CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from pytest_libero.planning.probe import phase_costs
figures = json.loads(sys.argv[1])
said = []
costs = phase_costs(refresh=False, say=said.append, fingerprint=lambda: {"sha256": "a" * 64},
                    probe=lambda scenes, run: {"suites": {s: {**figures, "build_s": 2.0} for s in scenes}})
print(json.dumps({"said": said, "build_s": costs.default.build_s}))
"""
"""phase_costs as plan calls it, the probe giving a build of 2 s (a cached one is 3 s)."""


def cache_path(root: Path) -> Path:
    from pytest_libero.planning.probe import cache_key, machine

    return root / "pytest-libero" / f"probe-{cache_key(machine(), {'sha256': 'a' * 64})}.json"


def probed(root: Path) -> tuple[list[str], float]:
    env = {**os.environ, "XDG_CACHE_HOME": str(root)}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(FIGURES)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stdout + done.stderr
    found = json.loads(done.stdout)
    return found["said"], found["build_s"]


def written(text: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.write_text(text)
    return make


def figure(name: str, value: str) -> Callable[[Path], None]:
    return written(json.dumps(GOOD).replace(f'"{name}": {json.dumps(FIGURES[name])}',
                                             f'"{name}": {value}'))


def to_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def a_fifo(path: Path) -> None:
    os.mkfifo(path)


def too_long(path: Path) -> None:
    path.write_text(json.dumps({**GOOD, "padding": "x" * (1 << 20)}))


CACHES: list[tuple[str, Callable[[Path], None], str, str]] = [
    ("dev-zero", to_dev_zero, "the cache linked to /dev/zero (plan grew to 21.6 GB and was killed)",
     "is a character device, not a regular file"),
    ("fifo", a_fifo, "a FIFO in the cache's place (plan hung silently)", "is a FIFO, not a regular file"),
    ("too-long", too_long, "a cache file of 1 MiB", "more than a valid one"),
    ("a-list", written("[3.0, 3.0]"), "a JSON list (INTERNALERROR)",
     "it holds a list, not a table of figures"),
    ("renderer-text", written(json.dumps({**GOOD, "renderer": "llvmpipe"})),
     "`renderer` a string (INTERNALERROR)", "its renderer is 'llvmpipe', not a renderer fingerprint"),
    ("build-1e308", figure("build_s", "1e308"), "`build_s` 1e308 (OverflowError traceback, exit 0)",
     "scenes['libero_10'].build_s is 1e+308, not a figure from 0 to 3600 s"),
    ("render-1e300", figure("render_s", "1e300"), "`render_s` 1e300 (a 300-digit time printed)",
     "scenes['libero_10'].render_s is 1e+300, not a figure from 0 to 60 s"),
    ("build-true", figure("build_s", "true"), "`build_s: true` (read as 1 s)",
     "scenes['libero_10'].build_s is True, not a number"),
    ("build-huge-int", figure("build_s", "1" + "0" * 400), "`build_s` a whole number of 401 digits",
     f"scenes['libero_10'].build_s is 1{'0' * 36}..., not a figure from 0 to 3600 s"),
    ("nested", written("[" * 30_000), "30,000 nested lists (a RecursionError)", "RecursionError"),
    ("scenes-list", written(json.dumps({**GOOD, "scenes": [FIGURES]})), "`scenes` a list",
     "its scenes are [{'build_s': 3.0, 'reset_s': 3.0, 'ph..., not a table of 1 to 64 scene"),
    ("scene-text", written(json.dumps({**GOOD, "scenes": {"libero_10": "fast"}})),
     "a scene's figures a string", "scenes['libero_10'] is 'fast', not a table of figures"),
    ("too-many-scenes", written(json.dumps({**GOOD, "scenes": {str(n): FIGURES for n in range(65)}})),
     "65 scene families", "not a table of 1 to 64 scene families"),
    ("version-3", written(json.dumps({**GOOD, "version": "pytest-libero-plan-probe/3"})),
     "a cache of the format before scene families",
     "its version is 'pytest-libero-plan-probe/3', not pytest-libero-plan-probe/4"),
]


@pytest.mark.parametrize(("make", "said"), [
    pytest.param(make, said, id=row_id) for row_id, make, _, said in CACHES])
def test_a_probe_cache_that_is_no_bounded_file_of_figures_is_probed_over(
        make: Callable[[Path], None], said: str, tmp_path: Path) -> None:
    cached = cache_path(tmp_path)
    cached.parent.mkdir(parents=True)
    make(cached)
    told, build_s = probed(tmp_path)
    assert len(told) == 2 and told[0].startswith(f"the probe cache {cached} does not read ("), told
    assert told[0].endswith("); probing again") and said in told[0] and len(told[0]) < 400, told[0]
    assert told[1].startswith("probing this machine's phase costs")
    assert build_s == 2.0  # the probe's, not the cache's
    assert cached.is_file() and not cached.is_symlink()
    assert json.loads(cached.read_text())["scenes"]["libero_10"]["build_s"] == 2.0  # a regular file now


def test_a_good_cache_is_read_and_not_probed(tmp_path: Path) -> None:
    cached = cache_path(tmp_path)
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(GOOD))
    assert probed(tmp_path) == ([], 3.0)


SELECTION = ["--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
             "--libero-task-ids=0-3"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("finished")
    done = run(where, "--libero-task-ids=0-1", success="0")
    assert done.returncode == 1, done.stdout + done.stderr
    return run_folder(where / "libero-results")


def plan(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = plan_main(args)
    said = capsys.readouterr()
    return code, said.out, said.err


def edited(folder: Path, where: Path, case: str, change: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of ``folder`` whose record of ``case`` ``change`` edited in results.jsonl."""
    copy = where / "edited"
    shutil.copytree(folder, copy)
    records = [json.loads(line) for line in (copy / "results.jsonl").read_text().splitlines()]
    for record in records:
        if record["case"] == case:
            change(record)
    (copy / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return copy


def timing(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        record["timings"][name] = value
    return change


def latency(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        record["chunks"][0]["latency_s"] = value
    return change


def cap(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        record["budget"]["control_cap"] = value
    return change


RUNS: list[tuple[str, Callable[[dict[str, Any]], None], str, str, str]] = [
    ("setup-1e308", timing("setup_s", 1e308), "libero_90-01", "`--from` a run whose "
     "`timings.setup_s` is 1e308 (OverflowError traceback, exit 0)",
     "timings.setup_s is 1e+308, not a figure from 0 to 3600 s"),
    ("setup-negative", timing("setup_s", -1e9), "libero_90-01", "`--from` a run whose "
     "`timings.setup_s` is -1e9 (a plan of \"0s\")", "timings.setup_s is -1000000000.0, not a figure from 0"),
    ("episode-negative", timing("episode_s", -5.0), "libero_90-01", "`--from` a run whose "
     "`timings.episode_s` is -5", "timings.episode_s is -5.0, not a figure from 0 to 86400 s"),
    ("latency-text", latency("NaN"), "libero_90-00", "`--from` a run whose chunk latency is the "
     "string \"NaN\" (ValueError)", "chunk 1's latency_s is 'NaN', not a number"),
    ("latency-huge", latency(1e300), "libero_90-00", "`--from` a run whose chunk latency is 1e300",
     "chunk 1's latency_s is 1e+300, not a figure from 0 to 3600 s"),
    ("cap-zero", cap(0), "libero_90-00", "`--from` a run whose success has `budget.control_cap` 0 "
     "(ZeroDivisionError, exit 3)", "budget.control_cap is 0, not a count from 1 to 1,000,000,000"),
]


@pytest.mark.parametrize(("change", "case", "said"), [
    pytest.param(change, case, said, id=row_id) for row_id, change, case, _, said in RUNS])
def test_a_run_s_figure_that_is_no_plausible_duration_is_one_line(
        change: Callable[[dict[str, Any]], None], case: str, said: str, finished: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_libero.planning import load as machine_load

    busy = tmp_path / "loadavg"  # a busy machine's line must not join the refusal
    busy.write_text("9.50 9.00 9.00 3/300 4242\n")
    monkeypatch.setattr(machine_load, "LOADAVG", busy)
    folder = edited(finished, tmp_path, case, change)
    code, out, err = plan(["--from", str(folder), *SELECTION], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, out, len(lines)) == (4, "", 1), (code, out, err)
    assert lines[0].startswith(f"ERROR: --from {folder}: the record of {case!r}: "), lines[0]
    assert said in lines[0] and len(lines[0]) < 400, lines[0]


OPTIONS: list[tuple[str, list[str], str, str]] = [
    ("latency-1e309", ["--latency-ms", "1e309"], "`--latency-ms 1e309` (INTERNALERROR OverflowError, exit 0)",
     "--latency-ms='1e309' is not milliseconds from 0 to 3,600,000 (an hour per call)"),
    ("latency-1e300", ["--latency-ms", "1e300"], "`--latency-ms 1e300` (a 300-digit wall time)",
     "--latency-ms='1e300' is not milliseconds from 0 to 3,600,000 (an hour per call)"),
]


@pytest.mark.parametrize(("args", "said"), [
    pytest.param(args, said, id=row_id) for row_id, args, _, said in OPTIONS])
def test_the_plan_s_own_numbers_are_finite_and_plausible(
        args: list[str], said: str, finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan([*args, "--from", str(finished), *SELECTION], capsys)
    assert (code, out, err) == (4, "", f"pytest-libero plan: {said}\n")


def test_the_longest_plausible_plan_is_printed_in_a_few_characters(
        finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan(["--latency-ms", "3600000", "--from", str(finished), *SELECTION], capsys)
    assert code == 0, out + err
    assert max(len(line) for line in out.splitlines()) < 400, out
    for seconds in (1e300, float("inf"), float("nan"), -1.0):
        assert len(duration(seconds)) <= 12 and len(duration_text(seconds)) <= 12
    assert duration(1e300) == duration_text(1e300) == "over 100000h"
    assert duration(3725) == "1h 02m" and duration_text(3725) == "1h02m"


HOSTILE: list[Hostile] = [
    *(Hostile(2, tried, f'plan goes on (exit 0): "pytest-libero plan: the probe cache PATH does not '
              f'read (... {said} ...); probing again", then probes and caches a regular file',
              f"tests/test_hostile_plan_inputs.py::"
              f"test_a_probe_cache_that_is_no_bounded_file_of_figures_is_probed_over[{row_id}]")
      for row_id, _, tried, said in CACHES),
    *(Hostile(3, tried, f'exit 4, one line: "ERROR: --from RUN: the record of \'{case}\': {said}"',
              f"tests/test_hostile_plan_inputs.py::"
              f"test_a_run_s_figure_that_is_no_plausible_duration_is_one_line[{row_id}]")
      for row_id, _, case, tried, said in RUNS),
    *(Hostile(3, tried, f'exit 4, one line: "pytest-libero plan: {said}"',
              f"tests/test_hostile_plan_inputs.py::test_the_plan_s_own_numbers_are_finite_and_plausible[{row_id}]")
      for row_id, _, tried, said in OPTIONS),
    Hostile(3, "a wall time of 1e300 s, inf or NaN handed to the plan's and the live ETA's "
            "duration formatters", 'at most 12 characters: "over 100000h"',
            "tests/test_hostile_plan_inputs.py::test_the_longest_plausible_plan_is_printed_in_a_few_characters"),
]
