"""The LeRobot bridge (issue 17): its pure mapping here, the real thing in a lerobot venv.

The unit tests run in this venv and never import torch or lerobot: every decision the
bridge makes is plain Python over a checkpoint's config.json. The ``lerobot`` tests
build a separate venv with the lerobot the extra picks for its Python (0.4.4 on 3.11,
0.6 on 3.12: tests/lerobot_venv.py) and its torch from the package index (measured here
for 0.4.4: 3 min 40 s, 8.3 GB, most of it the CUDA wheels torch 2.10 pulls; removed
afterwards), install this checkout's serving part into it
without the simulator (``--no-deps`` plus websockets and msgpack), save a tiny
random-weight ACT checkpoint the way lerobot-train does, serve it with
``python -m pytest_libero.serve --policy pytest_libero.bridges.lerobot:make`` and run
two real LIBERO cases against it. The bridge's ``record=`` file says what each request
was mapped to; it is checked against the case folders' own evidence, byte for byte.

The venv is the session's ``lerobot_python`` (tests/lerobot_venv.py), shared with the
export's tests; ``PYTEST_LIBERO_LEROBOT_VENV=DIR`` keeps it in DIR, so a developer
installs once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from venvs import clean_env, run

from harness.runs import run_folder, run_records
from harness.servers import ServerDidNotStart, free_port, serve_argv, serving
from pytest_libero.bridges import lerobot as bridge
from pytest_libero.bridges.lerobot import BridgeRefused, Feature, InputPlan
from pytest_libero.evidence.reader import read_actions, read_observation_hashes, read_observations
from pytest_libero.policy.contract import Observation
from pytest_libero.policy.errors import ServerError
from pytest_libero.policy.openpi.client import WebsocketPolicyClient
from pytest_libero.policy.openpi.layout import RequestLayout
from pytest_libero.protocol.hashing import array_sha256

ROOT = Path(__file__).resolve().parents[1]
MAKE_CHECKPOINT = ROOT / "tests" / "tools" / "make_lerobot_checkpoint.py"
FACTORY = "pytest_libero.bridges.lerobot:make"
CHUNK, STEPS, CALLS = 10, 5, 4
LIBERO_IMAGES = {"observation.images.image": Feature("VISUAL", (3, 256, 256)),
                 "observation.images.image2": Feature("VISUAL", (3, 256, 256))}
ACTION = {"action": Feature("ACTION", (7,))}


# -- the mapping, pure Python ------------------------------------------------------------


def test_lerobot_libero_names_map_to_the_two_cameras_and_the_proprio() -> None:
    plan = bridge.plan_inputs({**LIBERO_IMAGES, "observation.state": Feature("STATE", (9,))}, ACTION)
    assert plan.images == {"observation.images.image": "agentview",
                           "observation.images.image2": "robot0_eye_in_hand"}
    assert plan.state == "observation.state"
    assert plan.describe()["inputs"]["task"] == "language"


@pytest.mark.parametrize("wrist", ["observation.images.wrist_image", "observation.images.eye_in_hand",
                                   "observation.images.hand"])
def test_a_wrist_like_name_is_the_eye_in_hand_camera_and_the_other_agentview(wrist: str) -> None:
    plan = bridge.plan_inputs({"observation.images.front": Feature("VISUAL", (3, 224, 224)),
                               wrist: Feature("VISUAL", (3, 224, 224))}, ACTION)
    assert plan.images == {"observation.images.front": "agentview", wrist: "robot0_eye_in_hand"}
    assert plan.state is None


def test_explicit_image_keys_win_and_padded_cameras_are_left_to_the_policy() -> None:
    inputs = {"observation.images.cam_high": Feature("VISUAL", (3, 256, 256)),
              "observation.images.cam_low": Feature("VISUAL", (3, 256, 256)),
              "observation.images.empty_camera_0": Feature("VISUAL", (3, 480, 640))}
    with pytest.raises(BridgeRefused, match="image_keys=KEY:agentview"):
        bridge.plan_inputs(inputs, ACTION)  # two keys, neither wrist-like: ambiguous
    keys = bridge.parse_image_keys("observation.images.cam_high:robot0_eye_in_hand,"
                                   "observation.images.cam_low:agentview")
    plan = bridge.plan_inputs(inputs, ACTION, keys)
    assert plan.images == {"observation.images.cam_high": "robot0_eye_in_hand",
                           "observation.images.cam_low": "agentview"}
    assert plan.padded == ("observation.images.empty_camera_0",)
    with pytest.raises(BridgeRefused, match="not KEY:CAMERA"):
        bridge.parse_image_keys("observation.images.cam_high:left")
    with pytest.raises(BridgeRefused, match="not image inputs of the checkpoint"):
        bridge.plan_inputs(inputs, ACTION, {"observation.images.nope": "agentview"})


def test_an_end_effector_state_is_refused_naming_the_track_and_the_fix() -> None:
    with pytest.raises(BridgeRefused) as refused:
        bridge.plan_inputs({**LIBERO_IMAGES, "observation.state": Feature("STATE", (8,))}, ACTION)
    message = str(refused.value)
    for part in ("'observation.state' is a state of shape [8]", "end-effector",
                 "--libero-track=rgb+proprio", "9 values", "retrain or convert"):
        assert part in message, message


def test_the_refusal_names_the_state_mean_opt_in() -> None:
    with pytest.raises(BridgeRefused) as refused:
        bridge.plan_inputs({**LIBERO_IMAGES, "observation.state": Feature("STATE", (8,))}, ACTION)
    assert "--option state=mean" in str(refused.value)
    with pytest.raises(BridgeRefused) as nine:  # not an end-effector state: no opt-in offered
        bridge.plan_inputs({**LIBERO_IMAGES, "observation.state": Feature("STATE", (6,))}, ACTION)
    assert "state=mean" not in str(nine.value)


def test_state_mean_feeds_an_end_effector_state_its_dataset_mean() -> None:
    inputs = {**LIBERO_IMAGES, "observation.state": Feature("STATE", (8,))}
    plan = bridge.plan_inputs(inputs, ACTION, state_mode="mean")
    assert plan.state == "observation.state" and plan.state_source == "mean"
    assert plan.describe()["inputs"]["observation.state"] == "mean"
    mean = np.arange(8, dtype=np.float32) / 10
    for seen in (observation(proprio=True), observation(proprio=False)):  # either track
        batch = bridge.request_arrays(seen, plan, mean)
        assert batch["observation.state"].dtype == np.float32
        assert batch["observation.state"].tolist() == [mean.tolist()]  # never the proprio
        line = bridge.describe_request(seen, plan, batch, {})
        assert line["state"]["source"] == "mean" and line["state"]["values"] == mean.tolist()
    with pytest.raises(BridgeRefused, match="8-value dataset mean"):
        bridge.request_arrays(observation(), plan, None)


@pytest.mark.parametrize("inputs, needle", [
    ({"observation.state": Feature("STATE", (9,))}, "drop state=mean"),
    ({"observation.state": Feature("STATE", (6,))}, "drop state=mean"),
])
def test_state_mean_is_refused_for_a_state_that_is_not_the_end_effector_pose(
    inputs: dict[str, Feature], needle: str,
) -> None:
    with pytest.raises(BridgeRefused, match=needle):
        bridge.plan_inputs({**LIBERO_IMAGES, **inputs}, ACTION, state_mode="mean")
    with pytest.raises(BridgeRefused, match="the one mode is state=mean"):
        bridge.plan_inputs(LIBERO_IMAGES, ACTION, state_mode="median")


class _Normalizer:
    """A saved LeRobot preprocessor's normalizer step, as far as state_mean reads it."""

    def __init__(self, **stats: Any) -> None:
        for name, value in stats.items():
            setattr(self, name, value)


def test_state_mean_reads_the_normalizer_statistics() -> None:
    mean = np.linspace(-0.5, 0.5, 8)
    loaded = SimpleNamespace(steps=[object(), _Normalizer(
        _tensor_stats={"observation.state": {"mean": mean, "std": np.ones(8)}}, stats=None)])
    assert bridge.state_mean(loaded).tolist() == mean.astype(np.float32).tolist()
    built = SimpleNamespace(steps=[_Normalizer(stats={"observation.state": {"mean": mean}})])
    assert bridge.state_mean(built).dtype == np.float32
    with pytest.raises(BridgeRefused, match="keeps no mean for observation.state"):
        bridge.state_mean(SimpleNamespace(steps=[_Normalizer(stats={"action": {"mean": mean}})]))


@pytest.mark.parametrize("inputs, outputs, needle", [
    ({"observation.environment_state": Feature("ENV", (20,))}, ACTION,
     "'observation.environment_state' (ENV"),
    ({"observation.images.depth": Feature("VISUAL", (1, 256, 256))}, ACTION, "RGB images"),
    (LIBERO_IMAGES, {"action": Feature("ACTION", (14,))}, "action output has shape [14]"),
    (LIBERO_IMAGES, {}, "action output has shape None"),
])
def test_inputs_the_protocol_never_sends_are_refused(
    inputs: dict[str, Feature], outputs: dict[str, Feature], needle: str,
) -> None:
    with pytest.raises(BridgeRefused, match="protocol") as refused:
        bridge.plan_inputs(inputs, outputs)
    assert needle in str(refused.value)


def observation(proprio: bool = True) -> Observation:
    rng = np.random.default_rng(3)
    images = {c: rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
              for c in ("agentview", "robot0_eye_in_hand")}
    return Observation("open the drawer", images, np.linspace(-1, 1, 9) if proprio else None)


def test_a_request_becomes_float_chw_images_in_unit_range_the_state_and_the_task() -> None:
    plan = InputPlan(images={"observation.images.image": "agentview",
                             "observation.images.image2": "robot0_eye_in_hand"},
                     state="observation.state")
    seen = observation()
    batch = bridge.request_arrays(seen, plan)
    image = batch["observation.images.image"]
    assert image.shape == (1, 3, 256, 256) and image.dtype == np.float32
    assert np.array_equal(image[0], seen.images["agentview"].transpose(2, 0, 1) / np.float32(255))
    assert image.min() >= 0.0 and image.max() <= 1.0
    assert batch["observation.state"].dtype == np.float32
    assert batch["observation.state"].tolist() == [np.linspace(-1, 1, 9).astype(np.float32).tolist()]
    assert batch["task"] == ["open the drawer"]
    line = bridge.describe_request(seen, plan, batch, {})
    assert line["inputs"]["observation.images.image2"]["source_sha256"] == array_sha256(
        seen.images["robot0_eye_in_hand"])
    assert line["state"]["source_sha256"] == array_sha256(np.linspace(-1, 1, 9))


def test_a_state_checkpoint_on_the_rgb_track_is_refused_at_its_first_request() -> None:
    plan = InputPlan(images={"observation.images.image": "agentview"}, state="observation.state")
    with pytest.raises(BridgeRefused, match=r"rgb track; run it with --libero-track=rgb\+proprio"):
        bridge.request_arrays(observation(proprio=False), plan)


def write_config(folder: Path, state: int, files: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"type": "act", "input_features": {
        "observation.images.image": {"type": "VISUAL", "shape": [3, 256, 256]},
        "observation.state": {"type": "STATE", "shape": [state]}},
        "output_features": {"action": {"type": "ACTION", "shape": [7]}}}
    (folder / "config.json").write_text(json.dumps(config))
    if files:
        for name in ("model.safetensors", "policy_preprocessor.json", "policy_postprocessor.json"):
            (folder / name).write_text("{}")
    return folder


def test_make_refuses_before_importing_torch(tmp_path: Path) -> None:
    """Refusals come from config.json alone, in a process without lerobot or torch."""
    write_config(tmp_path / "ee" / "pretrained_model", state=8)
    write_config(tmp_path / "bare", state=9, files=False)
    probe = f"""
import sys
from pytest_libero.bridges.lerobot import make, BridgeRefused
for path in ({str(tmp_path / 'ee')!r}, {str(tmp_path / 'bare')!r}, {str(tmp_path / 'none')!r}, None):
    try:
        make(path=path)
    except BridgeRefused as exc:
        print(exc)
print('imported:', sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'lerobot')))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ee, bare, none, unset, imported = done.stdout.strip().splitlines()
    assert "is a state of shape [8]" in ee and "--libero-track=rgb+proprio" in ee
    assert "lacks ['model.safetensors', 'policy_preprocessor.json'" in bare
    assert f"path={tmp_path / 'none'}: not an existing directory" in none and "never" in none
    assert "--option path=/ckpt" in unset
    assert imported == "imported: []"


# -- the real bridge in a lerobot venv ---------------------------------------------------


def lerobot_env(home: Path) -> dict[str, str]:
    """An empty Hugging Face home: the bridge must need nothing but the folder."""
    return clean_env(HF_HOME=str(home / "hf"), HF_LEROBOT_HOME=str(home / "lerobot"))


@pytest.fixture(scope="session")
def checkpoints(lerobot_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Tiny ACT checkpoints: LIBERO's camera names with a 9-value state, and an 8-value one."""
    folder = tmp_path_factory.mktemp("checkpoints")
    made: dict[str, Any] = {}
    for name, state in (("proprio", 9), ("end_effector", 8)):
        out = folder / name / "pretrained_model"
        done = run([str(lerobot_python), str(MAKE_CHECKPOINT), str(out), "--state-dim", str(state),
                    "--chunk", str(CHUNK), "--steps", str(STEPS)], 600,
                   f"saving the {name} checkpoint", env={**lerobot_env(folder), "HF_HUB_OFFLINE": "1"})
        made[name] = out
        made[f"{name}_stats"] = json.loads(done.stdout.strip().splitlines()[-1])["observation.state"]
    made["home"] = folder
    return made


@pytest.fixture
def served(lerobot_python: Path, checkpoints: dict[str, Any], tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The bridge on the serving CLI, recording every request; its URI, record and log."""
    port = free_port()
    record, log = tmp_path / "bridge.jsonl", tmp_path / "server.log"
    argv = serve_argv(FACTORY, port, python=str(lerobot_python), options=[
        f"path={checkpoints['proprio'].parent}",  # a step folder: found inside
        f"record={record}"])
    try:
        with serving(argv, port, env=lerobot_env(checkpoints["home"]), wait_s=300, poll_s=2.0,
                     grace_s=20, log=log) as server:
            yield {"uri": server.uri, "record": record, "log": log}
    except ServerDidNotStart as exc:
        pytest.fail(f"the bridge never served ({exc})")


@pytest.mark.lerobot
@pytest.mark.install
@pytest.mark.simulator
def test_real_libero_cases_against_a_served_lerobot_checkpoint(
    served: dict[str, Any], checkpoints: dict[str, Any], pytester: pytest.Pytester,
) -> None:
    profile = pytester.makefile(".toml", lerobot=f'''
        name = "lerobot-bridge"
        track = "rgb+proprio"
        [policy]
        transport = "websocket"
        endpoint = "{served['uri']}"
        connect_timeout = 10.0
        call_timeout = 120.0
        wait_s = 60.0
        [action]
        out_of_bounds = "clip"
    ''')
    result = pytester.runpytest_subprocess(
        f"--libero-profile={profile}", "--libero-scope=smoke", "--libero-budget-mode=decisions",
        f"--libero-max-policy-calls={CALLS}", f"--libero-replan-interval={STEPS}", "-p",
        "no:cacheprovider", timeout=900)
    logs = "\n".join(result.outlines[-60:]) + "\n" + served["log"].read_text()[-4000:]
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) == 0 and outcomes.get("error", 0) == 0, logs
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 2, logs  # native outcomes

    run_dir = run_folder(pytester.path / "libero-results", "lerobot-bridge")
    records = run_records(run_dir)
    assert [r["case"] for r in records] == ["libero_10-00", "libero_10-01"], logs
    lines = [json.loads(line) for line in served["record"].read_text().splitlines()]
    load, events = lines[0], lines[1:]
    assert load["event"] == "load" and load["type"] == "act", load
    assert (load["n_action_steps"], load["chunk_size"], load["stateful"]) == (STEPS, CHUNK, False)
    assert load["inputs"] == {"observation.images.image": "image:agentview",
                              "observation.images.image2": "image:robot0_eye_in_hand",
                              "observation.state": "proprio", "task": "language"}

    # One reset before each episode's first request, and none in between.
    episodes: list[list[dict[str, Any]]] = []
    for event in events:
        if event["event"] == "reset":
            episodes.append([])
        else:
            assert episodes, f"a request before any reset: {event}"
            episodes[-1].append(event)
    assert [len(e) for e in episodes] == [CALLS, CALLS], [e["event"] for e in events]

    stats = checkpoints["proprio_stats"]
    mean, std = np.array(stats["mean"], np.float32), np.array(stats["std"], np.float32)
    for record, requests in zip(records, episodes, strict=True):
        case = Path(record["evidence_dir"])
        assert record["policy_metadata"]["lerobot"]["type"] == "act"
        delivered = list(read_observation_hashes(case))
        proprios = [p for _, _, p in read_observations(case)]
        chunks = [c.actions for c in read_actions(case)]
        assert len(delivered) == len(requests) == len(chunks), record["case"]
        for request, sent, proprio, chunk in zip(requests, delivered, proprios, chunks, strict=True):
            for key, camera in (("observation.images.image", "agentview"),
                                ("observation.images.image2", "robot0_eye_in_hand")):
                image = request["inputs"][key]
                assert image["camera"] == camera and image["source_sha256"] == sent.images[camera]
                assert (image["shape"], image["batch"], image["dtype"]) == ([3, 256, 256], 1, "float32")
                assert 0.0 <= image["min"] <= image["max"] <= 1.0, image
            assert proprio is not None
            assert request["state"]["source_sha256"] == sent.proprio
            assert request["state"]["values"] == proprio.astype(np.float32).tolist()
            # The saved normalizer was loaded: (state - mean) / std with the dataset stats.
            normalized = np.array(request["preprocessed"]["observation.state"]["values"])
            assert np.allclose(normalized, (proprio.astype(np.float32) - mean) / std, atol=1e-5)
            assert request["task"] == sent.language == record["entry"]["language"]
            assert chunk is not None and request["chunk"]["shape"] == [STEPS, 7]
            assert request["chunk"]["sha256"] == array_sha256(chunk)  # the reply, unaltered

    # The same server, asked without proprio (an rgb-track run): the case would error
    # with the fix in the traceback, and the server goes on.
    client = WebsocketPolicyClient(served["uri"], connect_timeout=10, call_timeout=60)
    client.connect(wait_s=10)
    with pytest.raises(ServerError) as refused:
        client.infer(RequestLayout().encode(observation(proprio=False)))
    assert "BridgeRefused" in refused.value.traceback
    assert "--libero-track=rgb+proprio" in refused.value.traceback
    client.close()


@pytest.mark.lerobot
@pytest.mark.install
def test_the_serving_command_refuses_what_the_protocol_cannot_feed(
    lerobot_python: Path, checkpoints: dict[str, Any], tmp_path: Path,
) -> None:
    """Start-up refusals through the real CLI in the lerobot venv: exit 2, with the fix."""
    def serve(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(lerobot_python), "-m", "pytest_libero.serve", "--policy", FACTORY,
             "--option", f"path={path}", "--port", str(free_port())],
            capture_output=True, text=True, timeout=300, env=lerobot_env(checkpoints["home"]))

    end_effector = serve(checkpoints["end_effector"])
    assert end_effector.returncode == 2, end_effector.stdout + end_effector.stderr
    for part in ("'observation.state' is a state of shape [8]", "end-effector",
                 "--libero-track=rgb+proprio", 'track = "rgb+proprio"', "retrain or convert"):
        assert part in end_effector.stderr, end_effector.stderr
    missing = serve(tmp_path / "no-such-checkpoint")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert f"path={tmp_path / 'no-such-checkpoint'}: not an existing directory" in missing.stderr
    assert "never downloads from a hub" in missing.stderr
