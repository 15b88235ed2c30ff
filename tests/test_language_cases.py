"""Real LIBERO episodes of the semantic and object kinds and of the paraphrase companions,
each asserting its property against the twin in the same run: a semantic case or a
companion differs from its twin in the language alone; an object case in the images
alone (the settled physics is the twin's bit for bit). A second run repeats every byte;
verify re-executes them and catches an edited instruction. One policy call per case."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from perturbed_runs import copy_of, shared

from harness.runs import records_by_case, run_pytest
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.evidence.reader import read_observation_hashes, read_observations
from pytest_libero.perturb.kinds.semantic import rewritten
from pytest_libero.perturb.levels import perturb_identity
from pytest_libero.results.robustness import PARAPHRASE_ALONE, PARAPHRASE_PLACED

pytestmark = pytest.mark.simulator

TINY = ["--libero-profile=zero", "--libero-budget-mode=decisions", "--libero-max-policy-calls=1",
        "--libero-replan-interval=1", "--libero-track=rgb+proprio"]
TWIN = "libero_10-00"


def run(cwd: Path, run_id: str, *selection: str) -> tuple[Path, dict[str, dict[str, Any]]]:
    """A run of its own (full mode, the OOD scope); the development scope's runs are
    tests/perturbed_runs.py's, which test_perturb_cases.py reads too."""
    done = run_pytest(["-q", *TINY, *selection, f"--libero-run-id={run_id}"], cwd, timeout=900)
    folder = cwd / "libero-results" / "zero" / run_id
    assert (folder / "results.jsonl").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return folder, records_by_case(folder)


def first(record: dict[str, Any]) -> dict[str, Any]:
    """The first delivered observation, decoded from the case folder's lossless streams."""
    _, images, proprio = next(iter(read_observations(Path(record["evidence_dir"]))))
    return {"images": images, "proprio": proprio}


def delivered(record: dict[str, Any]) -> list[dict[str, Any]]:
    lines = (Path(record["evidence_dir"]) / "observations.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def same_images(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return sorted(a["images"]) == sorted(b["images"]) and all(
        np.array_equal(a["images"][k], b["images"][k]) for k in a["images"])


def difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int64) - b.astype(np.int64)).mean())


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The development scope's task 0 with this file's kinds (perturbed_runs.LANGUAGE) and
    test_perturb_cases.py's, one policy call of one control each."""
    return shared(tmp_path_factory, "perturbed")


def test_semantic_cases_change_the_language_alone(
    perturbed: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    _, found = perturbed
    twin = found[TWIN]
    level = 4  # level 1 runs in full mode: test_full_mode_runs_object_and_semantic_cases...
    record = found[f"{TWIN}~semantic{level}"]
    instruction = rewritten(TWIN, level)
    assert instruction != twin["entry"]["language"]
    assert record["entry"]["language"] == instruction  # the record keeps the instruction
    assert record["perturbation"]["parameters"]["instruction"] == instruction
    assert record["perturbation"]["applied"] == {"instruction_sent": instruction}
    assert same_images(first(record), first(twin))
    assert np.array_equal(first(record)["proprio"], first(twin)["proprio"])
    assert record["identity"]["settled_state_sha256"] == twin["identity"]["settled_state_sha256"]
    shown, native = delivered(record), delivered(twin)
    assert [line["language"] for line in shown] == [instruction]
    assert [{**line, "language": None} for line in shown] == [
        {**line, "language": None} for line in native]  # every other delivered byte


def test_object_cases_change_the_images_alone(
    perturbed: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    _, found = perturbed
    twin = found[TWIN]
    shown = first(twin)
    changes = []
    for level in (1, 4):
        record = found[f"{TWIN}~object{level}"]
        assert record["identity"]["settled_state_sha256"] == twin["identity"]["settled_state_sha256"]
        assert np.array_equal(first(record)["proprio"], shown["proprio"])
        assert record["entry"]["language"] == twin["entry"]["language"]
        applied = record["perturbation"]["applied"]["objects"]
        assert set(applied) == {"alphabet_soup_1", "tomato_sauce_1", "basket_1"}
        assert all(o["geoms"] > 0 for o in applied.values())
        assert all((o["texture"] is not None) == (level == 4) for o in applied.values())
        changes.append(difference(first(record)["images"]["agentview"], shown["images"]["agentview"]))
    assert 0.1 < changes[0] < changes[1], changes


def test_a_second_run_repeats_every_byte(
    perturbed: tuple[Path, dict[str, dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory,
) -> None:
    _, found = perturbed
    # The object kind is the one whose bytes are its own; a semantic case's images are
    # the twin's (asserted above) and its words the frozen table's. The second run holds
    # object:4 and test_perturb_cases.py's noise:2.
    _, again = shared(tmp_path_factory, "again")
    for case in (TWIN, f"{TWIN}~object4"):
        hashes = [(o.images, o.proprio, o.language)
                  for o in read_observation_hashes(Path(found[case]["evidence_dir"]))]
        assert hashes == [(o.images, o.proprio, o.language)
                          for o in read_observation_hashes(Path(again[case]["evidence_dir"]))]
        assert again[case].get("perturbation") == found[case].get("perturbation")
        assert again[case]["identity"] == found[case]["identity"]


def test_verify_passes_and_catches_an_edited_instruction(
    perturbed: tuple[Path, dict[str, dict[str, Any]]], tmp_path: Path,
) -> None:
    """One verify over two cases: the object case re-executes to the byte; the semantic
    case whose record says, in both of its accounts, that it sent another instruction is
    a mismatch against the installed instruction table, named by its field, before any
    re-execution (a semantic case that verifies: the full-mode test below)."""
    folder = copy_of(perturbed[0], tmp_path)  # edited below: the shared run stays as made
    results = folder / "results.jsonl"
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    for record in lines:
        if record["case"] == f"{TWIN}~semantic4":
            record["entry"]["language"] = "put the tomato sauce on the floor"
            episode = folder / "cases" / record["case"] / "episode.json"
            kept = json.loads(episode.read_text())
            kept["entry"]["language"] = record["entry"]["language"]
            episode.write_text(json.dumps(kept))
    results.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))
    cases = [f"--case={TWIN}~{kind}" for kind in ("object4", "semantic4")]
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(folder),
                           "-n", "2", *cases], capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    verdicts = {v["case"]: v for v in json.loads((folder / "verify.json").read_text())["cases"]}
    verified = verdicts[f"{TWIN}~object4"]
    assert verified["status"] == "verified" and verified["checked"]["images_compared"], verified
    edited = verdicts[f"{TWIN}~semantic4"]
    assert edited["status"] == "mismatch" and edited["difference"]["field"] == "entry.language"


def test_full_mode_runs_object_and_semantic_cases_from_a_later_state(tmp_path: Path) -> None:
    """Full mode, state 1 (one positioning reset before the episode's own): the object and
    semantic cases are fresh builds that reach the twin's settled state, each differs
    from the twin only where its kind says, and both re-execute under verify."""
    folder, found = run(tmp_path, "full", "--libero-mode=full", "--libero-scope=task_coverage",
                        "--libero-suite=libero_10", "--libero-task-ids=0", "--libero-init-states=1",
                        "--libero-perturb=object:1,semantic:1", "--libero-evidence=full")
    twin, shown = found[f"{TWIN}-s1"], first(found[f"{TWIN}-s1"])
    obj, said = found[f"{TWIN}-s1~object1"], found[f"{TWIN}-s1~semantic1"]
    for record in (twin, obj, said):
        assert record["identity"]["schedule"]["positioning_resets"] == 1, record["case"]
        assert record["identity"]["settled_state_sha256"] == twin["identity"]["settled_state_sha256"]
        assert np.array_equal(first(record)["proprio"], shown["proprio"])
    assert obj["entry"]["identity"] == said["entry"]["identity"] == perturb_identity("full")
    assert obj["entry"]["language"] == twin["entry"]["language"]
    assert difference(first(obj)["images"]["agentview"], shown["images"]["agentview"]) > 0.1
    assert said["entry"]["language"] == rewritten(TWIN, 1) != twin["entry"]["language"]
    assert same_images(first(said), shown)
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(folder), "-n", "2",
                           f"--case={TWIN}-s1~object1", f"--case={TWIN}-s1~semantic1"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = json.loads((folder / "verify.json").read_text())["cases"]
    assert sorted((v["case"], v["status"]) for v in verdicts) == [
        (f"{TWIN}-s1~object1", "verified"), (f"{TWIN}-s1~semantic1", "verified")]


def test_a_paraphrase_companion_is_the_twin_with_the_paraphrase(tmp_path: Path) -> None:
    folder, found = run(tmp_path, "ood", "--libero-scope=ood", "--libero-suite=libero_10_lan",
                        "--libero-task-ids=0")
    assert list(found) == [TWIN, "libero_10_lan-00", f"{TWIN}~paraphrase"]
    twin, lan, companion = found[TWIN], found["libero_10_lan-00"], found[f"{TWIN}~paraphrase"]
    paraphrase = load_catalog().suite_entries("libero_10_lan")[0].language
    assert lan["entry"]["language"] == companion["entry"]["language"] == paraphrase
    assert [line["language"] for line in delivered(companion)] == [paraphrase]
    assert companion["perturbation"]["parameters"] == {"instruction": paraphrase,
                                                       "source": "libero_10_lan-00"}
    assert same_images(first(companion), first(twin))  # the twin's scene and init state
    assert companion["identity"]["settled_state_sha256"] == twin["identity"]["settled_state_sha256"]
    assert lan["identity"]["settled_state_sha256"] != twin["identity"]["settled_state_sha256"]
    assert not same_images(first(lan), first(twin))  # LIBERO-PRO's own placements
    suites = json.loads((folder / "summary.json").read_text())["robustness"]["suites"]
    assert suites["libero_10~paraphrase"]["shows"] == PARAPHRASE_ALONE
    assert suites["libero_10_lan"]["shows"] == PARAPHRASE_PLACED
