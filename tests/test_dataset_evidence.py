"""Evidence level ``dataset`` keeps both cameras' images at every control, and changes
nothing else (issue 50, item 1).

The same real case (libero_10 task 0, the seeded random policy, three calls of five
controls) runs at levels full and dataset: what the policy was sent, what ran, the
record and the verdict are the same; the dataset case folder also holds one image per
camera per control, decoded back from its lossless streams, equal to the delivered
images wherever a call was sent, and verify re-executes it. An adapter whose episodes
cannot give every control's images errors each case in one line instead.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runs import in_process
from decided_runs import run as scripted_run
from test_verify import rehash

from harness.runs import run_folder, run_pytest
from pytest_libero.evidence.controls import read_control_frames
from pytest_libero.evidence.reader import evidence_level, read_observation_hashes, read_observations
from pytest_libero.results.layout import case_path

pytestmark = pytest.mark.simulator

CASE = "libero_10-00"
RUN = ["-q", "--libero-profile=random", "--libero-scope=task_coverage", "--libero-suite=libero_10",
       "--libero-task-ids=0", "--libero-budget-mode=decisions", "--libero-max-policy-calls=3",
       "--libero-replan-interval=5", "--libero-track=rgb+proprio"]
VARYING = ("timings", "started_at", "pid", "renders", "evidence", "evidence_level", "evidence_dir", "worker",
           "nodeid")
"""What two runs of one case may differ in: when and where it ran, and what it kept."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("dataset-evidence")
    found = {}
    for level in ("full", "dataset"):
        done = run_pytest([*RUN, f"--libero-evidence={level}", f"--libero-run-id={level}"], where,
                          timeout=900)
        assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout + done.stderr
        found[level] = where / "libero-results" / "random" / level
    return found


def record(folder: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((case_path(folder, CASE) / "episode.json").read_text())
    return found


def comparable(found: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in found.items() if k not in VARYING}
    kept["chunks"] = [{k: v for k, v in c.items() if k != "latency_s"} for c in kept["chunks"]]
    return kept


def test_the_level_changes_nothing_the_policy_was_sent_or_the_episode_did(runs: dict[str, Path]) -> None:
    full, dataset = (case_path(runs[level], CASE) for level in ("full", "dataset"))
    for name in ("actions.jsonl", "observations.jsonl"):
        assert (full / name).read_bytes() == (dataset / name).read_bytes(), name
    assert comparable(record(runs["full"])) == comparable(record(runs["dataset"]))
    results = [json.loads((runs[level] / "results.jsonl").read_text())["outcome"] for level in runs]
    assert results == ["failure", "failure"]
    plans = {level: json.loads((runs[level] / "run.json").read_text())["plan"] for level in runs}
    assert plans["dataset"]["evidence"] == "dataset" and plans["dataset"]["render"] == "all"
    assert plans["full"]["render"] == "consumed"
    assert plans["full"]["selection_cases"] == plans["dataset"]["selection_cases"]


def test_every_control_s_images_are_kept_and_agree_with_the_delivered_ones(runs: dict[str, Path]) -> None:
    folder = case_path(runs["dataset"], CASE)
    assert evidence_level(folder) == "dataset"
    kept = {control: (images, proprio) for control, images, proprio in read_control_frames(folder)}
    controls = {control: images for control, (images, _) in kept.items()}
    executed = record(runs["dataset"])["counters"]["executed_controls"]
    assert sorted(controls) == list(range(executed + 1)) and executed == 15
    at = {seen.call: seen.executed_controls for seen in read_observation_hashes(folder)}
    for call, images, proprio in read_observations(folder):
        assert proprio is not None and np.array_equal(proprio, kept[at[call]][1])
        assert set(images) == set(controls[at[call]]) == {"agentview", "robot0_eye_in_hand"}
        for camera, image in images.items():
            assert np.array_equal(image, controls[at[call]][camera]), (call, camera)
    wrist = [controls[c]["robot0_eye_in_hand"] for c in range(executed + 1)]
    assert all(not np.array_equal(a, b) for a, b in zip(wrist, wrist[1:], strict=False))  # the arm moves
    summary = record(runs["dataset"])["evidence"]
    assert summary["level"] == "dataset" and summary["controls"]["count"] == executed + 1
    kept = {"controls.jsonl", "controls.agentview.mkv", "controls.robot0_eye_in_hand.mkv"}
    assert kept <= set(summary["files"])
    assert not (case_path(runs["full"], CASE) / "controls.jsonl").exists()


def test_a_dataset_level_run_verifies_every_control_s_images(runs: dict[str, Path]) -> None:
    code, out, err = in_process(["verify", str(runs["dataset"])])
    assert code == 0 and f"{CASE} VERIFIED" in out and "every control's images compared" in out, out + err
    [verdict] = json.loads((runs["dataset"] / "verify.json").read_text())["cases"]
    assert verdict["checked"]["control_images"] == 16


def test_a_control_image_swapped_with_its_hashes_updated_is_a_mismatch(
        runs: dict[str, Path], tmp_path: Path) -> None:
    """Control 7's wrist image replaced by control 6's (its frame and sha256 in
    controls.jsonl, the file's hash updated in both records): re-execution finds it."""
    copy = tmp_path / "forged"
    shutil.copytree(runs["dataset"], copy)
    index = case_path(copy, CASE) / "controls.jsonl"
    lines = [json.loads(line) for line in index.read_text().splitlines()]
    lines[7]["images"]["robot0_eye_in_hand"] = lines[6]["images"]["robot0_eye_in_hand"]
    index.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rehash(copy, CASE, "controls.jsonl")
    code, out, err = in_process(["verify", str(copy)])
    assert code == 1, out + err
    assert f"{CASE} MISMATCH: robot0_eye_in_hand (every-control image) differs at control 7" in out, out


def test_an_adapter_without_every_control_s_images_errors_each_case_in_one_line(tmp_path: Path) -> None:
    done = scripted_run(tmp_path, "--libero-task-ids=0-1", "--libero-evidence=dataset")
    assert done.returncode == 1, done.stdout + done.stderr
    records = [json.loads(line) for line in
               (run_folder(tmp_path / "libero-results") / "results.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["errored", "errored"]
    for found in records:
        error = found["error"]
        assert error["kind"] == "evidence", error
        assert "--libero-evidence=dataset keeps every control's images, but the adapter" in error["message"]
        assert "has no scene() to give them; run it at evidence level full" in error["message"]
