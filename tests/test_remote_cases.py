"""Real LIBERO cases against real policy servers on 127.0.0.1.

One server is our own serving CLI, launched by the plugin from a profile; the other
is written in tests/openpi_reference_server.py from openpi's documented protocol alone,
so compatibility does not rest on our own server. Every transport failure must cost
exactly one errored case, with its cause recorded, and the run goes on.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from libero_native import native_first_observation
from openpi_reference_server import OpenpiReferenceServer

from harness.runs import run_folder, run_records
from harness.servers import free_port
from pytest_libero.catalog.inventory import load_inventory
from pytest_libero.protocol.parameters import SEED

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

HOLD = np.array([[0, 0, 0, 0, 0, 0, -1.0]] * 2)
SMALL = ["--libero-budget-mode=decisions", "--libero-max-policy-calls=2", "--libero-replan-interval=1"]


def websocket_profile(pytester: pytest.Pytester, endpoint: str, *, track: str = "rgb",
                      policy: str = "", extra: str = "") -> Path:
    return pytester.makefile(".toml", profile=f'''
        name = "remote"
        track = "{track}"
        [policy]
        transport = "websocket"
        endpoint = "{endpoint}"
        connect_timeout = 3.0
        {policy}
        {extra}
    ''')


def records(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return run_records(run_folder(pytester.path / "libero-results", "remote"))


def test_serving_cli_launched_by_the_profile(pytester: pytest.Pytester) -> None:
    endpoint = f"ws://127.0.0.1:{free_port()}"
    profile = websocket_profile(pytester, endpoint, extra=f'''
        [launch]
        command = ["{sys.executable}", "-m", "pytest_libero.serve", "--policy", "zero",
                   "--port", "{{port}}"]
        startup_timeout = 60
    ''')
    result = pytester.runpytest(f"--libero-profile={profile}", *SMALL)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*control cap reached after 2 controls, 2 policy calls*"])
    found = records(pytester)
    assert [r["policy_metadata"]["policy"] for r in found] == ["zero"] * 2
    assert all(r["policy_metadata"]["pytest_libero/server"]["episode_state"] == "per_connection"
               for r in found)
    assert all(r["counters"]["executed_controls"] == 2 for r in found)
    run = run_folder(pytester.path / "libero-results", "remote")
    assert "pytest-libero serve: ws://127.0.0.1" in (run / "server.log").read_text()
    with pytest.raises(OSError):  # the plugin stopped the server at the end
        socket.create_connection(("127.0.0.1", int(endpoint.rsplit(":", 1)[1])), timeout=1).close()


def test_requests_carry_nothing_private(pytester: pytest.Pytester) -> None:
    native = native_first_observation("libero_object", 0)
    [inventory] = [e for e in load_inventory()["entries"]
                   if (e["suite"], e["index"]) == ("libero_object", 0)]
    secret_text = [inventory[k] for k in ("bddl_sha256", "init_file_sha256",
                                          "states_array_sha256", "state0_sha256")]
    secret_text += [str(SEED), "reward", "success", "done", "seed", "bddl", "eef", "quat"]
    secret_vectors = [native[k] for k in ("robot0_eef_pos", "robot0_eef_quat",
                                          "alphabet_soup_1_pos", "basket_1_pos")]
    allowed = {"observation/image", "observation/wrist_image", "prompt", "observation/proprio"}
    checked: list[int] = []

    def inspect(request: dict[Any, Any]) -> dict[str, Any]:
        keys = {k.decode() if isinstance(k, bytes) else k for k in request}
        assert keys == allowed, f"request keys {sorted(keys)}"
        for key, value in request.items():
            text = json.dumps(str(key)) + (value if isinstance(value, str) else "")
            assert not any(s in text for s in secret_text), f"private text in {key!r}"
            if isinstance(value, (int, np.integer)):
                assert int(value) != SEED
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                assert value.shape == (9,)
                for vector in secret_vectors:
                    n = len(vector)
                    assert not any(np.allclose(value[i:i + n], vector, atol=1e-6)
                                   for i in range(10 - n)), f"private vector in {key!r}"
            if isinstance(value, np.ndarray) and value.dtype.kind == "u":
                assert value.shape == (256, 256, 3)
        checked.append(1)
        return {"actions": HOLD}

    with OpenpiReferenceServer(inspect, metadata={"model": "inspector"}) as server:
        profile = websocket_profile(pytester, server.uri, track="rgb+proprio")
        result = pytester.runpytest(
            f"--libero-profile={profile}", "--libero-scope=task_coverage",
            "--libero-suite=libero_object", "--libero-task-ids=0",
            "--libero-budget-mode=decisions", "--libero-max-policy-calls=3", "--libero-replan-interval=2",
        )
    result.assert_outcomes(failed=1)  # a native failure: no check inside the server fired
    [record] = records(pytester)
    assert record["outcome"] == "failure" and record["error"] is None
    assert len(checked) == record["counters"]["policy_calls"] == 3
    assert record["policy_metadata"] == {"model": "inspector"}


class Scenario:
    """A reference-server misbehaviour for the first case only."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.server: OpenpiReferenceServer | None = None

    def __call__(self, request: dict[Any, Any]) -> dict[str, Any]:
        self.count += 1
        if self.name == "timeout" and self.count == 1:
            time.sleep(4)  # longer than the call timeout; the late reply must be ignored
        if self.name == "text_frame" and self.count == 1:
            raise ValueError("model exploded")
        if self.name == "dies" and self.server is not None:
            # First request answered, the second dropped like a crash; then healthy.
            self.server.close_after_n = 1 if self.count == 1 else None
        return {"actions": HOLD, "marker": self.count}


@pytest.mark.parametrize(
    ("name", "cause", "words"),
    [
        ("timeout", "timeout", "1.5"),
        ("text_frame", "server_error", "model exploded"),
        ("dies", "connection_lost", "1006"),
    ],
)
def test_a_failing_call_errors_one_case_and_the_next_runs(
    pytester: pytest.Pytester, name: str, cause: str, words: str
) -> None:
    scenario = Scenario(name)
    with OpenpiReferenceServer(scenario) as server:
        scenario.server = server
        profile = websocket_profile(pytester, server.uri,
                                    policy="call_timeout = 1.5\n        wait_s = 10.0")
        result = pytester.runpytest(f"--libero-profile={profile}", *SMALL)
    result.assert_outcomes(errors=1, failed=1)
    first, second = records(pytester)
    assert first["outcome"] == "errored" and first["error"]["kind"] == "policy_transport"
    assert first["error"]["cause"] == cause
    assert words in first["error"]["message"] + first["error"]["traceback"]
    assert second["outcome"] == "failure" and second["error"] is None
    assert second["counters"]["policy_calls"] == 2
    result.stdout.fnmatch_lines(["*1 failure, 1 errored, 0 unattempted*"])


def test_server_that_never_comes_up_ends_the_session_before_any_case(pytester: pytest.Pytester) -> None:
    endpoint = f"ws://127.0.0.1:{free_port()}"
    profile = websocket_profile(pytester, endpoint, policy="wait_s = 1.0")
    started = time.monotonic()
    result = pytester.runpytest(f"--libero-profile={profile}", *SMALL)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert time.monotonic() - started < 30  # no simulator is built for an unreachable policy
    result.stderr.fnmatch_lines([f"*no policy server answered at {endpoint} within 1s*"
                                 "python -m pytest_libero.serve*"])
    assert not (pytester.path / "libero-results").exists()


def test_server_not_up_yet_is_waited_for(pytester: pytest.Pytester) -> None:
    port = free_port()
    server = OpenpiReferenceServer(lambda request: {"actions": HOLD}, port=port)
    timer = threading.Timer(2.0, server.start)
    timer.start()
    try:
        profile = websocket_profile(pytester, f"ws://127.0.0.1:{port}", policy="wait_s = 20.0")
        result = pytester.runpytest(f"--libero-profile={profile}", *SMALL)
    finally:
        timer.join()
        server.stop()
    result.assert_outcomes(failed=2)
    assert [r["error"] for r in records(pytester)] == [None, None]
