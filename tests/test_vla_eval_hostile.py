"""Hostile vla-eval servers: each misbehaviour is one clear error of the call, the socket
closed so nothing stale answers later, and the next connection served as usual.

The servers (tests/vla_eval_hostile_server.py) are written from the wire's description,
sharing no code with the client.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import pytest
from vla_eval_hostile_server import action, hostile_server, message, ndarray

from pytest_libero.policy.contract import Observation, validate_reply
from pytest_libero.policy.errors import (
    CallTimeout,
    CodecError,
    ConnectionLost,
    ProtocolViolation,
    ServerError,
)
from pytest_libero.policy.vla_eval.client import VlaEvalPolicy
from pytest_libero.policy.vla_eval.payload import VlaEvalLayout
from pytest_libero.protocol.errors import InvalidAction

Answer = Callable[[dict[str, Any]], Any]
CALL_TIMEOUT_S = 1.0
OBSERVATION = Observation(language="pick up the bowl", images={
    camera: np.zeros((256, 256, 3), dtype=np.uint8) for camera in ("agentview", "robot0_eye_in_hand")})


def huge(request: dict[str, Any]) -> list[bytes | str]:
    return action(request, np.zeros(70 * 1024 * 1024 // 4, dtype=np.float32))


def complex_actions(request: dict[str, Any]) -> list[bytes | str]:
    return [message("action", {"actions": {"__ndarray__": True, "data": b"\0" * 112,
                                           "dtype": "<c16", "shape": [7]}}, request["seq"])]


def object_actions(request: dict[str, Any]) -> list[bytes | str]:
    return [message("action", {"actions": {"__ndarray__": True, "data": b"\x80\x04N.",
                                           "dtype": "|O", "shape": [1]}}, request["seq"])]


def lying_shape(request: dict[str, Any]) -> list[bytes | str]:
    return [message("action", {"actions": {"__ndarray__": True, "data": b"\0" * 28,
                                           "dtype": "<f4", "shape": [1000, 1000]}}, request["seq"])]


def without_timestamp(request: dict[str, Any]) -> list[bytes | str]:
    data = msgpack.packb({"type": "action", "payload": {"actions": ndarray(np.zeros(7))},
                          "seq": request["seq"]}, use_bin_type=True)
    return [data]


HOSTILE: dict[str, tuple[Answer, type[Exception], str]] = {
    "another seq": (lambda r: action(r, seq=r["seq"] + 1), ProtocolViolation,
                    r"observation seq \d+ with an action of seq \d+"),
    "error message": (lambda r: [message("error", {"error": "observation_failed: boom"}, r["seq"])],
                      ServerError, "answered with an error: observation_failed: boom"),
    "text frame": (lambda r: ["Traceback: it broke"], ServerError, "it broke"),
    "closes mid-episode": (lambda r: None, ConnectionLost, "closed the connection before replying"),
    "over 64 MiB": (huge, ProtocolViolation, "larger than max_message_bytes"),
    "complex dtype": (complex_actions, CodecError, "dtype '<c16' is refused"),
    "object dtype": (object_actions, CodecError, r"dtype '\|O' is refused"),
    "shape its bytes do not fill": (lying_shape, CodecError, "needs 4000000 bytes"),
    "not msgpack": (lambda r: [b"\xc1\xc1 not msgpack"], CodecError,
                    "is the server speaking vla-eval's model-server protocol"),
    "no timestamp": (without_timestamp, ProtocolViolation, r"without \['timestamp'\]"),
    "unknown type": (lambda r: [message("actionz", {}, r["seq"])], ProtocolViolation,
                     "type 'actionz'"),
    "a hello for an action": (lambda r: [message("hello", {}, r["seq"])], ProtocolViolation,
                              "sent a hello message where the action was due"),
    "payload not a map": (lambda r: [message("action", [1, 2], r["seq"])], ProtocolViolation,
                          "payload is a list, not a map"),
}


def policy_for(uri: str) -> VlaEvalPolicy:
    return VlaEvalPolicy(uri, layout=VlaEvalLayout(), connect_timeout=3.0,
                         call_timeout=CALL_TIMEOUT_S, wait_s=5.0)


def switching(hostile: Answer) -> Answer:
    """``hostile`` on the first observation, well-formed answers after it."""
    calls: list[int] = []

    def answer(request: dict[str, Any]) -> Any:
        calls.append(1)
        return hostile(request) if len(calls) == 1 else action(request)
    return answer


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_reply_is_one_clear_error_and_the_next_episode_is_served(name: str) -> None:
    answer, error, words = HOSTILE[name]
    with hostile_server(switching(answer)) as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            with pytest.raises(error, match=words):
                policy.infer(OBSERVATION)
            assert not policy.client.connected  # nothing stale can answer a later request
            with pytest.raises(ConnectionLost, match="not connected"):
                policy.infer(OBSERVATION)
            policy.reset()
            reply = validate_reply(policy.infer(OBSERVATION))
            assert reply.actions is not None and reply.actions.shape == (1, 7)
        finally:
            policy.close()


def test_a_second_answer_to_one_observation_ends_the_episode_at_the_next_call() -> None:
    with hostile_server(lambda r: action(r) * 2) as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            policy.infer(OBSERVATION)
            time.sleep(0.2)  # the second answer has arrived
            with pytest.raises(ProtocolViolation, match="nobody asked for"):
                policy.infer(OBSERVATION)
        finally:
            policy.close()


def test_a_late_reply_times_out_and_dies_with_its_socket() -> None:
    with hostile_server(lambda r: action(r), delay_s=CALL_TIMEOUT_S + 0.5) as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            with pytest.raises(CallTimeout, match=f"call_timeout={CALL_TIMEOUT_S}"):
                policy.infer(OBSERVATION)
            assert not policy.client.connected
        finally:
            policy.close()


def test_a_server_that_never_answers_the_hello_is_named_within_the_connect_timeout() -> None:
    with hostile_server(lambda r: action(r), hello=lambda r: []) as uri:
        policy = policy_for(uri)
        started = time.monotonic()
        with pytest.raises(ProtocolViolation, match="answered no hello within 3.0s"):
            policy.reset()
        assert time.monotonic() - started < 10


@pytest.mark.parametrize("values", [[np.nan] * 7, [0.0] * 6 + [np.nan], [np.inf] + [0.0] * 6])
def test_a_non_finite_action_is_refused_the_gripper_rule_hides_nothing(values: list[float]) -> None:
    with hostile_server(lambda r: action(r, np.array(values, dtype=np.float32))) as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            with pytest.raises(InvalidAction, match="non-finite"):
                validate_reply(policy.infer(OBSERVATION))
        finally:
            policy.close()


@pytest.mark.parametrize("actions", [np.zeros(7, dtype=np.int32), np.zeros(7, dtype=bool),
                                     [0, 0, 0, 0, 0, 0, True]])
def test_integers_and_booleans_are_refused_not_read_as_floats(actions: Any) -> None:
    with hostile_server(lambda r: action(r, actions)) as uri:
        policy = policy_for(uri)
        try:
            policy.reset()
            with pytest.raises(InvalidAction, match="dtype|bool"):
                validate_reply(policy.infer(OBSERVATION))
        finally:
            policy.close()
