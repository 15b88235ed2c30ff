"""Numbers and names from the command line and the environment (issue 60, classes R10,
R12 and R13): export's OUT is a path the system can make, or one line before lerobot
loads; every number an option or a variable gives is read in ASCII decimal digits and
inside its bounds (int() reads "１/2" as 1/2, float() reads "nan"); and what the round's
wider sweep found (class R13): a dataset-level case whose controls.jsonl lost, repeated or
reordered a control (hashes updated) reached lerobot before it was refused; a path from
the environment no file system holds raised; a relative XDG_CACHE_HOME was used.

The run folder for export is a real one written without the simulator
(tests/scripted_runs.py); lerobot is not needed, since every refusal comes before it would
be imported. The plugin's options are given in-process through pytester, as
tests/test_hostile_options.py does, with the scripted adapter: each refusal is one line and
exit 4, before any case.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import decided_runs
import pytest
from cli_runs import in_process
from scripted_runs import make_run

from harness.hostile import Hostile
from pytest_libero import session
from pytest_libero.config.options import TRACKER_WAIT_VARIABLE
from pytest_libero.evidence.layout import DATASET
from pytest_libero.evidence.renderer import not_measured

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder, _ = make_run(tmp_path_factory.mktemp("run"))
    return folder


LONG = "a" * 5000
OUTS: list[tuple[str, str, str, str]] = [
    ("name-5000", f"/tmp/{LONG}", "`--lerobot` a path whose one name is 5,000 characters "
     "(a traceback: File name too long)", "cannot make /tmp/aaaa... [4805 more characters] (File name "
     "too long); name a new folder where this user can write"),
    ("path-6000", "/tmp/" + "b/" * 3000 + "x", "`--lerobot` a path of 6,006 characters in 3,001 "
     "folders", "cannot make /tmp/b/b/... [5806 more characters] (File name too long); name a new "
     "folder where this user can write"),
    ("empty", "", "`--lerobot ''` (read as the current folder: \". exists\")",
     "--lerobot is empty; name a new folder for the dataset"),
]


@pytest.mark.parametrize(("out", "said"), [pytest.param(out, said, id=row_id)
                                           for row_id, out, _, said in OUTS])
def test_export_refuses_an_out_the_system_cannot_make_before_lerobot_loads(
        out: str, said: str, run_dir: Path, tmp_path: Path) -> None:
    before = {p.name for p in Path("/tmp").iterdir()}
    lerobot = "lerobot" in sys.modules
    code, stdout, stderr = in_process(["export", str(run_dir), "--lerobot", out])
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert (code, stdout, len(lines)) == (2, "", 1), (code, stdout, stderr[-2000:])
    head, _, tail = said.partition("... [")
    if tail:  # the path echoed cut, with how much more it held
        head = head.replace("aaaa", "a" * 200).replace("b/b/", "b/" * 98)[:len("cannot make ") + 200]
    assert lines[0].startswith(f"pytest-libero export: {head}"), lines[0]
    assert lines[0].endswith(said.split("]")[-1] if tail else said) and len(lines[0]) < 400, lines[0]
    # Nothing made: no new entry (another worker may remove its own meanwhile).
    assert {p.name for p in Path("/tmp").iterdir()} - before == set()
    assert ("lerobot" in sys.modules) == lerobot


@pytest.fixture
def pytester_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    """In-process runs that never render (a value that gets that far takes no fingerprint)."""
    monkeypatch.setattr(session, "measure_for_cases", lambda *_: not_measured("not measured here"))
    yield pytester


def answer(pytester: pytest.Pytester, args: list[str]) -> tuple[int, str]:
    result = pytester.runpytest_inprocess(f"--libero-results={pytester.path / 'r'}", *args)
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-2000:]
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(lines) == 1, text[-2000:]
    assert not (pytester.path / "r").exists()  # before any case
    return int(result.ret), lines[0]


ZERO = ["--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
        "--libero-task-ids=0"]
SCRIPTED = [*decided_runs.SCRIPTED, "--libero-task-ids=0"]
"""The scripted adapter (tests/decide_adapter.py): a value that were let through would run
a case in milliseconds, never the simulator."""
OPTIONS: list[tuple[str, dict[str, str], list[str], str, str]] = [
    ("wait-1e10", {TRACKER_WAIT_VARIABLE: "1e10"}, ["--libero-mlflow=http://127.0.0.1:9"],
     f"`{TRACKER_WAIT_VARIABLE}=1e10` (passed the check, then overflowed the poll at the run's end)",
     f"{TRACKER_WAIT_VARIABLE}='1e10' is not a number of seconds above 0 (at most 86400, a day); "
     "unset it for the default (120 s)"),
    ("wait-fullwidth", {TRACKER_WAIT_VARIABLE: "１２０"}, ["--libero-mlflow=http://127.0.0.1:9"],
     f"`{TRACKER_WAIT_VARIABLE}=１２０` (fullwidth digits, read as 120)",
     f"{TRACKER_WAIT_VARIABLE}='１２０' is not a number of seconds above 0 (at most 86400, a day); "
     "unset it for the default (120 s)"),
    ("shard-fullwidth", {}, ["--libero-shard=１/2"],
     "`--libero-shard=１/2` (a fullwidth digit, read as 1/2)",
     "--libero-shard='１/2': write I/N with 1 <= I <= N <= "),
    ("task-ids-fullwidth", {}, ["--libero-task-ids=０-２"],
     "`--libero-task-ids=０-２` (read as 0-2)",
     "--libero-task-ids: cannot read '０-２'; write indices like 0,1,4 or a range like 0-4"),
    ("calls-fullwidth", {}, ["--libero-max-policy-calls=１０"],
     "`--libero-max-policy-calls=１０` (read as 10)",
     "--libero-max-policy-calls='１０' is not an integer (digits 0-9)"),
    ("calls-underscore", {}, ["--libero-max-policy-calls=1_0"],
     "`--libero-max-policy-calls=1_0` (read as 10)",
     "--libero-max-policy-calls='1_0' is not an integer (digits 0-9)"),
    ("gpus-fullwidth", {}, ["--libero-gpus=０"],
     "`--libero-gpus=０` (read as GPU 0)",
     "--libero-gpus='０': give distinct GPU indices, e.g. 0,1,2,3"),
    ("min-success-fullwidth", {}, ["--libero-min-success=０.５"],
     "`--libero-min-success=０.５` (read as 0.5)",
     "--libero-min-success='０.５' must be a number between 0 and 1"),
    ("timeout-fullwidth", {}, ["--libero-build-timeout=６０"],
     "`--libero-build-timeout=６０` (read as 60 s)",
     "--libero-build-timeout='６０' must be a positive number of seconds, at most 604800"),
]


@pytest.mark.parametrize(("env", "args", "said"), [
    pytest.param(env, args, said, id=row_id) for row_id, env, args, _, said in OPTIONS])
def test_a_number_not_in_ascii_digits_or_past_its_bound_is_one_line_before_any_case(
        env: dict[str, str], args: list[str], said: str, pytester_run: pytest.Pytester,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, line = answer(pytester_run, [*SCRIPTED, *args])
    assert code == pytest.ExitCode.USAGE_ERROR and said in line, line


COMMANDS: list[tuple[str, list[str], int, str, str]] = [
    ("plan-rate", ["plan", "--rate", "０.５", *ZERO], 4, "`pytest-libero plan --rate ０.５`",
     "pytest-libero plan: --rate='０.５' is not a rate from 0 to 1"),
    ("plan-latency", ["plan", "--latency-ms", "５０", *ZERO], 4, "`pytest-libero plan --latency-ms ５０`",
     "pytest-libero plan: --latency-ms='５０' is not milliseconds from 0 to 3,600,000"),
    ("merge-min-success", ["merge", "RUN", "--min-success", "０.５"], 2,
     "`pytest-libero merge RUN --min-success ０.５` (read as 0.5)",
     "argument --min-success: '０.５' is not a finite number in digits 0-9"),
    ("verify-jobs", ["verify", "RUN", "-n", "２"], 2, "`pytest-libero verify RUN -n ２` (read as 2)",
     "argument -n/--jobs: '２' is not a whole number in digits 0-9"),
    ("safety-threshold", ["safety", "RUN", "--threshold", "tilt_deg=３０"], 2,
     "`pytest-libero safety RUN --threshold tilt_deg=３０` (read as 30)",
     "--threshold 'tilt_deg=３０': write NAME=VALUE with a positive number"),
]


@pytest.mark.parametrize(("args", "code", "said"), [
    pytest.param(args, code, said, id=row_id) for row_id, args, code, _, said in COMMANDS])
def test_a_command_s_number_not_in_ascii_digits_is_refused(
        args: list[str], code: int, said: str, run_dir: Path, tmp_path: Path) -> None:
    got, out, err = in_process([str(run_dir) if a == "RUN" else a for a in args])
    assert got == code and said in err and "Traceback" not in err, (got, out, err)
    assert not (run_dir / "verify.json").exists()


@pytest.fixture(scope="module")
def dataset_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run at evidence level dataset: every control's images and controls.jsonl kept."""
    folder, _ = make_run(tmp_path_factory.mktemp("dataset"), level=DATASET)
    return folder


def reforged(folder: Path, where: Path, name: str, change: Callable[[list[str]], list[str]]) -> Path:
    """A copy of ``folder`` whose case libero_10-00's file ``name`` ``change`` edited line by
    line, its size and sha256 updated in results.jsonl and episode.json (as a forger would)."""
    copy = where / "damaged"
    shutil.copytree(folder, copy)
    damaged = copy / "cases" / "libero_10-00" / name
    damaged.write_text("".join(line + "\n" for line in change(damaged.read_text().splitlines())))
    files = {"bytes": damaged.stat().st_size, "sha256": hashlib.sha256(damaged.read_bytes()).hexdigest()}

    def fix(record: dict[str, Any]) -> dict[str, Any]:
        if record["case"] == "libero_10-00":
            record["evidence"]["files"][name] = files
        return record

    records = [fix(json.loads(line)) for line in (copy / "results.jsonl").read_text().splitlines()]
    (copy / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    episode = damaged.parent / "episode.json"
    episode.write_text(json.dumps(fix(json.loads(episode.read_text()))))
    return copy


DAMAGES: list[tuple[str, str, Callable[[list[str]], list[str]], str, str]] = [
    ("controls-missing", "controls.jsonl", lambda lines: lines[:1] + lines[2:],
     "a dataset-level case's controls.jsonl without its control 1, hashes updated (export went "
     "as far as loading lerobot)", "controls.jsonl: line 2 is control 2, not 1"),
    ("controls-twice", "controls.jsonl", lambda lines: lines[:2] + lines[1:],
     "controls.jsonl with control 1 kept twice, hashes updated (the same)",
     "controls.jsonl: line 3 is control 1, not 2"),
    ("controls-swapped", "controls.jsonl", lambda lines: [lines[1], lines[0], *lines[2:]],
     "controls.jsonl with controls 0 and 1 swapped, hashes updated (the same)",
     "controls.jsonl: line 1 is control 1, not 0"),
    ("controls-cut", "controls.jsonl", lambda lines: lines[:-1],
     "controls.jsonl without its last control, hashes updated (the same)",
     "controls.jsonl keeps 7 controls, but the record counts 7 executed after the settled scene "
     "(8 in all)"),
    ("actions-missing", "actions.jsonl", lambda lines: lines[:1] + lines[2:],
     "actions.jsonl without its call 2, hashes updated (already refused)",
     "actions.jsonl: call 3 was sent at control 4, but the clock sends it at 2"),
    ("actions-swapped", "actions.jsonl", lambda lines: [lines[1], lines[0], *lines[2:]],
     "actions.jsonl with calls 1 and 2 swapped, hashes updated (already refused)",
     "actions.jsonl: call 1 was sent at control 0, but the clock sends it at 4"),
]


@pytest.mark.parametrize(("name", "change", "said"), [
    pytest.param(name, change, said, id=row_id) for row_id, name, change, _, said in DAMAGES])
def test_a_dataset_case_with_damaged_controls_is_refused_before_lerobot_loads(
        name: str, change: Callable[[list[str]], list[str]], said: str, dataset_run: Path,
        tmp_path: Path) -> None:
    folder = reforged(dataset_run, tmp_path, name, change)
    lerobot = "lerobot" in sys.modules
    code, out, err = in_process(["export", str(folder), "--lerobot", str(tmp_path / "out")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, out, len(lines)) == (2, "", 1), (code, out, err)
    assert lines[0].startswith(f"pytest-libero export: case libero_10-00: {folder}/cases/libero_10-00 "
                               "is damaged (EvidenceError: ") and said in lines[0], lines[0]
    assert ("lerobot" in sys.modules) == lerobot and not (tmp_path / "out").exists()


def test_a_path_from_the_environment_no_file_system_holds_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "allure-results"
    results.mkdir()
    (results / "a-result.json").write_text("{}")
    monkeypatch.setenv("PYTEST_LIBERO_ALLURE", f"/tmp/{LONG}")
    code, out, err = in_process(["report", str(results), "-o", str(tmp_path / "report"),
                                 "--config", str(tmp_path / "allurerc.mjs")])
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, out, len(lines)) == (2, "", 1) and "Traceback" not in err, (code, out, err[-2000:])
    assert lines[0].startswith("pytest-libero report: PYTEST_LIBERO_ALLURE='/tmp/aaaa") and lines[0].endswith(
        "(5005 characters): File name too long; point it at Allure 3's allure executable or its "
        "cli.js, or unset it") and len(lines[0]) < 300, lines[0]


def test_a_libero_config_path_no_file_system_holds_leaves_the_mismatch_message_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_libero.catalog.inventory import InventoryMismatch, Mismatch

    monkeypatch.setenv("LIBERO_CONFIG_PATH", LONG)
    said = str(InventoryMismatch([Mismatch("libero_10", 0, "TASK", "x.bddl", "sha256", "a", "b")]))
    assert said.startswith("Installed LIBERO files do not match") and LONG not in said


def test_a_relative_cache_home_is_not_where_the_probe_is_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_libero.planning.probe import cache_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert cache_dir() == Path.home() / ".cache" / "pytest-libero"  # the XDG rule: ignored
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache" / "pytest-libero"


HOSTILE: list[Hostile] = [
    *(Hostile(10, tried, f'exit 2, nothing made, lerobot not imported, one line (a path cut to 200 '
              f'characters): "pytest-libero export: {said}"',
              "tests/test_hostile_numbers.py::"
              f"test_export_refuses_an_out_the_system_cannot_make_before_lerobot_loads[{row_id}]")
      for row_id, _, tried, said in OUTS),
    *(Hostile(12, tried, f'exit 4 before any case, one line: "ERROR: {said}'
              f'{"..." if said.endswith(" ") else ""}"',
              "tests/test_hostile_numbers.py::"
              f"test_a_number_not_in_ascii_digits_or_past_its_bound_is_one_line_before_any_case[{row_id}]")
      for row_id, _, _, tried, said in OPTIONS),
    *(Hostile(12, tried, f'exit {code}: "{said}"',
              f"tests/test_hostile_numbers.py::test_a_command_s_number_not_in_ascii_digits_is_refused[{row_id}]")
      for row_id, _, code, tried, said in COMMANDS),
    *(Hostile(13, tried, 'export: exit 2, nothing written, lerobot not imported, one line: "pytest-libero '
              f'export: case libero_10-00: RUN/cases/libero_10-00 is damaged (EvidenceError: {said} ...): '
              'copy the case folder again from where the run wrote it"',
              "tests/test_hostile_numbers.py::"
              f"test_a_dataset_case_with_damaged_controls_is_refused_before_lerobot_loads[{row_id}]")
      for row_id, _, _, tried, said in DAMAGES),
    Hostile(13, "`PYTEST_LIBERO_ALLURE` a path of 5,005 characters for `pytest-libero report` (a "
            "traceback: File name too long)", 'exit 2, one line, the value cut: "pytest-libero report: '
            "PYTEST_LIBERO_ALLURE='/tmp/aaa…aaa' (5005 characters): File name too long; point it at "
            'Allure 3\'s allure executable or its cli.js, or unset it"',
            "tests/test_hostile_numbers.py::test_a_path_from_the_environment_no_file_system_holds_is_one_line"),
    Hostile(13, "`LIBERO_CONFIG_PATH` of 5,000 characters while the installed LIBERO files mismatch "
            "the inventory (the refusal itself raised File name too long)", "the mismatch's own "
            "message, naming no config file in effect",
            "tests/test_hostile_numbers.py::"
            "test_a_libero_config_path_no_file_system_holds_leaves_the_mismatch_message_whole"),
    Hostile(13, "`XDG_CACHE_HOME=relative/cache` for the plan's probe cache (a cache written "
            "under whatever folder plan was started in)", "ignored, as the XDG rule says of a "
            "relative path: the cache is ~/.cache/pytest-libero",
            "tests/test_hostile_numbers.py::test_a_relative_cache_home_is_not_where_the_probe_is_cached"),
]
