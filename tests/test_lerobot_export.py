"""Real runs exported as LeRobot datasets in the lerobot venv, loaded back with
``LeRobotDataset(repo_id, root=OUT)`` and compared with the runs' own evidence (issues 43, 50).

Every frame's timestamp is its simulated time (control / 20 s), in both layouts:

* decision frames: the shipped ``demo`` profile on libero_spatial tasks 0 and 1 with the
  latency perturbation at level 2, on the proprio track, 16 policy calls of K = 5
  controls: task 0 succeeds (68 controls), its twin under a 2-control delay fails at the
  call cap, task 1 and its twin error (no demonstration for them). Exported at 4 fps,
  each frame's action the 5 actions run from its control (the delayed twin's first two
  holds). The same demo at K = 1 is one frame per control at 20 fps.
* every control: the demo's task 0 and its latency twin at ``--libero-evidence=dataset``,
  one frame per executed control at 20 fps.

The export runs in the session's lerobot venv (tests/lerobot_venv.py) through the real
command line; what lerobot loads back is compared, frame by frame, with the case folders
read here: images by their recorded sha256, proprio, executed actions (by hand from
actions.jsonl), flags, task text, timestamps; and ``delta_timestamps`` on the action
returns the actions that ran at those simulated times.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from venvs import clean_env, run

from harness.runs import run_folder, run_pytest
from pytest_libero.evidence.controls import read_control_frames
from pytest_libero.evidence.reader import read_actions, read_observation_hashes, read_observations
from pytest_libero.results.layout import case_path

ROOT = Path(__file__).resolve().parents[1]
READ_DATASET = ROOT / "tests" / "tools" / "read_lerobot_dataset.py"
DEMO = ("--libero-profile=demo", "--libero-scope=task_coverage", "--libero-suite=libero_spatial",
        "--libero-track=rgb+proprio", "--libero-budget-mode=decisions")
RUN_ARGS = (*DEMO, "--libero-task-ids=0,1", "--libero-perturb=latency:2", "--libero-max-policy-calls=16")
SUCCESS, DELAYED = "libero_spatial-00", "libero_spatial-00~latency2"
ERRORED = ("libero_spatial-01", "libero_spatial-01~latency2")

pytestmark = [pytest.mark.lerobot, pytest.mark.install, pytest.mark.simulator]


def demo(where: Path, *args: str) -> Path:
    done = run_pytest([*args, f"--libero-results={where / 'results'}"], where, timeout=1200)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]  # a failure, errors
    return run_folder(where / "results", "demo")


RUNS = {
    "demo-run": RUN_ARGS,
    "k1-run": (*DEMO, "--libero-task-ids=0", "--libero-max-policy-calls=12", "--libero-replan-interval=1"),
    "dataset-run": (*DEMO, "--libero-task-ids=0", "--libero-perturb=latency:2",
                    "--libero-max-policy-calls=16", "--libero-evidence=dataset"),
}
"""The runs the tests export, by the folder each is made in."""


@pytest.fixture(scope="session", autouse=True)
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Path]]]:
    """Each run made in the background, one after another, from the module's first test
    on: they need no lerobot, so they run while the session's lerobot venv is built (or
    another worker builds it), minutes of package downloads, instead of after it.
    Autouse, so that it starts before that session fixture."""
    with ThreadPoolExecutor(1) as pool:
        yield {name: pool.submit(demo, tmp_path_factory.mktemp(name), *args) for name, args in RUNS.items()}


@pytest.fixture(scope="module")
def demo_run(runs: dict[str, Future[Path]]) -> Path:
    return runs["demo-run"].result()


@pytest.fixture(scope="module")
def every_control_run(runs: dict[str, Future[Path]]) -> Path:
    return runs["dataset-run"].result()


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


def executed(case_dir: Path, controls: int) -> list[list[float]]:
    """What ran at each control, read from actions.jsonl by hand: a reply's actions from
    ``sent_at_control + first_executed_index`` on, one a control; elsewhere the hold (no
    motion, the last gripper command sent, -1 before any)."""
    ran: dict[int, tuple[np.ndarray, float]] = {}
    for chunk in read_actions(case_dir):
        rows = chunk.executed_actions
        if rows is None or chunk.actions is None or chunk.sent_at_control is None:
            continue
        first = chunk.first_executed_index or 0
        for i, row in enumerate(rows):
            ran[chunk.sent_at_control + first + i] = (row, float(chunk.actions[first + i][6]))
    found, gripper = [], -1.0
    for control in range(controls):
        if control in ran:
            found.append(ran[control][0].astype(np.float32).tolist())
            gripper = ran[control][1]
        else:
            found.append(np.array([0.0] * 6 + [gripper], dtype=np.float32).tolist())
    return found


def controls_of(run_dir: Path, case: str) -> int:
    record = json.loads((case_path(run_dir, case) / "episode.json").read_text())
    return int(record["counters"]["executed_controls"])


def check_decision_frames(frames: list[dict[str, Any]], case_dir: Path, controls: int,
                          success: bool, interval: int) -> None:
    """Every frame against the case folder: one per call here (each call's control ran),
    stamped at its control's simulated time, holding the K actions run from there."""
    hashes = list(read_observation_hashes(case_dir))
    proprios = {call: proprio for call, _, proprio in read_observations(case_dir)}
    ran = executed(case_dir, controls)
    assert [f["call"] for f in frames] == [h.call for h in hashes]
    for number, (frame, seen) in enumerate(zip(frames, hashes, strict=True)):
        control = seen.executed_controls
        assert frame["frame_index"] == number and frame["control"] == control == number * interval
        assert frame["timestamp"] == pytest.approx(control / 20, abs=1e-6)
        assert frame["observation.images.image"] == seen.images["agentview"]
        assert frame["observation.images.image2"] == seen.images["robot0_eye_in_hand"]
        proprio = proprios[seen.call]
        assert proprio is not None and frame["observation.state"] == proprio.astype(np.float32).tolist()
        span = ran[control:control + interval]
        padded = span + [[0.0] * 6 + [span[-1][6]]] * (interval - len(span))
        assert frame["action"] == padded and frame["actions_ran"] == len(span), (seen.call, frame["action"])
        last = number == len(frames) - 1
        assert (frame["next.done"], frame["next.success"]) == (last, last and success)
        assert frame["task"] == seen.language


def test_a_run_exported_as_decision_frames_loads_back_at_its_simulated_times(
    demo_run: Path, lerobot_python: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dataset"
    done = export(lerobot_python, demo_run, out)
    for case in ERRORED:
        assert f"skipped {case}: errored (policy)" in done.stdout, done.stdout
    repo_id = f"pytest-libero/{demo_run.name}"
    assert done.stdout.strip().endswith(f"as LeRobotDataset {repo_id!r} at {out}; skipped 2 cases")
    loaded = load(lerobot_python, repo_id, out, "--delta-action", "0,0.25")
    assert (loaded["fps"], loaded["codebase_version"], loaded["episodes"]) == (4, "v3.0", 2)
    assert loaded["features"]["observation.images.image"] == {"dtype": "image", "shape": [256, 256, 3]}
    assert loaded["features"]["observation.state"] == {"dtype": "float32", "shape": [9]}
    assert loaded["features"]["action"] == {"dtype": "float32", "shape": [5, 7]}
    records = {json.loads(line)["case"]: json.loads(line)
               for line in (demo_run / "results.jsonl").read_text().splitlines()}
    for number, case in enumerate((SUCCESS, DELAYED)):
        frames = [f for f in loaded["frames"] if f["episode_index"] == number]
        check_decision_frames(frames, case_path(demo_run, case), controls_of(demo_run, case),
                              success=case == SUCCESS, interval=5)
        assert {f["task"] for f in frames} == {records[case]["entry"]["language"]}
        for frame, after in zip(frames, frames[1:]):  # delta_timestamps: now and 0.25 s later
            assert frame["delta"]["action"] == [frame["action"], after["action"]]
        assert frames[-1]["delta"]["action_is_pad"] == [False, True]
    delayed = [f for f in loaded["frames"] if f["episode_index"] == 1]
    assert all(a[:6] == [0.0] * 6 for f in delayed for a in f["action"][:2])  # the delay's holds
    meta = json.loads((out / "meta" / "pytest_libero.json").read_text())
    assert [(e["case"], e["outcome"], e["cause"], e["perturbation"]) for e in meta["episodes"]] == [
        (SUCCESS, "success", "success", None),
        (DELAYED, "failure", "policy_call_cap", {"kind": "latency", "level": 2, "source": "generated"})]
    assert {e["run_id"] for e in meta["episodes"]} == {demo_run.name}
    assert meta["layout"]["name"] == "decisions" and meta["layout"]["actions_per_frame"] == 5
    assert meta["episodes"][1]["held_actions"] == 2 * len(delayed)
    assert [(e["score"], e["progress"]) for e in meta["episodes"]] == [  # each record's own
        (records[case]["score"], records[case]["progress"]) for case in (SUCCESS, DELAYED)]
    assert meta["episodes"][0]["score"] == 1.0
    assert [s["case"] for s in meta["skipped"]] == list(ERRORED)

    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.rglob("*") if p.is_file()}
    again = subprocess.run([str(lerobot_python), "-m", "pytest_libero.cli", "export", str(demo_run),
                            "--lerobot", str(out)], capture_output=True, text=True, timeout=300,
                           env=lerobot_home(tmp_path))
    assert again.returncode == 2 and again.stderr.startswith(f"pytest-libero export: {out} exists"), (
        again.stdout + again.stderr)
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.rglob("*") if p.is_file()} == before


def test_a_replan_interval_of_1_is_one_frame_per_control(
    runs: dict[str, Future[Path]], lerobot_python: Path, tmp_path: Path
) -> None:
    run_dir = runs["k1-run"].result()
    out = tmp_path / "k1"
    export(lerobot_python, run_dir, out, "--repo-id", "local/k1")
    loaded = load(lerobot_python, "local/k1", out)
    assert loaded["fps"] == 20 and loaded["features"]["action"]["shape"] == [1, 7]
    check_decision_frames(loaded["frames"], case_path(run_dir, SUCCESS), controls_of(run_dir, SUCCESS),
                          success=False, interval=1)
    assert len(loaded["frames"]) == 12


def test_a_run_that_kept_every_control_is_one_frame_per_control_at_its_time(
    every_control_run: Path, lerobot_python: Path, tmp_path: Path
) -> None:
    out = tmp_path / "every"
    export(lerobot_python, every_control_run, out, "--repo-id", "local/every")
    loaded = load(lerobot_python, "local/every", out, "--delta-action", "0,0.05,0.1,0.15,0.2")
    assert (loaded["fps"], loaded["episodes"]) == (20, 2)
    assert loaded["features"]["action"] == {"dtype": "float32", "shape": [7]}
    for number, case in enumerate((SUCCESS, DELAYED)):
        folder = case_path(every_control_run, case)
        controls = controls_of(every_control_run, case)
        frames = [f for f in loaded["frames"] if f["episode_index"] == number]
        kept = {control: (images, proprio) for control, images, proprio in read_control_frames(folder)}
        ran = executed(folder, controls)
        assert len(frames) == controls == len(kept) - 1
        for control, frame in enumerate(frames):
            images, proprio = kept[control]
            assert frame["control"] == frame["frame_index"] == control
            assert frame["timestamp"] == pytest.approx(control / 20, abs=1e-6)
            agentview = hashlib.sha256(images["agentview"].tobytes()).hexdigest()
            assert frame["observation.images.image"] == agentview
            assert proprio is not None and frame["observation.state"] == proprio.astype(np.float32).tolist()
            assert frame["action"] == ran[control]
            wanted = ran[control:control + 5]  # delta_timestamps: the next 5 controls' actions
            assert frame["delta"]["action"][:len(wanted)] == wanted
            assert frame["delta"]["action_is_pad"] == [i >= len(wanted) for i in range(5)]
        assert frames[-1]["next.success"] == (case == SUCCESS)
    meta = json.loads((out / "meta" / "pytest_libero.json").read_text())
    assert meta["layout"]["name"] == "every_control" and meta["fps"] == 20


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
    assert loaded["fps"] == 4
