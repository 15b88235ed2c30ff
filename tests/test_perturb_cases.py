"""Real LIBERO episodes under generated perturbations, each asserting its property against
the twin in the same run; verify re-executes them and catches an edited parameter.
One policy call of one control per case."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from perturbed_runs import LANGUAGE, PERTURB, copy_of, shared

from pytest_libero.evidence.reader import read_observation_hashes, read_observations
from pytest_libero.perturb.levels import GENERATOR, perturb_identity, table

pytestmark = pytest.mark.simulator

SHARED_RUN = f"{PERTURB},{LANGUAGE}"
"""The run read here holds test_language_cases.py's kinds too (tests/perturbed_runs.py)."""


def first(record: dict[str, Any]) -> dict[str, Any]:
    """The first delivered observation, decoded from the case folder's lossless streams."""
    _, images, proprio = next(iter(read_observations(Path(record["evidence_dir"]))))
    return {"images": images, "proprio": proprio}


def delivered_keys(record: dict[str, Any]) -> list[tuple[str, ...]]:
    """What each delivery showed the policy: its keys, cameras and instruction."""
    lines = (Path(record["evidence_dir"]) / "observations.jsonl").read_text().splitlines()
    return [(*sorted(line), *sorted(line["images"]), line["language"]) for line in map(json.loads, lines)]


def difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int64) - b.astype(np.int64)).mean())


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    return shared(tmp_path_factory, "perturbed")


def test_each_kind_changes_what_it_should_and_nothing_else(
    perturbed: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    _, found = perturbed
    assert len(found) == 1 + len(SHARED_RUN.split(","))
    twin = found["libero_10-00"]
    shown = first(twin)
    settled = twin["identity"]["settled_state_sha256"]
    for case, record in found.items():
        assert record["outcome"] == "failure", case  # every one ran to its cap
    for spec in PERTURB.split(","):  # this file's kinds (language's are asserted there)
        case = "libero_10-00~{}{}".format(*spec.split(":"))
        record = found[case]
        assert record["entry"]["twin"] == "libero_10-00"
        assert record["entry"]["identity"] == perturb_identity("fast")
        assert record["entry"]["language"] == twin["entry"]["language"]
        assert record["perturbation"]["generator"] == GENERATOR
        assert record["safety"]["verdict"] == twin["safety"]["verdict"] == "vacuous"
        # The policy's side of the contract: the same keys, the entry's own instruction.
        assert delivered_keys(record) == delivered_keys(twin)

    camera = first(found["libero_10-00~camera2"])
    assert difference(camera["images"]["agentview"], shown["images"]["agentview"]) > 1.0
    assert np.array_equal(camera["images"]["robot0_eye_in_hand"], shown["images"]["robot0_eye_in_hand"])
    assert found["libero_10-00~camera2"]["identity"]["settled_state_sha256"] == settled

    light = first(found["libero_10-00~light2"])
    for name in ("agentview", "robot0_eye_in_hand"):
        assert difference(light["images"][name], shown["images"][name]) > 1.0
    assert found["libero_10-00~light2"]["identity"]["settled_state_sha256"] == settled

    robot = found["libero_10-00~robot2"]
    joints = np.asarray(first(robot)["proprio"])[:7] - np.asarray(shown["proprio"])[:7]
    assert np.abs(joints).max() >= table()["robot"][2]["offset_rad"]
    assert robot["perturbation"]["contacts_at_first_observation"] == []
    assert robot["identity"]["settled_state_sha256"] != settled

    noise = first(found["libero_10-00~noise2"])
    for name in ("agentview", "robot0_eye_in_hand"):
        assert difference(noise["images"][name], shown["images"][name]) > 0.5
    assert found["libero_10-00~noise2"]["identity"]["settled_state_sha256"] == settled

    for kind in ("camera", "light"):
        one, four = (difference(first(found[f"libero_10-00~{kind}{v}"])["images"]["agentview"],
                                shown["images"]["agentview"]) for v in (1, 4))
        assert one < four, (kind, one, four)


def test_noise_repeats_bit_for_bit_in_another_run(
    perturbed: tuple[Path, dict[str, dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory,
) -> None:
    _, found = perturbed
    _, again = shared(tmp_path_factory, "again")  # noise:2 and test_language_cases.py's object:4
    for case in ("libero_10-00", "libero_10-00~noise2"):
        hashes = [(o.images, o.language)
                  for o in read_observation_hashes(Path(found[case]["evidence_dir"]))]
        assert hashes == [(o.images, o.language)
                          for o in read_observation_hashes(Path(again[case]["evidence_dir"]))]
    assert again["libero_10-00~noise2"]["perturbation"] == found["libero_10-00~noise2"]["perturbation"]


def test_verify_re_executes_perturbed_cases_and_catches_an_edited_parameter(
    perturbed: tuple[Path, dict[str, dict[str, Any]]], tmp_path: Path,
) -> None:
    run_dir = copy_of(perturbed[0], tmp_path)  # edited below: the shared run stays as made
    kinds = [f"--case=libero_10-00~{kind}2" for kind in ("camera", "light", "robot", "noise")]
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(run_dir),
                           "-n", "2", *kinds], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 of 4 cases verified" in done.stdout
    # Edited in both accounts of the case alike: re-execution draws it again and differs.
    results = run_dir / "results.jsonl"
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    for record in lines:
        if record["case"] == "libero_10-00~camera2":
            record["perturbation"]["parameters"]["azimuth_deg"] += 1.0
            (run_dir / "cases" / record["case"] / "episode.json").write_text(json.dumps(record))
    results.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(run_dir),
                           "--case", "libero_10-00~camera2"], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    verdicts = json.loads((run_dir / "verify.json").read_text())
    [verdict] = verdicts["cases"]
    assert verdict["status"] == "mismatch" and verdict["difference"]["field"] == "perturbation"


def test_verify_re_executes_a_record_of_schema_1(
    perturbed: tuple[Path, dict[str, dict[str, Any]]], tmp_path: Path,
) -> None:
    """A folder written before record schema 2 (its perturbed entries repeat kind and
    level at the top) re-executes the same: verify reads the entry through the converter."""
    source, _ = perturbed
    old = Path(shutil.copytree(source, tmp_path / "zero" / "schema1",
                               ignore=shutil.ignore_patterns("verify.json")))
    run = json.loads((old / "run.json").read_text())
    run["record_schema"] = "pytest-libero-record/1"
    (old / "run.json").write_text(json.dumps(run))
    lines = [json.loads(line) for line in (old / "results.jsonl").read_text().splitlines()]
    for record in lines:
        if "perturbation" in record["entry"]:
            record["entry"].update(record["entry"]["perturbation"])  # kind and level at the top
            episode = old / "cases" / record["case"] / "episode.json"
            kept = json.loads(episode.read_text())
            kept["entry"] = record["entry"]  # the case folder's own record, of that schema too
            episode.write_text(json.dumps(kept))
    (old / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(old),
                           "--case", "libero_10-00~robot2"], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 cases verified" in done.stdout
