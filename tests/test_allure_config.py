"""``pytest-libero report``'s Allure 3 config, and the command's answers to bad input.

Fast: no report is rendered here (tests/test_allure_report.py does that in a browser).
The results folder is a real one, written by allure-pytest for a one-line test; the
tree test has allure-pytest report a fast-mode and two full-mode records.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic import allure_results

from harness.runs import run_pytest
from pytest_libero.catalog.case_id import CaseId
from pytest_libero.protocol.errors import SetupError
from pytest_libero.report.allure import CATEGORIES
from pytest_libero.report.allure_config import (
    ALLURE_ENV,
    CONFIG_NAME,
    HEADER,
    TREE_LABELS,
    allure3_config,
    check_results,
    find_allure,
    tree_path,
    write_config,
)

# Where CI's npm install puts Allure 3 (.ci/run).
CI_NODE_MODULES = Path("/tmp/pytest-libero-tools/allure3/node_modules")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An allure-pytest results folder with one passed test."""
    root = tmp_path_factory.mktemp("results")
    (root / "test_one.py").write_text("def test_one():\n    pass\n")
    done = run_pytest(["-q", "-p", "no:libero", f"--alluredir={root / 'allure-results'}",
                       str(root / "test_one.py")], root, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "allure-results"


def report(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, with no Allure 3 to be found unless env names one."""
    empty = cwd / "empty-path"
    empty.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "pytest_libero.cli", "report", *args],
        capture_output=True, text=True, cwd=cwd, timeout=120, env={"PATH": str(empty), **env},
    )


def loaded(path: Path) -> object:
    """The config as Allure 3 gets it: the module's default export."""
    text = path.read_text()
    assert text.startswith(HEADER)
    body = text[len(HEADER):].strip()
    assert body.startswith("export default ") and body.endswith(";")
    return json.loads(body[len("export default "):-1])


def test_config_groups_by_suite_labels_and_carries_the_categories(tmp_path: Path) -> None:
    config = allure3_config()
    assert config["plugins"] == {
        "awesome": {"options": {"groupBy": ["parentSuite", "suite", "subSuite"]}}
    }
    # The same two categories as the Allure 2 categories.json.
    assert [(rule["name"], rule["matchers"]["statuses"]) for rule in config["categories"]["rules"]] \
        == [(c["name"], c["matchedStatuses"]) for c in CATEGORIES] \
        == [("Infrastructure errors", ["broken"]), ("Native failures", ["failed"])]
    assert loaded(write_config(tmp_path / "sub" / CONFIG_NAME)) == config


def test_config_imports_as_an_es_module(tmp_path: Path) -> None:
    """Node itself loads the file, as Allure 3 does (a dynamic import of its default)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node: apt-get install -y nodejs")
    path = write_config(tmp_path / CONFIG_NAME)
    script = "import(process.argv[1]).then(m => console.log(JSON.stringify(m.default)))"
    done = subprocess.run([node, "-e", script, path.as_uri()], capture_output=True, text=True,
                          timeout=60, check=True)
    assert json.loads(done.stdout) == allure3_config()


def test_config_rewrites_its_own_file_and_keeps_a_users(tmp_path: Path) -> None:
    path = tmp_path / CONFIG_NAME
    path.write_text(HEADER + "export default {};\n")
    assert loaded(write_config(path)) == allure3_config()
    theirs = 'export default { name: "mine" };\n'
    path.write_text(theirs)
    refused = "was not written by pytest-libero; it is left as it is: pass --config"
    with pytest.raises(SetupError, match=refused):
        write_config(path)
    assert path.read_text() == theirs
    with pytest.raises(SetupError, match="is a folder"):
        write_config(tmp_path)


def test_check_results(tmp_path: Path, results: Path) -> None:
    check_results(results)
    with pytest.raises(SetupError, match="is not a folder.*--alluredir="):
        check_results(tmp_path / "missing")
    with pytest.raises(SetupError, match=r"not an Allure results folder .*-result\.json.*--alluredir"):
        check_results(tmp_path)


def test_find_allure_refuses_what_is_not_allure_3(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match=f"{ALLURE_ENV}=.*is not Allure 3 .*Python 3"):
        find_allure({ALLURE_ENV: sys.executable, "PATH": ""}, tmp_path)
    with pytest.raises(SetupError, match="no such file"):
        find_allure({ALLURE_ENV: str(tmp_path / "allure"), "PATH": ""}, tmp_path)
    script = tmp_path / "cli.js"
    script.write_text("")
    with pytest.raises(SetupError, match="node is not on PATH"):
        find_allure({ALLURE_ENV: str(script), "PATH": str(tmp_path)}, tmp_path)
    assert find_allure({"PATH": str(tmp_path)}, tmp_path) is None


def test_find_allure_takes_a_local_npm_install_and_skips_other_allures(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not (CI_NODE_MODULES / ".bin" / "allure").is_file():
        pytest.skip("no Allure 3: npm install --prefix /tmp/pytest-libero-tools/allure3 allure@3.18.0")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "allure").symlink_to(sys.executable)  # an `allure` on PATH that is not 3.x
    search_path = f"{bin_dir}:{Path(node).parent}"
    assert find_allure({"PATH": search_path}, tmp_path) is None
    (tmp_path / "node_modules").symlink_to(CI_NODE_MODULES)  # `npm install allure` here
    local = tmp_path / "node_modules" / ".bin" / "allure"
    assert find_allure({"PATH": search_path}, tmp_path) == [str(local)]
    entry = CI_NODE_MODULES / "allure" / "cli.js"
    assert find_allure({ALLURE_ENV: str(entry), "PATH": search_path}, tmp_path) == [
        str(Path(node).parent / "node"), str(entry)
    ]


def test_report_refuses_a_folder_without_results(tmp_path: Path) -> None:
    for folder in ("missing", "."):
        done = report(tmp_path, folder)
        assert done.returncode == 2
        assert done.stderr.startswith(f"pytest-libero report: {folder} ")
        assert f"run pytest with --alluredir={folder} first" in done.stderr
    assert not (tmp_path / CONFIG_NAME).exists()  # nothing written for bad input


def test_report_refuses_to_overwrite_a_users_config(tmp_path: Path, results: Path) -> None:
    (tmp_path / CONFIG_NAME).write_text("export default {};\n")
    done = report(tmp_path, str(results))
    assert done.returncode == 2
    assert f"{CONFIG_NAME} exists and was not written by pytest-libero" in done.stderr


def test_report_refuses_a_wrong_allure(tmp_path: Path, results: Path) -> None:
    done = report(tmp_path, str(results), **{ALLURE_ENV: sys.executable})
    assert done.returncode == 2
    assert f"{ALLURE_ENV}='{sys.executable}' is not Allure 3" in done.stderr


def test_report_without_allure_writes_the_config_and_says_what_to_run(
    tmp_path: Path, results: Path
) -> None:
    done = report(tmp_path, str(results), "-o", "out")
    assert done.returncode == 1, done.stderr
    assert loaded(tmp_path / CONFIG_NAME) == allure3_config()
    assert "Allure 3 was not found, so no report was generated." in done.stdout
    assert "npm install allure@3.18.0" in done.stdout
    assert (f"npx --yes allure@3.18.0 generate --config {CONFIG_NAME} {results} -o out"
            in done.stdout)
    assert not (tmp_path / "out").exists()


# --- the tree the config groups by: fast and full mode ------------------------------------

TREE_CONFTEST = """
import json
from pathlib import Path

import pytest

from pytest_libero.report.allure import report_case

HERE = Path(__file__).parent
RECORDS = json.loads((HERE / "records.json").read_text())


@pytest.fixture
def libero_case(libero_entry):
    record = RECORDS[libero_entry]
    run_dir = HERE / ("full-run" if "init_state" in record["entry"] else "fast-run")
    report_case(record, run_dir / "cases" / libero_entry)
    return record
"""

TREE_TESTS = """
import pytest


@pytest.mark.parametrize("libero_entry", {cases!r})
def test_libero_task(libero_case, libero_entry):
    assert libero_case["outcome"] == "success"
"""


def _tree_record(case: str, state: int | None) -> dict[str, object]:
    case_id = CaseId.parse(case)
    entry: dict[str, object] = {
        "suite": case_id.suite, "index": case_id.index, "name": "KITCHEN_SCENE3_turn_on_the_stove",
        "language": "turn on the stove", "bddl_file": "x.bddl", "init_states_file": "x.pruned_init",
    }
    if state is not None:
        entry["init_state"] = state
    return {
        "case": case, "entry": entry, "profile": "zero", "evidence_class": "infrastructure",
        "track": "rgb", "outcome": "success", "summary": "success at control 8",
        "budget": {"mode": "decisions", "control_cap": 10, "max_policy_calls": 2,
                   "replan_interval": 5},
        "counters": {}, "chunks": [], "error": None, "started_at": 1.0e9,
        "timings": {"setup_s": 1.0, "episode_s": 1.0}, "worker": "main", "gpu": None,
    }


def test_tree_is_libero_suite_task_in_fast_mode_and_suite_task_state_in_full_mode(
    tmp_path: Path,
) -> None:
    records = {
        "libero_10-03": _tree_record("libero_10-03", None),
        "libero_10-03-s0": _tree_record("libero_10-03-s0", 0),
        "libero_10-03-s17": _tree_record("libero_10-03-s17", 17),
    }
    partial = ["init states 0,17 of 0-49", "budget mode decisions, not the reference horizons"]
    (tmp_path / "conftest.py").write_text(TREE_CONFTEST)
    (tmp_path / "test_tree.py").write_text(TREE_TESTS.format(cases=list(records)))
    (tmp_path / "records.json").write_text(json.dumps(records))
    for run, plan in (("fast-run", {"mode": "fast", "partial": []}),
                      ("full-run", {"mode": "full", "partial": partial})):
        (tmp_path / run).mkdir()
        (tmp_path / run / "run.json").write_text(json.dumps({"plan": plan}))
    results = allure_results(tmp_path)

    def labels(case: str, name: str) -> list[str]:
        return [label["value"] for label in results[case]["labels"] if label["name"] == name]

    assert allure3_config()["plugins"]["awesome"]["options"]["groupBy"] == list(TREE_LABELS)
    assert tree_path(results["libero_10-03"]) == (
        "LIBERO", "libero_10", "KITCHEN_SCENE3_turn_on_the_stove")
    assert tree_path(results["libero_10-03-s17"]) == (
        "libero_10", "libero_10-03 KITCHEN_SCENE3_turn_on_the_stove", "state 17")
    assert tree_path(results["libero_10-03-s0"])[:2] == tree_path(results["libero_10-03-s17"])[:2]

    assert labels("libero_10-03", "mode") == ["fast"]
    assert "partial" not in labels("libero_10-03", "tag")
    assert labels("libero_10-03-s17", "mode") == ["full"]
    assert labels("libero_10-03-s17", "init_state") == ["17"]
    assert {"mode:full", "partial"} <= set(labels("libero_10-03-s17", "tag"))
    assert labels("libero_10-03-s17", "partial") == ["; ".join(partial)]
    assert "**Partial full-mode run:** init states 0,17" in results["libero_10-03-s17"]["description"]
    shown = {p["name"]: p["value"] for p in results["libero_10-03-s17"]["parameters"]
             if not p.get("excluded")}
    assert shown["init state"] == "17"
    # Each state is its own history line.
    assert results["libero_10-03-s0"]["historyId"] != results["libero_10-03-s17"]["historyId"]


# --- history: every case its own test, a variant never a retry of its twin --------------

HISTORY_TESTS = """
import pytest


@pytest.mark.parametrize("libero_entry", {cases!r})
def test_libero_task(libero_case, libero_entry):
    assert libero_case["case"] == libero_entry
"""


def _variant_record(case: str) -> dict[str, object]:
    """A record of any case id, its entry as record schema 2 writes it."""
    case_id = CaseId.parse(case)
    record = _tree_record(case, case_id.state)
    entry: dict[str, object] = dict(record["entry"])  # type: ignore[call-overload]
    entry.update(family="libero", language_source="task_name")
    if case_id.variant is not None:
        entry.update(perturbation={"kind": case_id.variant.kind, "level": case_id.variant.level},
                     twin=str(case_id.base))
    elif "_swap" in case_id.suite:
        twin = CaseId(case_id.suite.removesuffix("_swap"), case_id.index, case_id.state)
        entry.update(family="libero_pro", kind="position", level=1, twin=str(twin))
    return {**record, "entry": entry}


def test_a_twin_and_its_perturbed_cases_are_separate_tests_in_the_report(tmp_path: Path) -> None:
    cases = ["libero_object-00", "libero_object-00~camera2", "libero_object-00~robot2",
             "libero_object_swap-00", "libero_10-00-s17", "libero_10-00-s17~camera2"]
    records = {case: _variant_record(case) for case in cases}
    (tmp_path / "conftest.py").write_text(TREE_CONFTEST)
    (tmp_path / "test_history.py").write_text(HISTORY_TESTS.format(cases=cases))
    (tmp_path / "records.json").write_text(json.dumps(records))
    results = allure_results(tmp_path)
    assert sorted(results) == sorted(cases)
    history = {case: results[case]["historyId"] for case in cases}
    assert len(set(history.values())) == len(cases), history
    # Before case ids keyed history, the three libero_object-00 cases shared one id (Allure
    # showed one test, "retried"); the native and OOD ones keep theirs, so their history
    # carries over from reports written before.
    assert history["libero_object-00"] == "3687064ed98e2031a8b3e6b28f1f2df4"
    assert history["libero_object_swap-00"] == "6f88d0ec68a5141dfa127dd59be731dd"
    assert history["libero_10-00-s17"] == "609fba3fec8d2e7b1bb90975936a9dc1"

    def shown(case: str) -> dict[str, str]:
        return {p["name"]: p["value"] for p in results[case]["parameters"] if not p.get("excluded")}

    # A native case keeps exactly the key it had (its history carries over); a variant
    # adds its tag, whatever its kind.
    assert shown("libero_object-00") == {
        "suite": "'libero_object'", "index": "0", "profile": "'zero'", "track": "'rgb'",
        "budget cap": "'10 controls = 2 calls x 5 (decisions)'"}
    assert shown("libero_object-00~robot2") == {**shown("libero_object-00"), "variant": "'robot2'"}
    assert shown("libero_10-00-s17~camera2") == {**shown("libero_10-00-s17"), "variant": "'camera2'"}
