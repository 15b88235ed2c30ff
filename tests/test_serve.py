"""The serving CLI and request layouts, against real sockets on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scripted_policies import TESTS_DIR

from harness.servers import free_port, serve_argv, serving
from pytest_libero.policy.contract import Observation
from pytest_libero.policy.errors import ServerError
from pytest_libero.policy.openpi.client import WebsocketPolicyClient, check_health
from pytest_libero.policy.openpi.layout import COUNTER_KEYS, RequestLayout
from pytest_libero.policy.openpi.probe import probe_server
from pytest_libero.policy.openpi.server import SERVER_KEY
from pytest_libero.policy.openpi.transport import WebsocketPolicy


def observation(calls: int = 0, controls: int = 0, proprio: bool = False) -> Observation:
    rng = np.random.default_rng(calls)
    images = {c: rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)
              for c in ("agentview", "robot0_eye_in_hand")}
    return Observation("put the bowl on the plate", images,
                       np.arange(9, dtype=np.float64) if proprio else None, calls, controls)


def test_layout_round_trip_and_whitelist() -> None:
    layout = RequestLayout(counters=True, constants={"observation/state": np.zeros(8, np.float32)})
    request = layout.encode(observation(3, 12, proprio=True))
    assert set(request) == {"observation/image", "observation/wrist_image", "prompt",
                            "observation/proprio", "observation/state", *COUNTER_KEYS}
    back = layout.decode(request)
    assert back.language == "put the bowl on the plate"
    assert (back.policy_calls, back.executed_controls) == (3, 12)
    assert np.array_equal(back.images["agentview"], request["observation/image"])
    assert back.proprio is not None and back.proprio.tolist() == list(range(9))
    plain = RequestLayout().encode(observation())
    assert set(plain) == {"observation/image", "observation/wrist_image", "prompt"}


def test_layout_refuses_ambiguous_keys() -> None:
    with pytest.raises(ValueError, match="more than one input"):
        RequestLayout(language="observation/image")
    with pytest.raises(ValueError, match="camera"):
        RequestLayout(images={"agentview": "a"})


@pytest.fixture
def served_zero() -> Iterator[str]:
    port = free_port()
    # No wait here: the client's own wait for /healthz is part of what is tested.
    with serving(serve_argv("zero", port, options=["chunk=3"]), port, wait_s=None) as server:
        yield server.uri


def test_serving_cli_speaks_openpi(served_zero: str) -> None:
    policy = WebsocketPolicy(served_zero, layout=RequestLayout(), connect_timeout=5,
                             call_timeout=5, wait_s=20)
    try:
        policy.reset()  # waits for /healthz, then reads the metadata frame
        assert policy.metadata == {"policy": "zero", "chunk": 3, SERVER_KEY: {
            "episode_state": "per_connection", "infer_batch": False, "max_batch": 1,
            "batch_wait_ms": 0.0}}
        reply = policy.infer(observation())
        assert reply["actions"].shape == (3, 7) and reply["actions"][0, 6] == -1.0
        assert reply["server_timing"]["infer_ms"] >= 0
    finally:
        policy.close()
    check_health(served_zero, timeout=2)


def test_served_policy_exception_is_a_text_frame_traceback() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "pytest_libero.serve", "--policy", "replay",
         "--option", "actions=/nonexistent.npy", "--port", str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30, check=False,
    )
    assert refused.returncode == 2
    assert "/nonexistent.npy does not exist" in refused.stdout

    port = free_port()
    with serving(serve_argv("zero", port), port, wait_s=None) as server:
        client = WebsocketPolicyClient(server.uri, connect_timeout=5, call_timeout=5)
        client.connect(wait_s=20)
        with pytest.raises(ServerError) as info:
            client.infer({"prompt": "no images"})  # the layout cannot decode this
        assert "request lacks" in info.value.traceback
        assert "Traceback" in info.value.traceback
        client.close()
        client.connect(wait_s=5)  # the server goes on accepting connections
        assert client.infer(RequestLayout().encode(observation()))["actions"].shape == (5, 7)
        client.close()


@pytest.mark.parametrize("flags", [["--max-batch", "0"], ["--batch-wait-ms", "-1"]])
def test_serving_cli_refuses_bad_batch_options(flags: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_libero.serve", "--policy", "zero", *flags],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--max-batch must be at least 1 and --batch-wait-ms at least 0" in done.stderr


def test_served_replay_follows_the_counters(tmp_path: Path) -> None:
    actions = np.linspace(-1, 1, 14).reshape(2, 7)
    path = tmp_path / "a.npy"
    np.save(path, actions)
    port = free_port()
    argv = serve_argv("replay", port, options=[f"actions={path}", "chunk=1"])
    with serving(argv, port, wait_s=None) as server:
        policy = WebsocketPolicy(server.uri, layout=RequestLayout(counters=True),
                                 connect_timeout=5, call_timeout=5, wait_s=20)
        policy.reset()
        first = policy.infer(observation(0, 0))
        second = policy.infer(observation(1, 1))
        done = policy.infer(observation(2, 2))
        assert np.array_equal(first["actions"][0], actions[0])
        assert np.array_equal(second["actions"][0], actions[1])
        assert done["stop"] is True
        policy.close()


def test_every_connection_starts_a_fresh_episode_without_counters() -> None:
    """The shipped profiles send no counters, as openpi's own client does not: the server
    must still reset the policy for each episode (connection), and a connection that only
    checks the server is up must not reset anything."""
    port = free_port()
    argv = serve_argv("scripted_policies:CountsSinceReset", port)
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}

    def first_values(policy: WebsocketPolicy, calls: int) -> list[float]:
        return [float(policy.infer(observation(n))["actions"][0, 0]) for n in range(calls)]

    with serving(argv, port, env=env, wait_s=None) as server:
        uri = server.uri
        policy = WebsocketPolicy(uri, layout=RequestLayout(), connect_timeout=5,
                                 call_timeout=5, wait_s=20)
        policy.reset()
        assert first_values(policy, 3) == [0.01, 0.02, 0.03]
        probe_server(uri, wait_s=5, connect_timeout=5)  # connects, reads metadata, leaves
        assert first_values(policy, 1) == [0.04]  # the probe reset nothing
        policy.reset()  # the next episode: a new connection
        assert first_values(policy, 2) == [0.01, 0.02]
        policy.close()
        counted = WebsocketPolicy(uri, layout=RequestLayout(counters=True), connect_timeout=5,
                                  call_timeout=5, wait_s=5)
        counted.reset()
        assert first_values(counted, 2) == [0.01, 0.02]
        # A client that keeps its connection across episodes says so with the counters.
        assert float(counted.infer(observation(0))["actions"][0, 0]) == 0.01
        counted.close()
