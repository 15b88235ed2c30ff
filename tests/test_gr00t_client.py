"""The GR00T transport against a real ZeroMQ server on 127.0.0.1, no simulator.

The server (tests/gr00t_reference_server.py) speaks GR00T N1.6's wire from the
documented protocol; each failure it can stage must reach the case as its own cause.
"""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gr00t_reference_server import (
    DIE,
    Canary,
    Gr00tReferenceServer,
    Hang,
    Raw,
    on,
    scripted_actions,
    server_pack,
)
from ports import free_port

from pytest_libero.config.profiles import load_profile, parse_profile
from pytest_libero.policy.contract import RAW_REPLY, Observation
from pytest_libero.policy.gr00t import Gr00tClient, Gr00tPolicy
from pytest_libero.policy.gr00t_wire import looks_pickled, unpack
from pytest_libero.policy.probe import preflight, server_gone
from pytest_libero.protocol.errors import EpisodeError, SetupError

pytest_plugins = ["pytester"]


def observation(language: str = "put the bowl on the plate") -> Observation:
    rng = np.random.default_rng(3)
    images = {camera: rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
              for camera in ("agentview", "robot0_eye_in_hand")}
    return Observation(language=language, images=images)


def policy_for(server: Gr00tReferenceServer, *, call_timeout: float = 5.0,
               options: dict[str, Any] | None = None) -> Gr00tPolicy:
    profile = load_profile("gr00t").with_overrides(endpoint=server.uri, options=options)
    assert profile.gr00t is not None
    return Gr00tPolicy(server.uri, layout=profile.gr00t, connect_timeout=2.0,
                       call_timeout=call_timeout, wait_s=5.0)


def test_an_episode_pings_reads_the_modality_config_resets_and_maps_the_reply() -> None:
    with Gr00tReferenceServer() as server:
        policy = policy_for(server, options={"state.x": 0.25, "state.gripper": "0.03,-0.03"})
        try:
            policy.reset()
            reply = policy.infer(observation())
        finally:
            policy.close()
    assert server.endpoints() == ["ping", "get_modality_config", "reset", "get_action"]
    assert server.requests[2]["data"] == {"options": None}
    assert policy.metadata["modality_config"]["action"]["modality_keys"][-1] == "gripper"
    sent = server.requests[3]["data"]["observation"]
    assert sent["annotation.human.action.task_description"] == ["put the bowl on the plate"]
    for key in ("video.image", "video.wrist_image"):
        assert sent[key].dtype == np.uint8 and sent[key].shape == (1, 1, 256, 256, 3)
    assert np.array_equal(sent["video.image"][0, 0], observation().images["agentview"])
    assert sent["state.x"].dtype == np.float32 and sent["state.x"].tolist() == [[[0.25]]]
    assert sent["state.y"].tolist() == [[[0.0]]]
    assert sent["state.gripper"].shape == (1, 1, 2)
    assert np.allclose(sent["state.gripper"], [[[0.03, -0.03]]])
    raw = server.actions[0]
    chunk = reply["actions"]
    assert chunk.shape == (16, 7)
    assert np.array_equal(chunk[:, 0], raw["action.x"][0, :, 0].astype(np.float64))
    # gr00t_libero: 0.9 (open in GR00T) -> -1 (open in LIBERO), 0.2 -> +1 (close).
    assert chunk[0, 6] == -1.0 and chunk[1, 6] == 1.0
    assert set(reply[RAW_REPLY]) == set(raw)
    assert all(np.array_equal(reply[RAW_REPLY][k], raw[k]) for k in raw)


def pickle_bytes(path: Path) -> bytes:
    return pickle.dumps(Canary(path))


def torch_save_bytes(path: Path) -> bytes:
    """A zip archive holding a pickle, as torch.save writes one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(Canary(path)))
    return buffer.getvalue()


@pytest.mark.parametrize(("make", "kind"), [(pickle_bytes, "pickle"),
                                             (torch_save_bytes, "torch.save")])
def test_pickle_replies_error_with_that_cause_and_nothing_is_unpickled(
    tmp_path: Path, make: Any, kind: str
) -> None:
    live = tmp_path / "live"
    pickle.loads(pickle_bytes(live))  # the canary works: unpickling it makes its file
    assert live.exists()
    canary = tmp_path / "canary"
    payload = make(canary)
    assert looks_pickled(payload) == kind
    with Gr00tReferenceServer(on("get_action", Raw(payload))) as server:
        policy = policy_for(server)
        policy.reset()
        with pytest.raises(EpisodeError) as caught:
            policy.infer(observation())
        policy.close()
    assert caught.value.cause == "pickle_reply"
    assert f"{server.uri} (get_action)" in str(caught.value)
    assert f"with {kind} bytes" in str(caught.value) and "older pickle generation" in str(caught.value)
    assert not canary.exists()


def test_an_empty_msgpack_map_is_not_mistaken_for_pickle() -> None:
    assert looks_pickled(server_pack({})) is None
    assert unpack(server_pack({}), "test") == {}


@pytest.mark.parametrize(("name", "answer", "cause", "words"), [
    ("error", {"error": "CUDA out of memory"}, "server_error", "CUDA out of memory"),
    ("hang", Hang(3.0), "timeout", "within 1s"),
    ("wrong shape", [{**scripted_actions(1), "action.y": np.zeros((1, 16, 2), np.float32)}, {}],
     "invalid_action", "'action.y' has shape (1, 16, 2)"),
    ("missing key", [{"action.x": np.zeros((1, 16, 1), np.float32)}, {}],
     "invalid_action", "no 'action.y'"),
    ("not a pair", {"actions": [0.0]}, "protocol_violation", "not [action_dict, info]"),
    ("dies", DIE, "connection_lost", "closed the connection"),
])
def test_each_failure_has_its_own_cause(name: str, answer: Any, cause: str, words: str) -> None:
    with Gr00tReferenceServer(on("get_action", answer)) as server:
        policy = policy_for(server, call_timeout=1.0)
        policy.reset()
        started = time.monotonic()
        with pytest.raises(EpisodeError) as caught:
            policy.infer(observation())
        elapsed = time.monotonic() - started
        policy.close()
    assert caught.value.cause == cause, str(caught.value)
    assert words in str(caught.value)
    assert elapsed < 2.5  # a dead server is told apart from a slow one, without waiting


def test_a_timed_out_socket_is_discarded_and_a_late_reply_never_answers_a_later_call() -> None:
    with Gr00tReferenceServer(on("get_action", Hang(1.5), count=1)) as server:
        policy = policy_for(server, call_timeout=0.5)
        policy.reset()
        with pytest.raises(EpisodeError, match="did not reply"):
            policy.infer(observation())
        policy.reset()  # the next episode: a fresh socket
        reply = policy.infer(observation())
        policy.close()
    assert len(server.actions) == 2
    # The answer is the second call's (0.1 per call apart), not the first's late one.
    assert np.isclose(reply["actions"][0, 0], server.actions[1]["action.x"][0, 0, 0])
    assert not np.isclose(reply["actions"][0, 0], server.actions[0]["action.x"][0, 0, 0])


def test_api_token_is_sent_when_the_server_wants_one() -> None:
    with Gr00tReferenceServer(api_token="s3cret") as server:
        with Gr00tClient(server.uri, connect_timeout=2, call_timeout=2, api_token="s3cret") as ok:
            assert ok.wait_ready(3)["status"] == "ok"
        with Gr00tClient(server.uri, connect_timeout=2, call_timeout=2) as without:
            with pytest.raises(EpisodeError, match="Unauthorized"):
                without.wait_ready(3)
    assert [r.get("api_token") for r in server.requests] == ["s3cret", None]


def gr00t_profile(endpoint: str, wait_s: float = 1.0) -> Any:
    return load_profile("gr00t").with_overrides(endpoint=endpoint, wait_s=wait_s)


def test_preflight_names_the_endpoint_when_no_server_is_there() -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    told: list[str] = []
    started = time.monotonic()
    with pytest.raises(SetupError) as caught:
        preflight(gr00t_profile(endpoint, 1.5), on_wait=lambda exc: told.append(str(exc)))
    assert time.monotonic() - started < 5
    text = str(caught.value)
    assert f"no policy server answered at {endpoint} within 1.5s" in text
    assert "profile 'gr00t'" in text and "run_gr00t_server.py" in text
    assert told, "the operator is told at once that nothing answers"
    assert server_gone(gr00t_profile(endpoint, 0.5)) is not None


def test_a_server_of_the_pickle_generation_is_refused_at_preflight(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    with Gr00tReferenceServer(lambda endpoint, data, count: Raw(pickle_bytes(canary))) as server:
        with pytest.raises(SetupError, match="not as a GR00T policy server.*older pickle generation"):
            preflight(gr00t_profile(server.uri, 3.0))
        assert server_gone(gr00t_profile(server.uri, 3.0)) is None  # it answers: not gone
    assert not canary.exists()


def test_a_server_that_comes_up_late_is_waited_for() -> None:
    port = free_port()
    server = Gr00tReferenceServer(port=port)
    with Gr00tClient(f"tcp://127.0.0.1:{port}", connect_timeout=1, call_timeout=1) as client:
        import threading
        timer = threading.Timer(1.0, server.start)
        timer.start()
        try:
            assert client.wait_ready(10)["status"] == "ok"
        finally:
            timer.join()
            server.stop()


# --- profiles -------------------------------------------------------------------------


def test_the_gr00t_profile_declares_its_layout_and_constants() -> None:
    profile = load_profile("gr00t")
    assert profile.transport == "gr00t" and profile.replan_interval == 8
    assert profile.budget_mode == "horizon" and profile.state_fed == "constant"
    layout = profile.identity()["request_layout"]
    assert layout["axes"] == ["batch", "time"]
    assert layout["reply"]["gripper"] == "gr00t_libero"
    assert layout["state"]["state.gripper"] == {"dtype": "float32", "values": [0.0, 0.0]}
    moved = profile.with_overrides(options={"state.z": 0.7})
    assert moved.identity()["request_layout"]["state"]["state.z"]["values"] == [
        pytest.approx(0.7)]
    with pytest.raises(SetupError, match=r"state\.gripper.*give 2 comma-separated"):
        profile.with_overrides(options={"state.gripper": 0.1})
    with pytest.raises(SetupError, match=r"'state\.xx' names no state constant; allowed: state"):
        profile.with_overrides(options={"state.xx": 0.1})
    # The mapping and the constants are the profile's bytes, hence its hash.
    text = (Path(__file__).parents[1] / "pytest_libero/data/profiles/gr00t.toml").read_bytes()
    other = parse_profile(text.replace(b'gripper = "gr00t_libero"', b'gripper = "none"'), "x.toml")
    assert other.sha256 != profile.sha256 and other.gr00t is not None
    assert other.gr00t.gripper == "none"


def test_state_fed_of_the_shipped_profiles() -> None:
    fed = {name: load_profile(name).state_fed
           for name in ("gr00t", "pi05", "pi0", "smolvla", "openvla-oft", "zero")}
    assert fed == {"gr00t": "constant", "pi05": "constant", "pi0": "constant",
                   "smolvla": "proprio", "openvla-oft": "proprio", "zero": "none"}


@pytest.mark.parametrize(("change", "words"), [
    ('actions = ["a", "b"]', "7 distinct"),
    ('gripper = "clip01"', "reply.gripper"),
])
def test_a_bad_reply_mapping_is_refused(change: str, words: str) -> None:
    text = (Path(__file__).parents[1] / "pytest_libero/data/profiles/gr00t.toml").read_text()
    key = change.split(" ")[0]
    lines = [change if line.startswith(f"{key} =") else line for line in text.splitlines()]
    with pytest.raises(SetupError, match=words):
        parse_profile("\n".join(lines).encode(), "test.toml")


def test_collect_only_needs_no_server(pytester: pytest.Pytester) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    result = pytester.runpytest("--libero-profile=gr00t", f"--libero-endpoint={endpoint}",
                                "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*test_libero_task[[]libero_10-00[]]*",
                                 "*test_libero_task[[]libero_10-01[]]*"])


def test_no_server_stops_the_run_before_any_case(pytester: pytest.Pytester) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = pytester.runpytest("--libero-profile=gr00t", f"--libero-endpoint={endpoint}",
                                "--libero-server-wait=1", "--libero-scope=all")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert time.monotonic() - started < 30
    error = "\n".join(result.stderr.lines)
    assert f"no policy server answered at {endpoint} within 1s" in error
    assert "profile 'gr00t'" in error and "no case was run" in error
    assert "run_gr00t_server.py" in error
    assert not (pytester.path / "libero-results").exists()


def test_a_policy_server_needs_no_pyzmq() -> None:
    """The serving part runs in the model's own environment (the LeRobot bridge's test
    installs it there without dependencies): pyzmq is imported only for gr00t profiles."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['zmq'] = None; "
         "import pytest_libero.serve, pytest_libero.plugin; "
         "from pytest_libero.config.profiles import load_profile; load_profile('gr00t')"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
