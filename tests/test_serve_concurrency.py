"""Concurrent episodes against one ``python -m pytest_libero.serve`` on 127.0.0.1.

Each connection is one episode with its own policy state; a batch policy answers the
requests of several connections in one call, and every connection gets its own reply,
or its own error (issue 15).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from scripted_policies import TESTS_DIR

from harness.runs import run_folder
from harness.servers import free_port, serve_argv, serving
from pytest_libero.evidence.reader import read_actions
from pytest_libero.policy.contract import Observation
from pytest_libero.policy.errors import ServerError
from pytest_libero.policy.openpi.client import WebsocketPolicyClient
from pytest_libero.policy.openpi.layout import RequestLayout
from pytest_libero.policy.openpi.server import SERVER_KEY

pytest_plugins = ["pytester"]


@contextmanager
def served(policy: str, *flags: str) -> Iterator[str]:
    """The serving CLI with a policy from tests/scripted_policies.py; yields its URI."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}
    with serving(serve_argv(policy, port, flags=flags), port, env=env, poll_s=2.0) as server:
        yield server.uri


def request(prompt: str) -> dict[str, Any]:
    images = {c: np.zeros((256, 256, 3), np.uint8) for c in ("agentview", "robot0_eye_in_hand")}
    return RequestLayout().encode(Observation(prompt, images))


def client(uri: str) -> WebsocketPolicyClient:
    connection = WebsocketPolicyClient(uri, connect_timeout=5, call_timeout=20)
    connection.connect(wait_s=5)
    return connection


def in_lockstep(count: int, rounds: int,
                step: Callable[[int, int, threading.Barrier], Any]) -> list[list[Any]]:
    """``step(client, round, barrier)`` for ``count`` clients at once, each on its own
    thread, every round started together; returns what each step returned, or raised."""
    barrier = threading.Barrier(count, timeout=60)
    results: list[list[Any]] = [[] for _ in range(count)]

    def run(index: int) -> None:
        for number in range(rounds):
            barrier.wait()
            try:
                results[index].append(step(index, number, barrier))
            except Exception as exc:
                results[index].append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def test_a_plain_stateful_policy_keeps_one_state_per_connection() -> None:
    """Four episodes call in lockstep: each sees 1, 2, 3 calls since its reset. One
    shared policy object would answer counts from 1 to 12, mixed between them."""
    with served("scripted_policies:CountsSinceReset", "--max-batch", "8") as uri:
        clients = [client(uri) for _ in range(4)]
        assert clients[0].metadata[SERVER_KEY] == {
            "episode_state": "per_connection", "infer_batch": False, "max_batch": 1,
            "batch_wait_ms": 0.0}  # without infer_batch, one call at a time
        firsts = in_lockstep(4, 3, lambda i, n, _: float(
            clients[i].infer(request(f"client {i}"))["actions"][0, 0]))
        assert firsts == [[0.01, 0.02, 0.03]] * 4
        clients[0].reconnect()  # a new episode on the same server starts from reset
        assert float(clients[0].infer(request("again"))["actions"][0, 0]) == 0.01
        for connection in clients:
            connection.close()


def test_batched_replies_reach_their_own_connection() -> None:
    """A batch is full once every open connection has a request waiting (each has at
    most one in flight), so three rounds take far less than one 5 s wait."""
    with served("scripted_policies:EchoesInBatches", "--batch-wait-ms", "5000") as uri:
        clients = [client(uri) for _ in range(4)]
        assert clients[0].metadata == {"policy": "echoes-in-batches", SERVER_KEY: {
            "episode_state": "per_connection", "infer_batch": True, "max_batch": 16,
            "batch_wait_ms": 5000.0}}
        started = time.monotonic()
        replies = in_lockstep(4, 3, lambda i, n, _: clients[i].infer(request(f"client {i} call {n}")))
        assert time.monotonic() - started < 4
        for i, answers in enumerate(replies):
            assert [r["echo"] for r in answers] == [f"client {i} call {n}" for n in range(3)]
            assert [r["calls"] for r in answers] == [1, 2, 3]  # its own episode state
            assert [r["server_timing"]["batch"] for r in answers] == [4, 4, 4]  # full batches
            assert len({r["episode"] for r in answers}) == 1
        assert len({answers[0]["episode"] for answers in replies}) == 4
        for connection in clients:
            connection.close()


def test_a_batch_holds_at_most_max_batch_requests() -> None:
    with served("scripted_policies:EchoesInBatches", "--max-batch", "2",
                "--batch-wait-ms", "1000") as uri:
        clients = [client(uri) for _ in range(5)]
        [replies] = zip(*in_lockstep(5, 1, lambda i, n, _: clients[i].infer(request(f"c{i}"))),
                        strict=True)
        assert [r["echo"] for r in replies] == [f"c{i}" for i in range(5)]
        assert sorted(r["server_timing"]["batch"] for r in replies) == [1, 2, 2, 2, 2]
        for connection in clients:
            connection.close()


def test_a_bad_request_in_a_batch_errors_only_its_own_connection() -> None:
    with served("scripted_policies:EchoesInBatches", "--max-batch", "4",
                "--batch-wait-ms", "1000") as uri:
        clients = [client(uri) for _ in range(4)]

        def step(i: int, n: int, _: threading.Barrier) -> Any:
            if i == 3 and n == 0:
                with pytest.raises(ServerError) as bad:
                    clients[i].infer({"prompt": "no images"})  # the layout cannot decode it
                clients[i].reconnect()  # before the next round: its batch waits for it
                return bad.value
            return clients[i].infer(request(f"client {i} call {n}"))

        first, second = zip(*in_lockstep(4, 2, step), strict=True)
        bad = first[3]
        assert isinstance(bad, ServerError) and "request lacks" in bad.traceback
        assert [(r["echo"], r["calls"], r["server_timing"]["batch"]) for r in first[:3]] == [
            (f"client {i} call 0", 1, 3) for i in range(3)]
        # The good episodes go on; the bad client's new connection is a fresh episode.
        assert [(r["echo"], r["calls"], r["server_timing"]["batch"]) for r in second] == [
            (f"client {i} call 1", 2 if i < 3 else 1, 4) for i in range(4)]
        for connection in clients:
            connection.close()


def test_infer_batch_raising_errors_that_batch_and_the_server_goes_on() -> None:
    with served("scripted_policies:EchoesInBatches", "--max-batch", "3",
                "--batch-wait-ms", "5000") as uri:
        clients = [client(uri) for _ in range(3)]
        prompts = ["fine", "fine too", "explode"]
        [failed] = zip(*in_lockstep(3, 1, lambda i, n, _: clients[i].infer(request(prompts[i]))),
                       strict=True)
        for error in failed:
            assert isinstance(error, ServerError), error
            assert "ValueError: asked to explode in a batch of 3" in error.traceback
            assert "infer_batch" in error.traceback and "Traceback" in error.traceback
        for connection in clients:
            connection.reconnect()
        [answers] = zip(*in_lockstep(3, 1, lambda i, n, _: clients[i].infer(request(f"again {i}"))),
                        strict=True)
        assert [(r["echo"], r["calls"], r["server_timing"]["batch"]) for r in answers] == [
            (f"again {i}", 1, 3) for i in range(3)]  # reset: fresh episodes after the error
        for connection in clients:
            connection.close()


@pytest.mark.simulator
def test_two_workers_against_one_served_policy_each_see_their_own_state(
    pytester: pytest.Pytester,
) -> None:
    """Real LIBERO episodes under -n 2 against one served stateful policy whose calls
    are slow enough that the two episodes' calls interleave."""
    calls = 6
    with served("scripted_policies:CountsAcrossEpisodes", "--option", "delay_s=0.5") as uri:
        profile = pytester.makefile(".toml", profile=f'''
            name = "remote"
            [policy]
            transport = "websocket"
            endpoint = "{uri}"
            connect_timeout = 5.0
            call_timeout = 30.0
        ''')
        result = pytester.runpytest(f"--libero-profile={profile}", "-n", "2",
                                    "--libero-budget-mode=decisions",
                                    f"--libero-max-policy-calls={calls}",
                                    "--libero-replan-interval=1")
    result.assert_outcomes(failed=2)
    run = run_folder(pytester.path / "libero-results", "remote")
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert {r["worker"] for r in records} == {"gw0", "gw1"}
    served_at: dict[str, list[int]] = {}
    for case in ("libero_10-00", "libero_10-01"):
        chunks = [c.actions for c in read_actions(run / "cases" / case) if c.actions is not None]
        own = [round(float(a[0, 0]) * 100) for a in chunks]
        assert own == list(range(1, calls + 1)), f"{case}: not its own state from reset ({own})"
        served_at[case] = [round(float(a[0, 1]) * 100) for a in chunks]
    first, second = served_at.values()
    assert min(first) < max(second) and min(second) < max(first), (
        f"the episodes did not overlap, so this proved nothing: {served_at}")
    assert [r["policy_metadata"] for r in records] == [{
        "policy": "counts-across-episodes",
        SERVER_KEY: {"episode_state": "per_connection", "infer_batch": False, "max_batch": 1,
                     "batch_wait_ms": 0.0}}] * 2
