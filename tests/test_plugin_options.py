"""The plugin without the simulator: options, ini keys, collection, usage errors."""

from __future__ import annotations

import json

import pytest
from scripted_policies import TESTS_DIR

from harness.runs import run_pytest
from pytest_libero.catalog.entries import load_catalog

pytest_plugins = ["pytester"]


def test_help_lists_every_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    for flag in ("profile", "scope", "suite", "task-ids", "mode", "budget-mode",
                 "max-policy-calls", "replan-interval", "track", "results", "run-id"):
        result.stdout.fnmatch_lines([f"*--libero-{flag}*"])
    result.stdout.fnmatch_lines(["*libero_profile (string)*"])


def test_endpoint_help_names_both_schemes(pytester: pytest.Pytester) -> None:
    """GR00T's endpoints are tcp://, openpi-style ones ws://: the help says both."""
    text = " ".join(" ".join(pytester.runpytest("--help").stdout.lines).split())
    assert "ws://HOST:PORT for openpi-style websocket servers" in text
    assert "tcp://HOST:PORT for GR00T's ZeroMQ server" in text


def test_scope_all_collects_130_cases_in_native_order(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-profile=zero", "--libero-scope=all", "--collect-only", "-q")
    expected = [f"test_libero.py::test_libero_task[{e.case_id}]" for e in load_catalog().entries]
    lines = [line for line in result.stdout.lines if "::test_libero_task[" in line]
    assert lines == expected
    assert result.ret == 0


def test_ini_keys_mirror_options(pytester: pytest.Pytester) -> None:
    pytester.makeini("""
        [pytest]
        libero_profile = zero
        libero_scope = task_coverage
        libero_suite = libero_object
        libero_task_ids = 2-4
    """)
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "*test_libero_task[[]libero_object-02]",
        "*test_libero_task[[]libero_object-03]",
        "*test_libero_task[[]libero_object-04]",
        "3 tests collected*",
    ])


def test_cli_overrides_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nlibero_profile = zero\nlibero_scope = all\n")
    result = pytester.runpytest("--libero-scope=smoke", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["2 tests collected*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--libero-init-states=0-3"], "*--libero-init-states needs --libero-mode=full*"),
        (["--libero-mode=full", "--libero-init-states=50"], "*init states 0-49; got ?50?*"),
        (["--libero-evidence=some"], "*--libero-evidence='some' is unknown; allowed: full, replayable*"),
        (["--libero-scope=huge"], "*--libero-scope='huge' is unknown; allowed: smoke, development*"),
        (["--libero-scope=task_coverage", "--libero-suite=libero_10"], "*needs both*"),
        (["--libero-scope=task_coverage", "--libero-suite=libero_11", "--libero-task-ids=0"],
         "*not a LIBERO suite*"),
        (["--libero-scope=development", "--libero-task-ids=7"], "*ids 0-4; got [[]7]*"),
        (["--libero-budget-mode=forever"], "*allowed: horizon, decisions*"),
        (["--libero-max-policy-calls=0", "--libero-budget-mode=decisions"], "*at least 1*"),
        (["--libero-replan-interval=x"], "*not an integer*"),
        (["--libero-track=depth"], "*allowed: rgb, rgb+proprio*"),
        (["--libero-policy-option=chunk"], "*write KEY=VALUE*"),
        (["--libero-policy-option=chunk=0"], "*chunk must be at least 1*"),
        (["--libero-min-safe-success=1.5"],
         "*--libero-min-safe-success='1.5' must be a number between 0 and 1*"),
    ],
)
def test_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest("--libero-profile=zero", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_replay_without_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-profile=replay")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs an action file: --libero-policy-option actions=PATH*"])


def test_without_profile_no_episode_runs(pytester: pytest.Pytester) -> None:
    from pytest_libero.plugin import conformance_dir

    result = pytester.runpytest(str(conformance_dir()), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no --libero-profile given: no LIBERO episode runs*"])


def test_collection_does_not_import_the_simulator(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
        import sys
        def pytest_collection_finish(session):
            loaded = sorted(m for m in ("robosuite", "mujoco", "libero.libero.envs") if m in sys.modules)
            print("SIMULATOR-MODULES", loaded)
    """)
    result = pytester.runpytest_subprocess("--libero-profile=zero", "--libero-scope=all",
                                           "--collect-only", "-q", "-s")
    result.stdout.fnmatch_lines(["SIMULATOR-MODULES []"])


def test_run_folder_is_never_reused_and_collect_only_writes_none(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A policy whose episodes never start: both cases error at once, no simulator built.
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    pytester.syspathinsert(TESTS_DIR)
    profile = pytester.makefile(".toml", unreachable="""
        name = "unreachable"
        [policy]
        factory = "scripted_policies:ResetFails"
    """)
    # In-process cases: no forkserver compiling a scene that no case of this run builds.
    args = [f"--libero-profile={profile}", "--libero-run-id=fixed", "--libero-results=out",
            "--libero-isolation=none"]
    assert pytester.runpytest(*args, "--collect-only").ret == 0
    assert not (pytester.path / "out").exists()  # listing cases writes nothing
    first = pytester.runpytest(*args)
    first.assert_outcomes(errors=2)
    run_json = json.loads((pytester.path / "out" / "unreachable" / "fixed" / "run.json").read_text())
    assert run_json["plan"]["cases"] == ["libero_10-00", "libero_10-01"]
    assert run_json["plan"]["evidence_class"] == "capability"
    again = pytester.runpytest(*args)
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    again.stderr.fnmatch_lines(["*already exists; a run never overwrites another*"])
    clash = pytester.runpytest(f"--libero-profile={profile}", "--libero-run-id=x",
                               f"--libero-resume={pytester.path / 'out' / 'unreachable' / 'fixed'}")
    assert clash.ret == pytest.ExitCode.USAGE_ERROR
    clash.stderr.fnmatch_lines(["*--libero-resume continues its own folder; drop --libero-run-id*"])


def test_gpus_need_xdist(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "no:xdist", "--libero-gpus=0,1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--libero-gpus needs pytest-xdist*"])


def test_profile_from_the_repository_root_runs_the_conformance_suite() -> None:
    """`pytest --libero-profile=zero` in this checkout collects cases, not tests/."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = run_pytest(["--libero-profile=zero", "--collect-only", "-q"], root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_libero.py::test_libero_task[libero_10-00]" in done.stdout
    assert "2 tests collected" in done.stdout


SETTINGS_WATCH = '''
import json, pytest
from pathlib import Path

READS = []

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    original = config.getoption
    def watched(name, *args, **kwargs):
        if str(name).startswith("libero_") or str(name).startswith("--libero"):
            READS.append(str(name))
        return original(name, *args, **kwargs)
    config.getoption = watched

def pytest_unconfigure(config):
    Path("reads.json").write_text(json.dumps(READS))
'''


def test_settings_are_read_once_and_handed_to_the_cases(pytester: pytest.Pytester) -> None:
    """After pytest_configure no libero option is read again: two cases run on the
    settings resolved once (config/settings.py)."""
    from test_adapters import ADAPTERS

    pytester.makepyfile(adapters_under_test=ADAPTERS)
    pytester.makeconftest(SETTINGS_WATCH)
    pytester.syspathinsert()
    result = pytester.runpytest("--libero-profile=zero", "--libero-isolation=none",
                                "--libero-adapter=adapters_under_test:OpensHalfAnEpisode",
                                "--libero-scope=task_coverage", "--libero-suite=libero_10",
                                "--libero-task-ids=0,1")
    result.assert_outcomes(errors=2)  # the half episode errors each case: they did run
    assert json.loads((pytester.path / "reads.json").read_text()) == []
