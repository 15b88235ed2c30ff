"""The checks check-server makes of a policy server, one pytest case each.

Every check sends golden observations (``certify/golden.py``) over the profile's own wire.
A check's failure names what the server did; what a check measures (latencies, the
replies' shape, whether replies repeat) is recorded as facts for the certificate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
import pytest

from pytest_libero.certify.plugin import ServerUnderTest
from pytest_libero.certify.wire import MALFORMED
from pytest_libero.policy.contract import (
    RAW_REPLY,
    EpisodeAware,
    Observation,
    Policy,
    validate_reply,
)

CONCURRENT_CLIENTS = 4
LATENCY_CALLS = 50
THROUGHPUT_CALLS = 10
"""Calls each client makes in a throughput measurement."""
WIDE_DTYPES = ("float32", "float64")


@contextmanager
def connected(server: ServerUnderTest) -> Iterator[Policy]:
    """A policy of its own, an episode started on it (a wire with episode messages is
    told the first golden case's task, as a case tells it)."""
    policy = server.line.policy()
    try:
        policy.reset()
        start_episode(server, policy)
        yield policy
    finally:
        policy.close()


def start_episode(server: ServerUnderTest, policy: Policy) -> None:
    """Tell an EpisodeAware policy's server that an episode starts, on its connection."""
    if isinstance(policy, EpisodeAware):
        golden = server.golden[0]
        suite, index = golden.case.rsplit("-", 1)
        policy.begin_episode({"name": golden.observation.language, "suite": suite,
                              "task_id": int(index)})


def actions_of(reply: Mapping[str, Any]) -> np.ndarray:
    """The reply's actions as the profile executes them (a transport's mapping applied)."""
    return np.asarray(reply.get("actions"))


def sent_dtypes(reply: Mapping[str, Any]) -> list[str]:
    """The dtypes of the actions as the server sent them, before a transport's mapping
    (GR00T's per-axis keys, vla-eval's vector)."""
    raw = reply.get(RAW_REPLY)
    values = raw.values() if isinstance(raw, Mapping) else [reply.get("actions")]
    return sorted({str(np.asarray(value).dtype) for value in values})


def first_reply(server: ServerUnderTest, observation: Observation) -> np.ndarray:
    """The reply to ``observation`` as the first call of a fresh connection's episode."""
    with connected(server) as policy:
        return actions_of(policy.infer(observation))


def test_it_answers_the_handshake_and_says_what_it_is(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    with connected(server) as policy:
        metadata = dict(policy.metadata)
    record_property("facts", {"metadata": metadata, "preflight": server.preflight})
    assert "preflight_error" not in server.preflight, server.preflight["preflight_error"]


def test_a_golden_observation_is_answered_within_the_timeout(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    with connected(server) as policy:
        started = time.monotonic()
        policy.infer(server.golden[0].observation)
        took = time.monotonic() - started
    record_property("facts", {"first_call_s": round(took, 4),
                              "call_timeout_s": server.profile.call_timeout})


def test_the_actions_are_well_formed_floats_in_range(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    shapes, dtypes = [], []
    with connected(server) as policy:
        for golden in server.golden:
            reply = policy.infer(golden.observation)
            sent = sent_dtypes(reply)
            shapes.append(list(actions_of(reply).shape))
            dtypes.append(sent)
            validate_reply(reply)  # dtype, shape, finiteness and the [-1, 1] range
            narrow = [dtype for dtype in sent if dtype not in WIDE_DTYPES]
            assert not narrow, (
                f"the actions for {golden.case} are {', '.join(narrow)}; send float32 or "
                "float64 (float16 loses the precision a delta action needs)")
    record_property("facts", {"shapes": shapes, "dtypes": dtypes})


def test_every_reply_holds_as_many_actions(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    with connected(server) as policy:
        # The range is the check above's business; here only the length counts.
        horizons = [validate_reply(policy.infer(g.observation), out_of_bounds="clip").horizon
                    for g in server.golden]
    record_property("facts", {"horizons": horizons})
    assert len(set(horizons)) == 1, f"the chunk length changed from call to call: {horizons}"


def test_a_repeated_input_gets_the_same_reply(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    observation = server.golden[0].observation
    first, again = first_reply(server, observation), first_reply(server, observation)
    same = bool(np.array_equal(first, again))
    record_property("facts", {"deterministic": same, "declared": server.deterministic})
    if server.deterministic:
        assert same, ("the same first observation on two fresh connections got two different "
                      "replies, and the policy is declared deterministic")


def test_an_episode_start_resets_the_server(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    golden = [g.observation for g in server.golden]
    fresh = first_reply(server, golden[0])
    if not server.deterministic and not np.array_equal(fresh, first_reply(server, golden[0])):
        pytest.skip("replies do not repeat, so a reset cannot be told from chance")
    with connected(server) as policy:
        for observation in golden[1:]:
            policy.infer(observation)  # the server's episode state moves on
        if isinstance(policy, EpisodeAware):
            start_episode(server, policy)  # on the same connection: episode_start alone
        else:
            policy.reset()
        after = actions_of(policy.infer(golden[0]))
    record_property("facts", {"reset_respected": bool(np.array_equal(after, fresh))})
    assert np.array_equal(after, fresh), (
        "after a new episode started, the first golden observation got another reply than on a "
        "fresh connection: the server kept state from the last episode")


def test_concurrent_clients_each_get_their_own_answer(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    golden = [g.observation for g in server.golden[:CONCURRENT_CLIENTS]]
    alone = [first_reply(server, observation) for observation in golden]
    if not server.deterministic and not np.array_equal(alone[0], first_reply(server, golden[0])):
        pytest.skip("replies do not repeat, so another client's answer cannot be told apart")
    together = _at_once([partial(first_reply, server, observation) for observation in golden])
    crossed = [(i, j) for i, reply in enumerate(together) for j, own in enumerate(alone)
               if i != j and not np.array_equal(reply, alone[i]) and np.array_equal(reply, own)]
    record_property("facts", {"clients": len(golden), "crossed": crossed})
    assert not crossed, (f"under {len(golden)} concurrent clients, client(s) got another "
                         f"client's answer (client, whose): {crossed}")
    differ = [i for i, reply in enumerate(together) if not np.array_equal(reply, alone[i])]
    assert not differ, f"client(s) {differ} got another answer together than alone"


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_observation_is_refused_and_the_server_lives_on(
        server: ServerUnderTest, kind: str, record_property: Callable[[str, Any], None]) -> None:
    with connected(server) as policy:
        taken = server.line.send_malformed(policy, server.golden[0].observation, kind)
    record_property("facts", {"answer": taken})
    alive = _still_serving(server)
    assert alive, f"after a {kind} observation the server answered no later client"
    assert taken != "answered", (f"a {kind} observation got an action, not an error or a "
                                 "closed connection")


def test_a_client_dropped_mid_call_does_not_stop_the_next(server: ServerUnderTest) -> None:
    with connected(server) as policy:
        server.line.abandon(policy, server.golden[0].observation)
    assert _still_serving(server), "after a client dropped mid-call the server answered no other"


def test_latency_over_fifty_calls(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    took = []
    with connected(server) as policy:
        for call in range(LATENCY_CALLS):
            started = time.perf_counter()
            policy.infer(server.golden[call % len(server.golden)].observation)
            took.append((time.perf_counter() - started) * 1e3)
    p50, p95, p99 = (float(np.percentile(took, q)) for q in (50, 95, 99))
    record_property("facts", {"calls": LATENCY_CALLS, "p50_ms": round(p50, 3),
                              "p95_ms": round(p95, 3), "p99_ms": round(p99, 3)})


def test_throughput_at_one_two_and_four_clients(
        server: ServerUnderTest, record_property: Callable[[str, Any], None]) -> None:
    rates = {}
    for clients in (1, 2, 4):
        started = time.perf_counter()
        _at_once([partial(_calls, server, client) for client in range(clients)])
        rates[str(clients)] = round(clients * THROUGHPUT_CALLS / (time.perf_counter() - started), 2)
    record_property("facts", {"calls_per_s": rates, "calls_per_client": THROUGHPUT_CALLS})


def _calls(server: ServerUnderTest, client: int) -> None:
    with connected(server) as policy:
        for call in range(THROUGHPUT_CALLS):
            policy.infer(server.golden[(client + call) % len(server.golden)].observation)


def _still_serving(server: ServerUnderTest) -> bool:
    try:
        first_reply(server, server.golden[1].observation)
    except Exception:  # noqa: BLE001 - any failure is the answer
        return False
    return True


def _at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Each call in a thread of its own, released together; their results in order (the
    first exception raised again)."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []
    start = threading.Barrier(len(calls))

    def run(index: int) -> None:
        try:
            start.wait()
            results[index] = calls[index]()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
