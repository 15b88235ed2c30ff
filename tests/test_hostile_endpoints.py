"""Hostile policy endpoints: every misbehaviour costs exactly one case, with its cause.

Each behaviour below is served by a real websocket server on 127.0.0.1 (the
independent openpi reference server in tests/openpi_reference_server.py) and
misbehaves on the first call of its case only. Two matrices use the same table:

* ``test_hostile_reply_is_classified`` (fast, no simulator): the reply goes through the
  plugin's websocket client and ``validate_reply``, exactly as an episode does, and the
  error record must name the expected kind, cause and words; the same client then
  reconnects and gets its own healthy answer.
* ``test_hostile_matrix_in_one_session`` (simulator): one pytest session of real
  LIBERO cases, one per behaviour with healthy cases between and after them. The
  summary must count exactly one errored case per hostile behaviour, and the healthy
  cases must run their own actions (in particular the one right after a reply that
  came too late).
"""

from __future__ import annotations

import contextvars
import json
import math
import pickle
import resource
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from openpi_reference_server import OpenpiReferenceServer, server_pack
from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import State

from harness.runs import run_folder, run_records
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.episode.loop import error_record
from pytest_libero.evidence.reader import read_actions
from pytest_libero.policy.contract import validate_reply
from pytest_libero.policy.errors import ProtocolViolation
from pytest_libero.policy.openpi.client import DEFAULT_MAX_MESSAGE_BYTES, WebsocketPolicyClient
from pytest_libero.protocol.errors import EpisodeError

pytest_plugins = ["pytester"]

OVERSIZED_BYTES = 100 * 1024 * 1024  # far above any action chunk, and above the 64 MiB cap
LATE_GRIPPER = 0.5  # what the slow server's late reply would make the gripper do


def hold(gripper: float = -1.0, rows: int = 2) -> np.ndarray:
    actions = np.zeros((rows, 7))
    actions[:, 6] = gripper
    return actions


class WritesMarker:
    """Unpickling this object creates ``path``: proof that something unpickled it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


def object_array_pickle(marker: Path) -> bytes:
    return pickle.dumps(np.array([WritesMarker(marker)], dtype=object))


@cache
def oversized_frame() -> bytes:
    """One unmasked binary websocket frame (serialized by websockets itself) holding a
    well-formed msgpack map whose single value is a 100 MiB bin.

    Built once, ahead of any request: framing 100 MiB copies it twice, which on a
    loaded machine can take the server thread longer than a call timeout.
    """
    data = msgpack.packb({"actions": bytes(OVERSIZED_BYTES)}, use_bin_type=True)
    assert isinstance(data, bytes) and len(data) > OVERSIZED_BYTES
    return Frame(Opcode.BINARY, data).serialize(mask=False)


# ------------------------------------------------------------------ the matrix


@dataclass(frozen=True)
class Behaviour:
    """One way a policy endpoint can answer its first call, and what must follow.

    Exactly one of ``reply`` (a map the server packs as openpi does), ``raw`` (frames
    sent instead of a packed reply), ``frame`` (bytes written to the socket as they
    are: a whole websocket frame built ahead), ``sleep`` (how many call timeouts the policy takes
    at most, answering as soon as the client gives the connection up; ``math.inf`` for never),
    ``raises`` and ``drop`` describes the misbehaviour.
    ``kind`` is the expected ``error.kind`` ("" when the contract makes it no error),
    ``cause`` the expected ``error.cause`` and ``words`` a fragment the message (or
    the server's traceback) must hold.
    """

    name: str
    kind: str
    cause: str
    words: str
    reply: Callable[[], dict[str, Any]] | None = None
    raw: Callable[[Path], bytes | str | list[bytes | str]] | None = None
    frame: Callable[[], bytes] | None = None
    sleep: float | None = None
    raises: bool = False
    drop: bool = False


def _nan() -> dict[str, Any]:
    actions = hold()
    actions[1, 2] = np.nan
    return {"actions": actions}


def _inf() -> dict[str, Any]:
    actions = hold()
    actions[0, 0] = -np.inf
    return {"actions": actions}


INVALID = "invalid_action"
TRANSPORT = "policy_transport"

BEHAVIOURS: tuple[Behaviour, ...] = (
    Behaviour("nan", INVALID, "invalid_action", "non-finite value nan at (1, 2)", reply=_nan),
    Behaviour("inf", INVALID, "invalid_action", "non-finite value -inf at (0, 0)", reply=_inf),
    Behaviour("six_dims", INVALID, "invalid_action", "shape (2, 6); expected (H, 7)",
              reply=lambda: {"actions": np.zeros((2, 6))}),
    Behaviour("eight_dims", INVALID, "invalid_action", "shape (2, 8); expected (H, 7)",
              reply=lambda: {"actions": np.zeros((2, 8))}),
    Behaviour("three_d", INVALID, "invalid_action", "shape (1, 2, 7); expected (H, 7)",
              reply=lambda: {"actions": np.zeros((1, 2, 7))}),
    Behaviour("empty_chunk", INVALID, "invalid_action", "empty chunk (0, 7)",
              reply=lambda: {"actions": np.zeros((0, 7))}),
    Behaviour("strings", INVALID, "invalid_action", "has dtype <U3",
              reply=lambda: {"actions": np.full((2, 7), "0.0")}),
    Behaviour("booleans", INVALID, "invalid_action", "has dtype bool",
              reply=lambda: {"actions": np.zeros((2, 7), dtype=bool)}),
    Behaviour("object_dtype", TRANSPORT, "codec", "nothing is unpickled",
              raw=lambda marker: msgpack.packb({"actions": {
                  b"__ndarray__": True, b"data": object_array_pickle(marker),
                  b"dtype": "|O", b"shape": [1]}}, use_bin_type=True)),
    Behaviour("out_of_range", INVALID, "invalid_action", "leaves the normalized range [-1, 1]",
              reply=lambda: {"actions": hold() * 1.5}),
    Behaviour("no_actions", INVALID, "invalid_action", "has no 'actions' (keys: ['action'])",
              reply=lambda: {"action": hold()}),
    # The contract allows a stop without actions: a native failure, never an error.
    Behaviour("stop_only", "", "", "policy stopped voluntarily",
              reply=lambda: {"stop": True}),
    Behaviour("pickle", TRANSPORT, "codec", "unpickling, which is never done",
              raw=lambda marker: msgpack.packb({"actions": {
                  b"nd": True, b"type": "|O", b"kind": b"O", b"shape": [1],
                  b"data": object_array_pickle(marker)}}, use_bin_type=True)),
    Behaviour("undecodable", TRANSPORT, "codec", "not a valid msgpack message",
              raw=lambda marker: b"\xc1\x93garbage\xff"),
    Behaviour("non_map", TRANSPORT, "protocol_violation", "decodes to a list, not a map",
              raw=lambda marker: server_pack(["actions", 0.0])),
    Behaviour("oversized", TRANSPORT, "protocol_violation",
              f"larger than max_message_bytes={DEFAULT_MAX_MESSAGE_BYTES}",
              frame=oversized_frame),
    Behaviour("text_frame", TRANSPORT, "server_error", "ValueError: hostile policy raised",
              raises=True),
    Behaviour("dropped", TRANSPORT, "connection_lost", "before replying (code 1006",
              drop=True),
    Behaviour("never_answers", TRANSPORT, "timeout", "did not answer within call_timeout=",
              sleep=math.inf),
    Behaviour("slow", TRANSPORT, "timeout", "did not answer within call_timeout=",
              sleep=1.75),
)
BY_NAME = {b.name: b for b in BEHAVIOURS}
HOSTILE = [b for b in BEHAVIOURS if b.kind]


# ------------------------------------------------------------------ the server

_CONNECTION: contextvars.ContextVar[ServerConnection] = contextvars.ContextVar("connection")


class MatrixServer(OpenpiReferenceServer):
    """The reference server, misbehaving per request prompt.

    ``behaviours`` maps a prompt to a behaviour; a prompt mapped to None (or unknown)
    is healthy and gets ``hold(gripper)`` with the gripper its ``grippers`` entry (the
    case's own signature), else -1. Only the first request of each prompt misbehaves.
    Policies run off the event loop, so a sleeping one never blocks other connections.
    """

    def __init__(self, behaviours: dict[str, Behaviour | None], *, call_timeout: float,
                 marker: Path, grippers: dict[str, float] | None = None) -> None:
        super().__init__(self._policy, metadata={"server": "hostile-matrix"},
                         raw_reply=self._raw, policy_in_thread=True)
        self.behaviours = behaviours
        self.call_timeout = call_timeout
        self.marker = marker
        self.grippers = grippers or {}
        self.calls: Counter[str] = Counter()
        self.release = threading.Event()  # lets a never-answering policy return at teardown
        self.events: list[tuple[float, str, str]] = []  # (monotonic time, prompt, what)
        self._lock = threading.Lock()
        for behaviour in behaviours.values():
            if behaviour is not None and behaviour.frame is not None:
                behaviour.frame()  # built now (cached), not inside a timed call

    async def _handler(self, ws: ServerConnection) -> None:
        _CONNECTION.set(ws)  # each connection's handler runs in its own task and context
        await super()._handler(ws)

    def _log(self, prompt: str, what: str) -> None:
        with self._lock:
            self.events.append((time.monotonic(), prompt, what))

    def _first(self, obs: dict[str, Any]) -> tuple[str, Behaviour | None]:
        prompt = str(obs.get("prompt"))
        behaviour = self.behaviours.get(prompt)
        return prompt, behaviour if self.calls[prompt] == 1 else None

    def _raw(self, index: int, obs: Any) -> bytes | str | list[bytes | str] | None:
        # Runs in the event loop for every request, before the policy.
        prompt = str(obs.get("prompt"))
        self.calls[prompt] += 1
        self._log(prompt, "request")
        _, behaviour = self._first(obs)
        if behaviour is None:
            return None
        if behaviour.raw is not None:
            return behaviour.raw(self.marker)
        if behaviour.frame is not None:
            # Only the send is left: the header leaves with the first write, and a
            # memoryview spares the transport a copy of what the socket did not take.
            _CONNECTION.get().transport.write(memoryview(behaviour.frame()))
            return []
        if behaviour.drop:
            _CONNECTION.get().transport.abort()  # like a crash: no close frame
            return []
        return None

    def _policy(self, obs: dict[str, Any]) -> dict[str, Any]:
        prompt, behaviour = self._first(obs)
        if behaviour is None:
            return {"actions": hold(self.grippers.get(prompt, -1.0))}
        if behaviour.raises:
            raise ValueError(f"hostile policy raised on {prompt!r}")
        if behaviour.sleep is not None:
            if math.isinf(behaviour.sleep):
                self.release.wait(300)
            else:
                self._until_given_up(self.call_timeout * behaviour.sleep)
            self._log(prompt, "late reply")
            return {"actions": hold(LATE_GRIPPER), "late": True}
        assert behaviour.reply is not None
        return behaviour.reply()

    @staticmethod
    def _until_given_up(most_s: float) -> None:
        """Wait until the client closes this connection (a correct one does at its call
        timeout), at most ``most_s``: the late reply then follows at once, well before the
        next case, set up in a second or two, can ask anything; a client that kept the
        socket would find it waiting there."""
        connection = _CONNECTION.get()
        deadline = time.monotonic() + most_s
        while connection.state is State.OPEN and time.monotonic() < deadline:
            time.sleep(0.01)

    def __enter__(self) -> MatrixServer:
        self.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.release.set()
        super().stop(timeout)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """Where a live pickle payload would write if anything unpickled it."""
    probe = tmp_path / "probe"
    pickle.loads(object_array_pickle(probe))  # the payload is live: it does write
    assert probe.exists()
    return tmp_path / "unpickled-marker"


# ------------------------------------------------------------- the fast matrix

SHORT_CALL_TIMEOUT = 1.0
"""For the rows that must time out; the others get LONG_CALL_TIMEOUT, so that a loaded
machine (the 100 MiB reply takes the in-process server about 0.5 s to start sending)
cannot turn them into timeouts."""
LONG_CALL_TIMEOUT = 15.0


def request(prompt: str) -> dict[str, Any]:
    return {"prompt": prompt, "observation/image": np.zeros((8, 8, 3), dtype=np.uint8)}


def one_call(client: WebsocketPolicyClient, prompt: str) -> dict[str, Any] | None:
    """One decision as an episode makes it: infer, then the contract; None if valid."""
    try:
        reply = validate_reply(client.infer(request(prompt)))
    except EpisodeError as exc:
        return error_record(exc)
    return {"kind": "", "cause": "", "message": "", "traceback": "", "reply": reply}


@pytest.mark.parametrize("behaviour", BEHAVIOURS, ids=[b.name for b in BEHAVIOURS])
def test_hostile_reply_is_classified(behaviour: Behaviour, marker: Path) -> None:
    behaviours: dict[str, Behaviour | None] = {behaviour.name: behaviour, "healthy": None}
    timeout = SHORT_CALL_TIMEOUT if behaviour.cause == "timeout" else LONG_CALL_TIMEOUT
    with MatrixServer(behaviours, call_timeout=timeout, marker=marker,
                      grippers={"healthy": -0.25}) as server:
        client = WebsocketPolicyClient(server.uri, connect_timeout=3.0, call_timeout=timeout)
        with client:
            client.connect()
            started = time.monotonic()
            record = one_call(client, behaviour.name)
            elapsed = time.monotonic() - started
            assert record is not None
            assert (record["kind"], record["cause"]) == (behaviour.kind, behaviour.cause), record
            if behaviour.kind:
                assert behaviour.words in record["message"] + record["traceback"], record
            else:  # stop_only: a valid stop, no actions
                assert record["reply"].stop and record["reply"].actions is None
            if behaviour.kind == TRANSPORT:
                # The socket the failure happened on is never used again.
                assert not client.connected
            if behaviour.cause == "timeout":
                assert timeout <= elapsed < timeout + 1.0
                # Let the late reply be written (to the dead socket) before the next call,
                # so that a reused socket would hand it out as the next answer.
                deadline = time.monotonic() + 5
                while behaviour.sleep != math.inf and not any(
                        what == "late reply" for _, _, what in server.events):
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            # The run goes on: the same client (reconnecting when the failure closed the
            # socket) gets its own healthy answer, not anything left from before.
            if not client.connected:
                client.reconnect(wait_s=3.0)
            after = one_call(client, "healthy")
            assert after is not None and after["kind"] == "", after
            np.testing.assert_array_equal(after["reply"].actions, hold(-0.25))
            assert "late" not in after["reply"].extras
    assert not marker.exists(), "a pickle payload was unpickled"


_OVERSIZED_SERVER = textwrap.dedent("""
    import sys, threading
    sys.path.insert(0, sys.argv[1])
    import msgpack
    from openpi_reference_server import OpenpiReferenceServer
    big = msgpack.packb({"actions": bytes(int(sys.argv[2]))}, use_bin_type=True)
    sent = threading.Event()
    def raw(index, obs):
        sent.set()
        return big
    with OpenpiReferenceServer(lambda obs: {}, raw_reply=raw) as server:
        print(server.port, flush=True)
        sys.stdin.read()  # until the test closes our stdin
    print("sent" if sent.is_set() else "not sent", flush=True)
""")


@pytest.fixture
def oversized_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A reference server in its own process answering every request with 100 MiB,
    so that the server's copy of the message is not counted in this process."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _OVERSIZED_SERVER, str(Path(__file__).parent),
         str(OVERSIZED_BYTES)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"ws://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_oversized_reply_is_refused_without_reading_it(
    oversized_server: tuple[str, subprocess.Popen[str]]
) -> None:
    uri, proc = oversized_server
    client = WebsocketPolicyClient(uri, connect_timeout=3.0, call_timeout=20.0)
    with client:
        client.connect()
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        tracemalloc.start()
        try:
            started = time.monotonic()
            with pytest.raises(ProtocolViolation, match="larger than max_message_bytes"):
                client.infer(request("oversized"))
            elapsed = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before
        assert not client.connected
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    assert proc.stdout.readline().strip() == "sent"  # the server really tried to send it
    # Refused from the frame header: neither the 100 MiB nor the 64 MiB cap was buffered.
    assert peak < 8 * 1024 * 1024, f"traced peak {peak} bytes"
    assert rss_growth < 32 * 1024 * 1024, f"peak RSS grew by {rss_growth} bytes"
    assert elapsed < 10


# ------------------------------------------------------- the simulator session

SUITE = "libero_90"
SESSION_CALL_TIMEOUT = 2.0
# Case order (native order of the selected tasks): healthy cases between and last, each
# timeout followed at once by a healthy case. None leads: each case is a fresh
# environment (a few seconds), and a healthy first case would check nothing the later ones do not.
ORDER: tuple[str | None, ...] = (
    "nan", "inf", "six_dims", "eight_dims", "three_d", "empty_chunk", "strings",
    "booleans", "object_dtype", "out_of_range", "no_actions", "stop_only", "pickle",
    "undecodable", "non_map", "oversized", "text_frame", "dropped", None,
    "never_answers", None, "slow", None,
)


def session_entries() -> list[tuple[Any, Behaviour | None]]:
    """Pair each slot of ORDER with a libero_90 entry whose language is unique in the
    selection, so that the request's prompt names the behaviour."""
    entries, seen = [], set()
    for entry in load_catalog().suite_entries(SUITE):
        if entry.language not in seen:
            seen.add(entry.language)
            entries.append(entry)
    assert len(entries) >= len(ORDER)
    return [(entry, None if name is None else BY_NAME[name])
            for entry, name in zip(entries, ORDER)]


def healthy_gripper(index: int) -> float:
    """A per-case gripper command, distinct from every other case and the late reply."""
    return round(-0.9 + 0.01 * index, 2)


def case_problems(entry: Any, behaviour: Behaviour | None, record: dict[str, Any],
                  run: Path, grippers: dict[str, float]) -> list[str]:
    """What is wrong with one case's record (all of it, so one slow run shows all)."""
    name = "healthy" if behaviour is None else behaviour.name
    where = f"{entry.case_id} ({name})"
    counters = record["counters"]
    problems: list[str] = []

    def check(ok: bool, what: str) -> None:
        if not ok:
            problems.append(f"{where}: {what}; summary: {record['summary']}")

    check(record["entry"]["language"] == entry.language, "not the selected entry")
    if behaviour is not None and behaviour.kind:
        error = record["error"] or {}
        check(record["outcome"] == "errored", f"outcome {record['outcome']}, not errored")
        check((error.get("kind"), error.get("cause")) == (behaviour.kind, behaviour.cause),
              f"error {error.get('kind')}/{error.get('cause')}, expected "
              f"{behaviour.kind}/{behaviour.cause}")
        check(behaviour.words in error.get("message", "") + error.get("traceback", ""),
              f"{behaviour.words!r} not in the error")
        # Misbehaving on the first call: nothing of the reply ever ran.
        check(counters["executed_controls"] == 0, f"{counters['executed_controls']} controls ran")
        check(counters["policy_calls"] == 1, f"{counters['policy_calls']} calls: the one made counts")
        return problems
    check(record["outcome"] == "failure" and record["error"] is None,
          f"outcome {record['outcome']}, error {record['error']}")
    if behaviour is not None:  # stop_only: the contract's voluntary stop
        check(record["truncation"] == "voluntary_stop", f"truncation {record['truncation']}")
        check((counters["policy_calls"], counters["stop_signals"], counters["executed_controls"])
              == (1, 1, 0), f"counters {counters}")
        return problems
    # A healthy case ran its own two chunks to the control cap (D x K = 2 controls).
    check(record["truncation"] == "control_cap", f"truncation {record['truncation']}")
    check((counters["policy_calls"], counters["executed_controls"]) == (2, 2),
          f"counters {counters}")
    chunks = list(read_actions(run / "cases" / entry.case_id))
    check([c.call for c in chunks] == [1, 2], f"chunks of calls {[c.call for c in chunks]}")
    own = hold(grippers[entry.language])
    check(all(c.actions is not None and np.array_equal(c.actions, own) for c in chunks),
          f"executed chunks {[None if c.actions is None else c.actions.tolist() for c in chunks]}"
          f", not its own {own.tolist()}")
    return problems


@pytest.mark.simulator
def test_hostile_matrix_in_one_session(pytester: pytest.Pytester, marker: Path) -> None:
    cases = session_entries()
    assert {b.name for _, b in cases if b is not None} == set(BY_NAME)
    behaviours = {entry.language: behaviour for entry, behaviour in cases}
    grippers = {entry.language: healthy_gripper(entry.index)
                for entry, behaviour in cases if behaviour is None}
    assert LATE_GRIPPER not in grippers.values()
    ids = ",".join(str(entry.index) for entry, _ in cases)

    with MatrixServer(behaviours, call_timeout=SESSION_CALL_TIMEOUT, marker=marker,
                      grippers=grippers) as server:
        profile = pytester.makefile(".toml", profile=f'''
            name = "hostile"
            track = "rgb"
            [policy]
            transport = "websocket"
            endpoint = "{server.uri}"
            connect_timeout = 3.0
            call_timeout = {SESSION_CALL_TIMEOUT}
            wait_s = 10.0
            [stop]
            consecutive = 1
        ''')
        started = time.monotonic()
        result = pytester.runpytest(
            f"--libero-profile={profile}", "--libero-scope=task_coverage",
            f"--libero-suite={SUITE}", f"--libero-task-ids={ids}",
            "--libero-budget-mode=decisions", "--libero-max-policy-calls=2",
            "--libero-replan-interval=1",
        )
        elapsed = time.monotonic() - started
        events = list(server.events)
        connections = server.connections
    print(f"hostile session: {len(cases)} cases in {elapsed:.1f}s")

    hostile = [b for _, b in cases if b is not None and b.kind]
    normal = len(cases) - len(hostile)
    run = run_folder(pytester.path / "libero-results", "hostile")
    records = run_records(run)
    assert [r["case"] for r in records] == [entry.case_id for entry, _ in cases]

    problems = [problem for (entry, behaviour), record in zip(cases, records)
                for problem in case_problems(entry, behaviour, record, run, grippers)]
    assert not problems, "\n".join(problems)
    result.assert_outcomes(errors=len(hostile), failed=normal)

    # The late reply existed before the next case asked anything, so a reused socket
    # would have handed it out; the case after it ran its own actions (checked above).
    slow_at = next(i for i, (_, b) in enumerate(cases) if b is not None and b.name == "slow")
    slow_prompt, next_prompt = cases[slow_at][0].language, cases[slow_at + 1][0].language
    [late_at] = [t for t, p, what in events if p == slow_prompt and what == "late reply"]
    first_next = min(t for t, p, what in events if p == next_prompt and what == "request")
    assert late_at < first_next
    assert records[slow_at + 1]["counters"]["policy_calls"] == 2

    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {
        "selected": len(cases), "completed": normal, "success": 0, "failure": normal,
        "errored": len(hostile), "unattempted": 0,
    }
    assert Counter(r["error"]["cause"] for r in records if r["error"]) == Counter(
        b.cause for b in hostile)
    # Every transport failure closed its socket and the next case reconnected.
    assert connections >= 1 + sum(1 for b in hostile if b.kind == TRANSPORT)
    result.stdout.fnmatch_lines([f"*{len(cases)} selected, {normal} completed, 0 success, "
                                 f"{normal} failure, {len(hostile)} errored, 0 unattempted*"])
    assert not marker.exists(), "a pickle payload was unpickled"
