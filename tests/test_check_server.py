"""``pytest-libero check-server`` run as a user runs it, against real servers on 127.0.0.1:
pytest-libero's own openpi server, vla-eval 0.8's own model server, nothing at all, and
servers built to break one check each (tests/openpi_reference_server.py, in this process).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gr00t_reference_server import Gr00tReferenceServer
from openpi_reference_server import OpenpiReferenceServer

from harness.servers import free_port, serve_argv, serving, vla_eval_argv
from pytest_libero.certify.golden import GOLDEN_SET_SHA256

CHECKS = 13


def check_server(tmp_path: Path, profile: str, endpoint: str, *flags: str) -> tuple[int, dict[str, Any], str]:
    """The command's exit code, its certificate (empty when none was written) and output."""
    out = tmp_path / "certificate.json"
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "check-server",
                           "--profile", profile, "--endpoint", endpoint, "--out", str(out),
                           "--wait", "5", *flags, "--", "-q", "-p", "no:randomly"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    certificate = json.loads(out.read_text()) if out.exists() else {}
    return done.returncode, certificate, done.stdout + done.stderr


def verdicts(certificate: dict[str, Any]) -> dict[str, str]:
    return {check["check"]: check["verdict"] for check in certificate["checks"]}


def facts(certificate: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [c["facts"] for c in certificate["checks"] if c["check"] == name]
    return dict(found)


def test_pytest_libero_s_own_server_passes_and_the_certificate_says_what_was_checked(
        tmp_path: Path) -> None:
    port = free_port()
    with serving(serve_argv("zero", port, flags=["--host", "127.0.0.1"]), port, poll_s=0.2) as served:
        started = time.monotonic()
        code, certificate, output = check_server(tmp_path, "pi05", served.uri, "--deterministic")
        took = time.monotonic() - started
    assert code == 0, output
    assert took < 60, took
    assert certificate["format"] == "pytest-libero-certificate/1"
    assert certificate["wire"] == "websocket" and certificate["endpoint"] == served.uri
    assert certificate["golden_set_sha256"] == GOLDEN_SET_SHA256
    assert certificate["passed"] is True and certificate["failed"] == []
    assert len(certificate["checks"]) == CHECKS
    assert set(verdicts(certificate).values()) == {"passed"}
    assert facts(certificate, "test_it_answers_the_handshake_and_says_what_it_is")[
        "metadata"]["policy"] == "zero"
    latency = facts(certificate, "test_latency_over_fifty_calls")
    assert latency["calls"] == 50 and 0 < latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
    assert set(facts(certificate, "test_throughput_at_one_two_and_four_clients")[
        "calls_per_s"]) == {"1", "2", "4"}
    assert facts(certificate, "test_a_repeated_input_gets_the_same_reply")["deterministic"] is True


def test_vla_eval_s_own_server_passes_over_its_wire(tmp_path: Path) -> None:
    pytest.importorskip("vla_eval")
    port = free_port()
    with serving(vla_eval_argv(port), port, poll_s=0.2, health_path="/health") as served:
        code, certificate, output = check_server(tmp_path, "vla-eval", served.uri, "--deterministic")
    assert code == 0, output
    assert certificate["wire"] == "vla-eval"
    assert certificate["server"]["model_server"] == "ProbeServer"
    assert set(verdicts(certificate).values()) == {"passed"}


def test_a_server_the_profile_cannot_feed_fails_the_handshake_naming_why(tmp_path: Path) -> None:
    pytest.importorskip("vla_eval")
    port = free_port()
    with serving(vla_eval_argv(port, "--args.state=true"), port, poll_s=0.2,
                 health_path="/health") as served:
        code, certificate, output = check_server(tmp_path, "vla-eval", served.uri)
    assert code == 1, output
    assert "test_it_answers_the_handshake_and_says_what_it_is" in certificate["failed"]
    [handshake] = [c for c in certificate["checks"]
                   if c["check"] == "test_it_answers_the_handshake_and_says_what_it_is"]
    assert "asks for the state" in handshake["why"], handshake


def test_a_vla_eval_server_that_ignores_episode_start_fails_the_reset_check(tmp_path: Path) -> None:
    pytest.importorskip("vla_eval")
    port = free_port()
    with serving(vla_eval_argv(port, "--args.mode=keeps_state"), port, poll_s=0.2,
                 health_path="/health") as served:
        code, certificate, output = check_server(tmp_path, "vla-eval", served.uri, "--deterministic")
    assert code == 1, output
    assert certificate["failed"] == ["test_an_episode_start_resets_the_server"], output


@pytest.mark.parametrize("generation", ["npy", "msgpack-numpy"])
def test_a_gr00t_server_of_either_generation_passes_over_zeromq(
        tmp_path: Path, generation: str) -> None:
    with Gr00tReferenceServer(generation=generation) as server:
        code, certificate, output = check_server(tmp_path, "gr00t", server.uri)
    assert code == 0, output
    assert certificate["wire"] == "gr00t"
    # Its replies count its calls: they never repeat, so the checks that need them to say so.
    found = verdicts(certificate)
    assert found["test_an_episode_start_resets_the_server"] == "skipped"
    assert found["test_concurrent_clients_each_get_their_own_answer"] == "skipped"
    assert facts(certificate, "test_a_repeated_input_gets_the_same_reply")["deterministic"] is False
    assert {v for k, v in found.items() if "reset" not in k and "concurrent" not in k} == {"passed"}
    assert all(facts(certificate, f"test_a_malformed_observation_is_refused_and_the_server_lives_on"
                                  f"[{kind}]")["answer"] == "error"
               for kind in ("missing image", "float image", "oversized image"))


def test_no_server_is_exit_2_in_seconds(tmp_path: Path) -> None:
    started = time.monotonic()
    # A wait of 1 s (the helper's 5 s is for servers that answer): a refused connection
    # is retried until then, and the command ends at once after it.
    code, certificate, output = check_server(tmp_path, "pi05", f"ws://127.0.0.1:{free_port()}",
                                             "--wait", "1")
    assert code == 2, output
    assert time.monotonic() - started < 15
    assert "Connection refused" in output and certificate == {}


def brightness(obs: dict[str, Any]) -> np.ndarray:
    """A reply that belongs to its observation: the image's mean brightness, scaled."""
    actions = np.zeros((2, 7))
    actions[:, 0] = float(np.asarray(obs["observation/image"]).mean()) / 255.0
    return actions


def crosstalk() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Answers the latest observation to arrive, not its own: right alone, crossed together."""
    latest: dict[str, Any] = {}

    def policy(obs: dict[str, Any]) -> dict[str, Any]:
        latest["obs"] = obs
        time.sleep(0.1)
        return {"actions": brightness(latest["obs"])}
    return policy


def keeps_state() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Counts every call of every connection: an episode start resets nothing."""
    calls = [0]
    lock = threading.Lock()

    def policy(obs: dict[str, Any]) -> dict[str, Any]:
        with lock:
            calls[0] += 1
            actions = brightness(obs)
            actions[:, 1] = calls[0] / 1000
        return {"actions": actions}
    return policy


def dies_on_malformed() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Reads any image it is sent, then fails every call after a malformed one."""
    dead = [False]

    def policy(obs: dict[str, Any]) -> dict[str, Any]:
        image = np.asarray(obs.get("observation/image", np.zeros((1, 1, 3))))
        if dead[0] or image.dtype != np.uint8 or image.shape != (256, 256, 3):
            dead[0] = True
            raise RuntimeError("the model crashed")
        return {"actions": brightness(obs)}
    return policy


def changes_its_chunk() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Answers two actions, then three, then two..."""
    calls = [0]

    def policy(obs: dict[str, Any]) -> dict[str, Any]:
        calls[0] += 1
        return {"actions": np.zeros((2 + calls[0] % 2, 7))}
    return policy


def random_replies() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Samples its actions: never the same reply twice."""
    rng = np.random.default_rng()
    return lambda obs: {"actions": rng.uniform(-0.5, 0.5, (2, 7))}


BROKEN: dict[str, tuple[Callable[[], Callable[[dict[str, Any]], dict[str, Any]]], str]] = {
    "swaps replies under concurrency": (crosstalk, "test_concurrent_clients_each_get_their_own_answer"),
    "ignores the episode start": (keeps_state, "test_an_episode_start_resets_the_server"),
    "dies on a malformed input": (dies_on_malformed,
                                  "test_a_malformed_observation_is_refused_and_the_server_lives_on"),
    "answers float16": (lambda: lambda obs: {"actions": brightness(obs).astype(np.float16)},
                        "test_the_actions_are_well_formed_floats_in_range"),
    "answers NaN": (lambda: lambda obs: {"actions": np.full((2, 7), np.nan)},
                    "test_the_actions_are_well_formed_floats_in_range"),
    "changes its chunk length": (changes_its_chunk, "test_every_reply_holds_as_many_actions"),
    "samples though declared deterministic": (random_replies,
                                              "test_a_repeated_input_gets_the_same_reply"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_server_built_to_break_a_check_fails_it_by_name(tmp_path: Path, name: str) -> None:
    make, check = BROKEN[name]
    with OpenpiReferenceServer(make(), policy_in_thread=True) as server:
        code, certificate, output = check_server(tmp_path, "pi05", server.uri, "--deterministic")
    assert code == 1, output
    failed = certificate["failed"]
    assert any(f.startswith(check) for f in failed), failed
    assert f"FAILED {check}" in output
    assert certificate["passed"] is False
