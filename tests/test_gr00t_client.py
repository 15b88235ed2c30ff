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

import msgpack
import msgpack_numpy
import numpy as np
import pytest
from gr00t_reference_server import (
    DIE,
    MULTIPART,
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
from pytest_libero.policy.gr00t.client import Gr00tClient, Gr00tPolicy
from pytest_libero.policy.gr00t.wire import Wire, looks_pickled, unpack
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
    return Gr00tPolicy(server.uri, layout=profile.settings.layout, connect_timeout=2.0,
                       call_timeout=call_timeout, wait_s=5.0)


@pytest.mark.parametrize(("generation", "wire"), [
    ("npy", "npy"), ("msgpack-numpy", "msgpack-numpy"), ("both", "msgpack-numpy")])
def test_an_episode_pings_reads_the_modality_config_resets_and_maps_the_reply(
    generation: str, wire: str,
) -> None:
    with Gr00tReferenceServer(generation=generation) as server:
        policy = policy_for(server, options={"state.x": 0.25, "state.gripper": "0.03,-0.03"})
        try:
            policy.reset()
            reply = policy.infer(observation())
        finally:
            policy.close()
    assert server.endpoints() == ["ping", "get_modality_config", "reset", "get_action"]
    assert server.requests[2]["data"] == {"options": None}
    assert policy.metadata["modality_config"]["action"]["modality_keys"][-1] == "gripper"
    assert policy.metadata["wire"] == wire
    assert policy.metadata["wire_decided_by"] == "get_modality_config marker"
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
    assert unpack(server_pack({}), "test").value == {}


def object_array_reply(canary: Path, generation: str) -> bytes:
    """A get_action reply whose action.x is an object array holding the canary, written
    by each generation's real encoder (np.save with pickle allowed; msgpack-numpy)."""
    array = np.array([Canary(canary)], dtype=object)
    if generation == "npy":
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=True)
        value: Any = {"__ndarray_class__": True, "as_npy": buffer.getvalue()}
        data = msgpack.packb([{"action.x": value}, {}])
    else:
        data = msgpack.packb([{"action.x": array}, {}], default=msgpack_numpy.encode)
    assert isinstance(data, bytes)
    return data


@pytest.mark.parametrize("generation", ["npy", "msgpack-numpy"])
def test_an_object_array_in_either_form_errors_the_case_and_nothing_is_unpickled(
    tmp_path: Path, generation: str,
) -> None:
    canary = tmp_path / "canary"
    payload = object_array_reply(canary, generation)
    with Gr00tReferenceServer(on("get_action", Raw(payload)), generation=generation) as server:
        policy = policy_for(server)
        policy.reset()
        with pytest.raises(EpisodeError) as caught:
            policy.infer(observation())
        policy.close()
    assert caught.value.kind == "policy_transport"
    assert caught.value.cause == "protocol_violation"
    assert f"the GR00T server at {server.uri} (get_action)" in str(caught.value)
    assert "never" in str(caught.value)  # ... decoded / unpickled
    assert not canary.exists()


def test_an_npy_header_claiming_more_than_its_bytes_is_refused_before_any_array() -> None:
    header = io.BytesIO()  # numpy's own writer, so only the shape lies
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (10**11,)})
    lying = header.getvalue() + np.zeros(4, np.float32).tobytes()
    data = msgpack.packb([{"action.x": {"__ndarray_class__": True, "as_npy": lying}}, {}])
    started = time.monotonic()
    with pytest.raises(EpisodeError, match=r"needs 400000000000 bytes of data but the message "
                                           r"carries 16"):
        unpack(data, "the GR00T server at tcp://x (get_action)")
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("generation", ["npy", "msgpack-numpy"])
def test_replies_are_read_in_either_form_and_say_which(generation: str) -> None:
    array = np.arange(6, dtype=np.float32).reshape(1, 6, 1)
    message = unpack(server_pack({"a": array, "n": 3}, generation), "test")
    assert message.forms == {Wire(generation)}
    assert np.array_equal(message.value["a"], array) and message.value["a"].dtype == np.float32
    assert message.value["n"] == 3
    assert unpack(server_pack({"n": 3}, generation), "test").forms == frozenset()


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
            with pytest.raises(EpisodeError, match=r"refused the API token \(no token was "
                                                   r"sent\): Unauthorized") as caught:
                without.wait_ready(3)
    assert caught.value.cause == "token_refused"
    assert [r.get("api_token") for r in server.requests] == ["s3cret", None]


TOKEN_ENV = "PYTEST_LIBERO_TEST_GR00T_TOKEN"


def token_profile(endpoint: str, env: str | None) -> Any:
    text = GR00T_TOML.read_text()
    if env is not None:
        text = text.replace('# api_token_env = "GR00T_API_TOKEN"', f'api_token_env = "{env}"')
    return parse_profile(text.encode(), "token.toml").with_overrides(endpoint=endpoint, wait_s=3.0)


@pytest.mark.parametrize(("env", "value", "words", "advice"), [
    (None, None, "no token was sent: the profile sets no policy.api_token_env",
     "Use a profile of your own that names the variable holding the token"),
    (TOKEN_ENV, None, f"no token was sent: policy.api_token_env names {TOKEN_ENV}, which is "
                      "not set here", f"Export {TOKEN_ENV} with the token the server was given"),
    # Set and exported, but not the server's: the token was refused, not missing.
    (TOKEN_ENV, "wrong", f"the token in ${TOKEN_ENV} was sent and the server refused it: it "
                         "is not the token the server was given",
     f"Export the server's token as {TOKEN_ENV}"),
])
def test_a_refused_token_is_a_usage_error_that_says_what_was_sent_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch, env: str | None, value: str | None, words: str, advice: str,
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    if value is not None:
        monkeypatch.setenv(TOKEN_ENV, value)
    with Gr00tReferenceServer(api_token="s3cret") as server:
        with pytest.raises(SetupError) as caught:
            preflight(token_profile(server.uri, env))
        monkeypatch.setenv(TOKEN_ENV, "s3cret")
        facts = preflight(token_profile(server.uri, TOKEN_ENV))
    text = str(caught.value)
    assert f"the GR00T server at {server.uri} (profile 'gr00t'" in text
    assert f"refused the API token ({words}" in text
    assert advice in text and "no case was run" in text
    if value is not None:  # the variable is set and exported: no advice to set it
        assert "api_token_env =" not in text and "not set" not in text
    assert "s3cret" not in text and "wrong" not in text  # a token is never printed
    assert facts["wire"] == "npy"


@pytest.mark.parametrize("generation", ["npy", "msgpack-numpy", "both"])
@pytest.mark.parametrize("horizon", [4, 8, 16])
def test_preflight_decides_the_wire_and_reads_the_reply_horizon(
    generation: str, horizon: int,
) -> None:
    with Gr00tReferenceServer(generation=generation, horizon=horizon) as server:
        facts = preflight(gr00t_profile(server.uri, 3.0))
    assert facts == {
        "transport": "gr00t", "endpoint": server.uri,
        "wire": "npy" if generation == "npy" else "msgpack-numpy",
        "wire_decided_by": "get_modality_config marker", "reply_horizon": horizon,
    }
    # The probe is the request every case sends, then a reset so no episode is left open.
    assert server.endpoints() == ["ping", "get_modality_config", "reset", "get_action", "reset"]
    probe = server.requests[3]["data"]["observation"]
    assert not probe["video.image"].any() and probe["video.image"].shape == (1, 1, 256, 256, 3)
    assert set(probe) == {"video.image", "video.wrist_image", *STATE,
                          "annotation.human.action.task_description"}


def test_a_server_whose_generation_cannot_be_told_is_a_usage_error_unless_pinned() -> None:
    with Gr00tReferenceServer(generation="msgpack-numpy", marked=False) as server:
        with pytest.raises(SetupError) as caught:
            preflight(gr00t_profile(server.uri, 3.0))
        pinned = preflight(wired_profile(server.uri, "msgpack-numpy"))
        with pytest.raises(SetupError) as wrong:
            preflight(wired_profile(server.uri, "npy"))
    text = str(caught.value)
    assert f"the GR00T server at {server.uri} cannot be told apart by generation" in text
    assert "no ModalityConfig marker of either generation" in text
    assert 'policy.wire = "npy" (np.save bytes' in text and 'or "msgpack-numpy"' in text
    assert "no case was run" in text
    assert pinned["wire"] == "msgpack-numpy" and pinned["wire_decided_by"] == "profile (policy.wire)"
    # Pinned to the other form: the server's model sees dicts, and the error says why.
    text = str(wrong.value)
    assert "refused a preflight request (its probe get_action is the request every" in text
    assert "(get_action) answered with an error" in text
    assert "Video key 'image' must be a numpy array. Got <class 'dict'>" in text
    assert "sent its arrays in the npy form" in text and 'policy.wire = "msgpack-numpy"' in text


@pytest.mark.parametrize("generation", ["npy", "msgpack-numpy"])
def test_a_reply_the_server_s_own_output_check_refuses_is_named_as_the_reply(
    generation: str,
) -> None:
    # The model answers 4 steps under a 16-step config: GR00T's strict check_action fails
    # after the model ran. The request was fine; the message must say it was the reply.
    with Gr00tReferenceServer(generation=generation, horizon=16, answers=4) as server:
        with pytest.raises(SetupError) as caught:
            preflight(gr00t_profile(server.uri, 3.0))
        policy = policy_for(server)
        try:
            policy.reset()
            with pytest.raises(EpisodeError) as in_case:
                policy.infer(observation())
        finally:
            policy.close()
    text = str(caught.value)
    assert "answered the probe get_action with an error from its own output check" in text
    assert "the reply its model produced failed it, not our request" in text
    assert "\"Action key 'x's horizon must be 16. Got 4\"" in text  # the server's words
    assert "refused a preflight request" not in text and "no case was run" in text.lower()
    assert in_case.value.cause == "server_error"
    assert "output check refused its own model's reply, not the request" in str(in_case.value)


@pytest.mark.parametrize("generation", ["npy", "msgpack-numpy"])
def test_a_server_without_the_sim_policy_wrapper_is_told_to_start_with_it(
    generation: str,
) -> None:
    with Gr00tReferenceServer(generation=generation, wrapped=False) as server:
        with pytest.raises(SetupError) as caught:
            preflight(gr00t_profile(server.uri, 3.0))
        policy = policy_for(server)
        try:
            policy.reset()
            with pytest.raises(EpisodeError) as in_case:
                policy.infer(observation())
        finally:
            policy.close()
    text = str(caught.value)
    assert "refused the probe get_action with \"Observation must contain a 'video' key\"" in text
    assert "started without the sim-policy wrapper" in text
    assert "Restart it with --use-sim-policy-wrapper" in text and "no case was run" in text
    assert "refused a preflight request" not in text
    assert "restart it with --use-sim-policy-wrapper" in str(in_case.value)


def test_a_pin_that_contradicts_the_server_marker_is_a_usage_error() -> None:
    with Gr00tReferenceServer(generation="npy") as server:
        with pytest.raises(SetupError) as caught:
            preflight(wired_profile(server.uri, "msgpack-numpy"))
    assert ("marks its modality config as the npy generation, but the profile pins "
            'policy.wire = "msgpack-numpy"') in str(caught.value)
    assert [r["endpoint"] for r in server.requests] == ["ping", "get_modality_config"]


def wired_profile(endpoint: str, wire: str) -> Any:
    text = GR00T_TOML.read_text().replace('wire = "auto"', f'wire = "{wire}"')
    assert f'wire = "{wire}"' in text
    return parse_profile(text.encode(), "wired.toml").with_overrides(endpoint=endpoint, wait_s=3.0)


def test_policy_wire_is_checked_and_only_for_gr00t() -> None:
    text = GR00T_TOML.read_text()
    with pytest.raises(SetupError, match=r"policy\.wire.*'pickle'.*auto, npy, msgpack-numpy"):
        parse_profile(text.replace('wire = "auto"', 'wire = "pickle"').encode(), "x.toml")
    pi05 = (GR00T_TOML.parent / "pi05.toml").read_text()
    with pytest.raises(SetupError, match=r"policy\.wire.*only with transport = 'gr00t'"):
        parse_profile(pi05.replace('[policy]', '[policy]\nwire = "npy"').encode(), "x.toml")
    assert load_profile("gr00t").settings.wire == "auto"
    assert load_profile("gr00t").identity()["wire"] == "auto"


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


GR00T_TOML = Path(__file__).parents[1] / "pytest_libero/data/profiles/gr00t.toml"
STATE = ("state.x", "state.y", "state.z", "state.roll", "state.pitch", "state.yaw",
         "state.gripper")


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
    assert other.sha256 != profile.sha256
    assert other.settings.layout.gripper == "none"


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


def test_a_refused_token_stops_the_run_before_any_case(pytester: pytest.Pytester) -> None:
    with Gr00tReferenceServer(api_token="s3cret") as server:
        result = pytester.runpytest("--libero-profile=gr00t", f"--libero-endpoint={server.uri}",
                                    "--libero-server-wait=3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = "\n".join(result.stderr.lines)
    assert "refused the API token (no token was sent: the profile sets no policy.api_token_env. " in error
    assert not (pytester.path / "libero-results").exists()
    assert server.endpoints() == ["ping"]


def test_a_fortran_ordered_npy_array_reads_as_its_values() -> None:
    array = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    buffer = io.BytesIO()
    np.save(buffer, array)
    assert b"'fortran_order': True" in buffer.getvalue()
    data = msgpack.packb({"a": {"__ndarray_class__": True, "as_npy": buffer.getvalue()}})
    decoded = unpack(data, "test").value["a"]
    assert np.array_equal(decoded, array) and decoded.flags.c_contiguous


# --- hostile replies and inputs (issue 32; the plugin-level rows are in test_bad_input.py) --


@pytest.mark.parametrize(("name", "answer", "cause", "words"), [
    ("infinite gripper", [{**scripted_actions(1), "action.gripper":
                           np.full((1, 16, 1), np.inf, np.float32)}, {}],
     "invalid_action", "'action.gripper' holds inf (step 0); every action value must be finite"),
    ("nan axis", [{**scripted_actions(1), "action.z": np.full((1, 16, 1), np.nan, np.float32)},
                  {}], "invalid_action", "'action.z' holds nan"),
    ("ragged", [{**scripted_actions(1), "action.y": [[[0.1], [0.2, 0.3]]]}, {}],
     "invalid_action", "'action.y' is not a rectangular array of numbers"),
    ("2 MB error", {"error": "x" * 2_000_000}, "server_error", "more characters]"),
])
def test_hostile_replies_get_their_own_cause(name: str, answer: Any, cause: str,
                                             words: str) -> None:
    with Gr00tReferenceServer(on("get_action", answer)) as server:
        policy = policy_for(server)
        policy.reset()
        with pytest.raises(EpisodeError) as caught:
            policy.infer(observation())
        policy.close()
    assert caught.value.cause == cause, str(caught.value)
    assert words in str(caught.value)
    assert len(str(caught.value)) < 3000  # a server's text is cut, never echoed whole


def test_a_reply_of_two_frames_is_a_protocol_violation_and_the_next_call_is_clean() -> None:
    class TwoFrames(Gr00tReferenceServer):
        def _answer(self, message: bytes) -> object:
            reply = super()._answer(message)
            if self.endpoints()[-1] == "get_action" and len(self.actions) == 1:
                return MULTIPART
            return reply

    with TwoFrames() as server:
        policy = policy_for(server)
        policy.reset()
        with pytest.raises(EpisodeError) as caught:
            policy.infer(observation())
        assert caught.value.cause == "protocol_violation"
        assert "answered with 2 frames" in str(caught.value)
        policy.reset()
        assert policy.infer(observation())["actions"].shape == (16, 7)  # a fresh socket
        policy.close()


def test_a_reply_past_the_limit_is_refused_by_its_size_and_the_server_is_not_called_dead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_libero.policy.gr00t import client as gr00t

    monkeypatch.setattr(gr00t, "MAX_MESSAGE_BYTES", 256 * 1024)
    monkeypatch.setattr(gr00t, "RECEIVE_CAP_BYTES", 1024 * 1024)
    big = server_pack([{"action.x": np.zeros(200_000, np.float32)}, {}])  # 800 kB: read, refused
    huge = server_pack([{"action.x": np.zeros(1_000_000, np.float32)}, {}])  # 4 MB: dropped
    for payload, words in ((big, "answered with 0.8 MiB; replies above 0.25 MiB are refused"),
                           (huge, "dropped the connection mid-reply but still answers ping")):
        with Gr00tReferenceServer(on("get_action", Raw(payload))) as server:
            policy = policy_for(server)
            policy.reset()
            with pytest.raises(EpisodeError) as caught:
                policy.infer(observation())
            policy.close()
        assert caught.value.cause == "reply_too_large", str(caught.value)
        assert words in str(caught.value)


def test_a_ping_that_is_not_gr00ts_is_a_usage_error_before_any_case() -> None:
    with Gr00tReferenceServer(on("ping", [1, 2, 3])) as server:
        with pytest.raises(SetupError) as caught:
            preflight(gr00t_profile(server.uri, 3.0))
    assert "answered, but not as a GR00T policy server" in str(caught.value)
    assert "answered ping with [1, 2, 3], not GR00T's {'status': 'ok', ...}" in str(caught.value)


@pytest.mark.parametrize("endpoint", ["tcp://127.0.0.1:99999", "tcp://127.0.0.1:0",
                                      "tcp://127.0.0.1", "tcp://:5555", "tcp://h:5555/x"])
def test_a_gr00t_endpoint_without_a_host_and_port_is_refused_at_once(endpoint: str) -> None:
    with pytest.raises(SetupError, match=r"has no valid host and port; give tcp://HOST:PORT"):
        load_profile("gr00t").with_overrides(endpoint=endpoint)


@pytest.mark.parametrize(("value", "words"), [
    ("nan", "finite numbers"), ("inf", "finite numbers"), ("1e39", "float32's range"),
])
def test_a_state_option_must_be_a_finite_number_the_dtype_holds(value: str, words: str) -> None:
    with pytest.raises(SetupError, match=rf"state\.x={value!r}.*{words}"):
        load_profile("gr00t").with_overrides(options={"state.x": value})


@pytest.mark.parametrize(("values", "dtype", "words"), [
    ("[nan]", "float32", "finite numbers"), ("[inf]", "float32", "finite numbers"),
    ("[1e39]", "float32", "float32's range"), ("[]", "float32", "non-empty list"),
    ("[1.5]", "int32", "whole numbers for int32"), ("[3e9]", "int32", "int32's range"),
    ('["a"]', "float32", "numbers only"),
])
def test_a_profile_state_constant_must_be_what_its_dtype_holds(values: str, dtype: str,
                                                                words: str) -> None:
    text = GR00T_TOML.read_text().replace(
        '"state.x" = { dtype = "float32", values = [0.0], option = "state.x" }',
        f'"state.x" = {{ dtype = "{dtype}", values = {values}, option = "state.x" }}')
    with pytest.raises(SetupError, match=rf"request\.state\.state\.x\.values is .*{words}"):
        parse_profile(text.encode(), "x.toml")


def test_the_custom_profile_in_docs_gr00t_md_loads_and_matches_the_shipped_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The profile file docs/gr00t.md shows for another host, a pinned wire and a token."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "gr00t.md").read_text()
    [block] = [b.split("\n", 1)[1] for b in docs.split("```toml")[1:]
               if 'name = "my-gr00t"' in b.split("```")[0]]
    text = block.split("```")[0]
    profile = parse_profile(text.encode(), "docs/gr00t.md")
    shipped = load_profile("gr00t")
    assert (profile.endpoint, profile.settings.wire) == ("tcp://gpu-box:5555", "msgpack-numpy")
    assert profile.settings.api_token_env == "GR00T_API_TOKEN"
    monkeypatch.setenv("GR00T_API_TOKEN", "t0ken")
    assert profile.settings.api_token == "t0ken"
    # The same request and reply as the shipped profile: only the keys shown differ.
    assert profile.identity()["request_layout"] == shipped.identity()["request_layout"]
    assert (profile.replan_interval, profile.state_fed) == (shipped.replan_interval, "constant")
