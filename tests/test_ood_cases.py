"""Real LIBERO-PRO episodes through the plugin: the instruction a policy gets, the init
state a case starts from, the pairing with native twins, verify and merge on OOD cases,
and a tampered OOD file that stops the run. Caps are one or two policy calls."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from recording import calls, records, write_profile

from harness.runs import records_by_case, run_pytest
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.inventory import installed_files, load_states, states_sha256
from pytest_libero.protocol.identity import ood_identity, protocol_identity
from pytest_libero.results.mcnemar import mcnemar_two_sided_p

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

TINY = ["--libero-budget-mode=decisions", "--libero-max-policy-calls=1", "--libero-replan-interval=1"]
DATA = Path(__file__).parent / "data"


def bddl_text_language(bddl_file: str) -> str:
    """The BDDL's ``(:language ...)``, read here, independently of the catalog."""
    path, _ = installed_files(bddl_file, "unused")
    match = re.search(r"\(:language\s+([^)]*)\)", path.read_text(encoding="utf-8"))
    assert match is not None
    return match.group(1).strip()


def state0_sha256(init_states_file: str) -> str:
    _, path = installed_files("unused.bddl", init_states_file)
    return states_sha256(np.ascontiguousarray(load_states(path)[0], dtype=np.float64))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_libero.cli", *args],
                          capture_output=True, text=True, timeout=900)


def test_semantic_cases_deliver_their_bddl_instruction_from_their_own_init_state(
    pytester: pytest.Pytester,
) -> None:
    """libero_goal_task-00 beside its twin libero_goal-00, and a position-sweep case beside
    libero_object-00; then verify re-executes all four. (A ``_lan`` case and its
    paraphrase companion run in the next test and in tests/test_language_cases.py.)"""
    profile = write_profile(pytester)
    result = pytester.runpytest(
        f"--libero-profile={profile}", *TINY, "--libero-scope=ood",
        "--libero-suite=libero_goal_task,libero_object_temp_y0.3",
        "--libero-task-ids=0",
    )
    result.assert_outcomes(failed=4)
    found = {r["case"]: r for r in records(pytester, "recording")}
    assert list(found) == ["libero_object-00", "libero_goal-00", "libero_object_temp_y0.3-00",
                           "libero_goal_task-00"]
    seen = {c["language"]: c for c in calls(pytester)}
    twin = found["libero_goal-00"]
    for case in ("libero_goal_task-00",):
        record = found[case]
        entry = record["entry"]
        instruction = bddl_text_language(entry["bddl_file"])
        assert instruction != twin["entry"]["language"]
        assert entry["language"] == instruction and entry["language_source"] == "bddl"
        assert instruction in seen  # what the policy was given
        assert seen[instruction]["fields"] == seen[twin["entry"]["language"]]["fields"]
        assert (entry["family"], entry["kind"], entry["level"]) == ("libero_pro", "semantic", 1)
        assert entry["twin"] == "libero_goal-00" and entry["identity"] == ood_identity("fast")
        assert record["identity"]["state_sha256"] == state0_sha256(entry["init_states_file"])
        assert record["identity"]["state_sha256"] != twin["identity"]["state_sha256"]
        assert record["identity"]["init_state_index"] == 0
        delivered = json.loads((Path(record["evidence_dir"]) / "observations.jsonl")
                               .read_text().splitlines()[0])
        assert delivered["language"] == instruction
        assert set(record["safety"]) >= {"verdict", "events"}  # the safety axis runs on OOD
    sweep = found["libero_object_temp_y0.3-00"]
    assert sweep["outcome"] == "failure" and sweep["entry"]["level"] == 3
    assert sweep["entry"]["language"] == found["libero_object-00"]["entry"]["language"]
    assert sweep["counters"]["executed_controls"] == 1
    run = Path(twin["evidence_dir"]).parent.parent
    run_json = json.loads((run / "run.json").read_text())
    assert run_json["protocol_identity"] == protocol_identity("fast")  # native: unchanged
    assert run_json["ood_identity"] == ood_identity("fast")
    robustness = json.loads((run / "summary.json").read_text())["robustness"]
    assert robustness["kinds"]["semantic"]["paired"]["pairs"] == 1
    assert robustness["kinds"]["position"]["paired"]["neither"] == 1
    assert (run / "robustness.svg").read_text().startswith("<svg")

    done = cli("verify", str(run))
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = json.loads((run / "verify.json").read_text())
    assert {c["case"]: c["status"] for c in verdicts["cases"]} == dict.fromkeys(found, "verified")


def test_a_replayed_success_against_its_ood_twins_and_the_merge_agree(tmp_path: Path) -> None:
    """The replay that solves libero_object-00, run on it and on two of its perturbations:
    the table equals what the records' outcomes give by hand, and merge recomputes it."""
    run_pytest(["-q", "--libero-profile=replay",
                f"--libero-policy-option=actions={DATA / 'replay_libero_object_00.npy'}",
                "--libero-scope=ood", "--libero-suite=libero_object_lan,libero_object_swap",
                "--libero-task-ids=0", "--libero-run-id=replayed",
                "--libero-video-stride=5"], tmp_path, timeout=900)  # a video frame a decision: none is read
    run = tmp_path / "libero-results" / "replay" / "replayed"
    found = records_by_case(run)
    assert found["libero_object-00"]["outcome"] == "success"  # the replay solves the twin
    cells = {"both": 0, "only_twin": 0, "only_perturbed": 0, "neither": 0}
    # The paraphrase alone, in the twin's scene and init state: the replay solves it too.
    assert found["libero_object-00~paraphrase"]["outcome"] == "success"
    for case in ("libero_object_lan-00", "libero_object_swap-00", "libero_object-00~paraphrase"):
        assert found[case]["outcome"] in ("success", "failure")
        cells["both" if found[case]["outcome"] == "success" else "only_twin"] += 1
    summary = json.loads((run / "summary.json").read_text())
    ood_successes = cells["both"]
    by_kind: dict[str, Any] = summary["robustness"]["kinds"]
    assert sum(k["paired"]["pairs"] for k in by_kind.values()) == 3
    assert sum(k["paired"]["both"] for k in by_kind.values()) == cells["both"]
    assert sum(k["paired"]["only_twin"] for k in by_kind.values()) == cells["only_twin"]
    assert sum(k["successes"] for k in by_kind.values()) == ood_successes
    for kind, case in (("semantic", "libero_object_lan-00"), ("position", "libero_object_swap-00"),
                       ("paraphrase", "libero_object-00~paraphrase")):
        paired = by_kind[kind]["paired"]
        lost = found[case]["outcome"] == "failure"
        assert paired["drop_points"] == (100.0 if lost else 0.0)
        assert paired["mcnemar_p"] == mcnemar_two_sided_p(int(lost), 0)
    assert summary["robustness"]["in_distribution"]["rate"] == 1.0

    done = cli("merge", str(run), "--out", str(tmp_path / "merged"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "robustness: OOD (LIBERO-PRO) and perturbed cases beside their twins" in done.stdout
    merged = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert merged["robustness"] == summary["robustness"]
    assert (tmp_path / "merged" / "robustness.svg").read_text() == (run / "robustness.svg").read_text()


def test_a_tampered_ood_bddl_stops_the_run_naming_the_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = load_catalog().suite_entries("libero_goal_swap")[2]
    source, _ = installed_files(entry.bddl_file, entry.init_states_file)
    tree = pytester.path / "tree"
    for suite in ("libero_goal", "libero_goal_swap"):
        shutil.copytree(source.parent.parent / suite, tree / suite)
    tampered = tree / entry.bddl_file
    tampered.write_text(tampered.read_text().replace("(:language", "(:language very", 1))
    config = pytester.path / "libero-config"
    config.mkdir()
    (config / "config.yaml").write_text(json.dumps({"bddl_files": str(tree)}))  # JSON is YAML
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(config))
    result = pytester.runpytest_subprocess("--libero-profile=zero", *TINY, "--libero-scope=ood",
                                           "--libero-suite=libero_goal_swap", "--libero-task-ids=2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert f"libero_goal_swap[2] {entry.name}: bddl_sha256 differs" in text
    assert str(tampered) in text
    assert not (pytester.path / "libero-results").exists()  # no case ran, no folder made
