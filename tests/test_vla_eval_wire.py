"""vla-eval's wire against a real vla-eval 0.8 model server (tests/vla_eval_server.py: its own
PredictModelServer, started by its own run_server), no simulator.

What the server decoded must be what the profile meant to send (images byte for byte,
the instruction, the episode's task, the state constants only when asked for), and each
reply must come back as vla-eval's LIBERO executes it (one 7-vector, the gripper's sign).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from harness.servers import free_port, serving, vla_eval_argv
from pytest_libero.config.profiles import parse_profile
from pytest_libero.policy.contract import RAW_REPLY, Observation, validate_reply
from pytest_libero.policy.errors import ServerError, ServerUnavailable
from pytest_libero.policy.vla_eval.client import VlaEvalPolicy
from pytest_libero.policy.vla_eval.payload import VlaEvalLayout
from pytest_libero.protocol.errors import InvalidAction, SetupError

pytest.importorskip("vla_eval")
TASK = {"name": "open the top drawer of the cabinet", "suite": "libero_goal", "task_id": 3}
STATE = [0.1, 0.2, 0.3, 0.0, 0.0, 1.5, 0.04, -0.04]


@contextmanager
def served(*flags: str) -> Iterator[str]:
    """A probe server with ``--args.*`` flags, up and healthy; its ws:// address."""
    port = free_port()
    with serving(vla_eval_argv(port, *flags), port, poll_s=0.2, health_path="/health") as server:
        yield server.uri


def observation(seed: int) -> Observation:
    rng = np.random.default_rng(seed)
    images = {camera: rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
              for camera in ("agentview", "robot0_eye_in_hand")}
    return Observation(language=TASK["name"], images=images)


def policy_for(uri: str, **layout: Any) -> VlaEvalPolicy:
    return VlaEvalPolicy(uri, layout=VlaEvalLayout(**layout), connect_timeout=10.0,
                         call_timeout=10.0, wait_s=10.0)


def digest(image: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


def seen_by_server(policy: VlaEvalPolicy, sent: Observation) -> dict[str, Any]:
    """What the server decoded of ``sent`` (the client's raw action payload)."""
    payload = policy.client.act(policy.layout.payload(sent, policy.wants))
    seen: dict[str, Any] = payload["seen"]
    return seen


@pytest.mark.parametrize("image_format", ["png", "raw"])
def test_the_server_decodes_exactly_what_vla_eval_s_libero_would_send(image_format: str) -> None:
    with served() as uri:
        policy = policy_for(uri, image_format=image_format)
        try:
            policy.reset()
            assert policy.metadata["model_server"] == "ProbeServer"
            assert policy.metadata["protocol_version"] == 1
            policy.begin_episode(TASK)
            sent = observation(1)
            seen = seen_by_server(policy, sent)
            assert seen["keys"] == ["images", "task_description"]  # no wrist, no state unasked
            assert seen["images"] == {"agentview": digest(sent.images["agentview"])}
            assert seen["shapes"] == {"agentview": [256, 256, 3]}
            assert seen["task_description"] == TASK["name"]
            assert seen["task"] == TASK and seen["step"] == 0
        finally:
            policy.close()


def test_a_reply_is_executed_as_vla_eval_s_libero_executes_it() -> None:
    with served() as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            policy.begin_episode(TASK)
            sent = observation(2)
            reply = validate_reply(policy.infer(sent))
            expected = float(sent.images["agentview"].mean()) / 255.0
            assert reply.actions is not None and reply.actions.shape == (1, 7)
            assert reply.actions[0, 0] == pytest.approx(expected, rel=1e-6)
            assert reply.actions[0, 6] == -1.0  # -0.25 from the server: below zero opens
            raw = reply.extras[RAW_REPLY]["actions"]
            assert raw.dtype == np.float32 and raw[6] == np.float32(-0.25)
            again = validate_reply(policy.infer(observation(3)))  # the next seq, same socket
            assert again.actions is not None and again.actions[0, 0] != reply.actions[0, 0]
        finally:
            policy.close()


def test_the_wrist_image_goes_only_to_a_server_that_asks_for_it() -> None:
    with served("--args.wrist=true") as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            sent = observation(4)
            seen = seen_by_server(policy, sent)
            assert seen["images"] == {"agentview": digest(sent.images["agentview"]),
                                      "wrist": digest(sent.images["robot0_eye_in_hand"])}
        finally:
            policy.close()


def profile_text(uri: str, constants: str = "") -> bytes:
    return f'''
name = "mine"
track = "rgb"
[policy]
transport = "vla-eval"
endpoint = "{uri}"
connect_timeout = 10.0
call_timeout = 10.0
wait_s = 10.0
[request]
image_format = "png"
{constants}
'''.encode()


def test_a_server_asking_for_the_state_gets_declared_constants_or_is_refused() -> None:
    with served("--args.state=true") as uri:
        bare = parse_profile(profile_text(uri), "mine.toml")
        with pytest.raises(SetupError, match=r"asks for the state .*\(P5\).*\[request.constants\] "
                                             r"states = .*float64.*controller_states = .*float32"):
            bare.transport_impl.preflight(bare, None)
        declared = parse_profile(profile_text(uri, f'''[request.constants]
states = {{ dtype = "float64", values = {STATE} }}
controller_states = {{ dtype = "float32", values = {STATE} }}
'''), "mine.toml")
        facts = declared.transport_impl.preflight(declared, None)
        assert facts["observation_params"]["send_state"] is True
        assert declared.state_fed == "constant" and declared.identity()["state_fed"] == "constant"
        policy = declared.build_policy()
        assert isinstance(policy, VlaEvalPolicy)
        try:
            policy.reset()
            seen = seen_by_server(policy, observation(5))
            assert seen["states"] == {"dtype": "<f8", "values": STATE}
            assert seen["controller_states"]["dtype"] == "<f4"
            assert seen["controller_states"]["values"] == pytest.approx(STATE)
        finally:
            policy.close()


def test_a_server_asking_for_absolute_actions_is_refused_before_any_case() -> None:
    with served("--args.absolute=true") as uri:
        profile = parse_profile(profile_text(uri), "mine.toml")
        with pytest.raises(SetupError, match="absolute_action=True .* delta actions only"):
            profile.transport_impl.preflight(profile, None)


def test_a_server_error_errors_the_call_and_the_next_episode_connects_afresh() -> None:
    with served("--args.mode=fail") as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            with pytest.raises(ServerError, match="observation_failed: RuntimeError: the probe "
                                                  "model failed on purpose"):
                policy.infer(observation(6))
            assert not policy.client.connected
            policy.reset()  # a new connection, a new hello
            assert policy.connections == 2 and policy.client.connected
        finally:
            policy.close()


def test_a_chunk_is_refused_as_vla_eval_s_libero_cannot_execute_it() -> None:
    with served("--args.mode=chunk") as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            with pytest.raises(InvalidAction, match=r"shape \(4, 7\).* one \(7,\) action a reply"):
                policy.infer(observation(7))
        finally:
            policy.close()


def test_nothing_listening_is_unavailable_within_the_wait() -> None:
    policy = VlaEvalPolicy(f"ws://127.0.0.1:{free_port()}", layout=VlaEvalLayout(),
                           connect_timeout=1.0, call_timeout=1.0, wait_s=0.5)
    started = time.monotonic()
    with pytest.raises(ServerUnavailable, match="/health"):
        policy.reset()
    assert time.monotonic() - started < 5

