"""A real run exported as a LeRobot dataset in the lerobot venv, loaded back with
``LeRobotDataset(repo_id, root=OUT)`` and compared with the run's own evidence (issue 43).

The run is the shipped ``demo`` profile on libero_spatial tasks 0 and 1 with the latency
perturbation at level 2, on the proprio track, 16 policy calls of 5 controls: task 0
succeeds (68 controls), its twin under a 2-control delay fails at the call cap with every
decision-time control a hold, and task 1 and its twin error (no demonstration for them).
The export runs in the session's lerobot venv (tests/lerobot_venv.py) through the real
command line; what lerobot loads back is compared, frame by frame, with the case folders
read here: images by their recorded sha256, proprio, executed actions, flags, task text.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from venvs import clean_env, run

from harness.runs import run_folder, run_pytest
from pytest_libero.evidence.reader import read_actions, read_observation_hashes, read_observations
from pytest_libero.results.layout import case_path

ROOT = Path(__file__).resolve().parents[1]
READ_DATASET = ROOT / "tests" / "tools" / "read_lerobot_dataset.py"
RUN_ARGS = ("--libero-profile=demo", "--libero-scope=task_coverage", "--libero-suite=libero_spatial",
            "--libero-task-ids=0,1", "--libero-perturb=latency:2", "--libero-track=rgb+proprio",
            "--libero-budget-mode=decisions", "--libero-max-policy-calls=16")
SUCCESS, DELAYED = "libero_spatial-00", "libero_spatial-00~latency2"
ERRORED = ("libero_spatial-01", "libero_spatial-01~latency2")

pytestmark = [pytest.mark.lerobot, pytest.mark.install, pytest.mark.simulator]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("demo-run")
    done = run_pytest([*RUN_ARGS, f"--libero-results={where / 'results'}"], where, timeout=1200)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]  # a failure, errors
    return run_folder(where / "results", "demo")


def lerobot_home(where: Path) -> dict[str, str]:
    """Offline, with empty Hugging Face homes: the export needs nothing but the folder."""
    return clean_env(HF_HUB_OFFLINE="1", HF_HOME=str(where / "hf"),
                     HF_LEROBOT_HOME=str(where / "lerobot"))


def export(python: Path, run_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run([str(python), "-m", "pytest_libero.cli", "export", str(run_dir), "--lerobot",
                str(out), *extra], 900, f"exporting {run_dir}", env=lerobot_home(out.parent))


def load(python: Path, repo_id: str, out: Path, *extra: str) -> dict[str, Any]:
    done = run([str(python), str(READ_DATASET), repo_id, str(out), *extra], 600,
               f"loading {out} with LeRobotDataset", env=lerobot_home(out.parent))
    loaded: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def expected_action(case_dir: Path, call: int, control: int) -> np.ndarray:
    """What ran at the control call ``call`` was sent at, read from actions.jsonl by hand:
    the synchronous demo runs its own chunk's first action there; under the 2-control
    delay the robot holds there (no motion, the gripper the previous chunk left)."""
    chunks = {c.call: c for c in read_actions(case_dir)}
    own = chunks[call]
    if own.delay_controls == 0:
        assert own.sent_at_control == control and own.first_executed_index == 0
        assert own.actions is not None
        return own.actions[0]
    hold = np.zeros(7)
    previous = chunks.get(call - 1)
    if previous is not None and previous.actions is not None:
        first = previous.first_executed_index or 0
        hold[6] = previous.actions[first + previous.executed - 1][6]
    else:
        hold[6] = -1.0
    return hold


def check_episode(frames: list[dict[str, Any]], case_dir: Path, success: bool) -> None:
    """Every frame against the case folder: one per call here (each call's control ran)."""
    hashes = list(read_observation_hashes(case_dir))
    proprios = {call: proprio for call, _, proprio in read_observations(case_dir)}
    assert [f["call"] for f in frames] == [h.call for h in hashes]
    for number, (frame, seen) in enumerate(zip(frames, hashes, strict=True)):
        assert frame["frame_index"] == number and frame["timestamp"] == pytest.approx(number / 20)
        assert frame["control"] == seen.executed_controls
        assert frame["observation.images.image"] == seen.images["agentview"]
        assert frame["observation.images.image2"] == seen.images["robot0_eye_in_hand"]
        proprio = proprios[seen.call]
        assert proprio is not None and frame["observation.state"] == proprio.astype(np.float32).tolist()
        action = expected_action(case_dir, seen.call, seen.executed_controls)
        assert frame["action"] == action.astype(np.float32).tolist(), (seen.call, frame["action"])
        last = number == len(frames) - 1
        assert (frame["next.done"], frame["next.success"]) == (last, last and success)
        assert frame["task"] == seen.language


def test_a_run_exported_as_a_lerobot_dataset_loads_back_as_its_evidence(
    demo_run: Path, lerobot_python: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dataset"
    done = export(lerobot_python, demo_run, out)
    for case in ERRORED:
        assert f"skipped {case}: errored (policy)" in done.stdout, done.stdout
    repo_id = f"pytest-libero/{demo_run.name}"
    assert done.stdout.strip().endswith(f"as LeRobotDataset {repo_id!r} at {out}; skipped 2 cases")
    loaded = load(lerobot_python, repo_id, out)
    assert (loaded["fps"], loaded["codebase_version"], loaded["episodes"]) == (20, "v3.0", 2)
    assert loaded["features"]["observation.images.image"] == {"dtype": "image", "shape": [256, 256, 3]}
    assert loaded["features"]["observation.state"] == {"dtype": "float32", "shape": [9]}
    assert loaded["features"]["action"] == {"dtype": "float32", "shape": [7]}
    records = {json.loads(line)["case"]: json.loads(line)
               for line in (demo_run / "results.jsonl").read_text().splitlines()}
    for number, case in enumerate((SUCCESS, DELAYED)):
        frames = [f for f in loaded["frames"] if f["episode_index"] == number]
        check_episode(frames, case_path(demo_run, case), success=case == SUCCESS)
        assert {f["task"] for f in frames} == {records[case]["entry"]["language"]}
    delayed = [f for f in loaded["frames"] if f["episode_index"] == 1]
    assert all(f["action"][:6] == [0.0] * 6 for f in delayed)  # every frame a hold
    meta = json.loads((out / "meta" / "pytest_libero.json").read_text())
    assert [(e["case"], e["outcome"], e["cause"], e["perturbation"]) for e in meta["episodes"]] == [
        (SUCCESS, "success", "success", None),
        (DELAYED, "failure", "policy_call_cap", {"kind": "latency", "level": 2, "source": "generated"})]
    assert {e["run_id"] for e in meta["episodes"]} == {demo_run.name}
    assert meta["episodes"][1]["held_frames"] == len(delayed)
    assert [s["case"] for s in meta["skipped"]] == list(ERRORED)

    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.rglob("*") if p.is_file()}
    again = subprocess.run([str(lerobot_python), "-m", "pytest_libero.cli", "export", str(demo_run),
                            "--lerobot", str(out)], capture_output=True, text=True, timeout=300,
                           env=lerobot_home(tmp_path))
    assert again.returncode == 2 and again.stderr.startswith(f"pytest-libero export: {out} exists"), (
        again.stdout + again.stderr)
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.rglob("*") if p.is_file()} == before


def test_videos_are_lerobot_s_encoding_with_their_psnr_printed(
    demo_run: Path, lerobot_python: Path, tmp_path: Path
) -> None:
    out = tmp_path / "videos"
    done = export(lerobot_python, demo_run, out, "--videos", "--repo-id", "local/videos")
    psnr = [line for line in done.stdout.splitlines() if line.startswith("PSNR of the ")]
    assert len(psnr) == 2, done.stdout
    for line in psnr:  # "PSNR of the agentview video ...: overall 38.66 dB, lowest 36.41 dB"
        overall = float(line.split("overall ")[1].split(" dB")[0])
        assert 25 < overall < 80, line
    assert sorted(p.parent.parent.name for p in (out / "videos").rglob("*.mp4")) == [
        "observation.images.image", "observation.images.image2"]
    loaded = load(lerobot_python, "local/videos", out, "--video-backend", "pyav")
    assert loaded["features"]["observation.images.image"]["dtype"] == "video"
    meta = json.loads((out / "meta" / "pytest_libero.json").read_text())
    assert meta["videos"] is True and set(meta["psnr_db"]) == {"agentview", "robot0_eye_in_hand"}
    episodes = {f["episode_index"] for f in loaded["frames"]}
    assert episodes == {0, 1} and len(loaded["frames"]) == sum(e["frames"] for e in meta["episodes"])
