"""A vla-eval model server as a policy: one connection an episode, strict request/reply.

The connection is the openpi client's (``WebsocketPolicyClient``: bounded frames, a send
watchdog, no pings, a socket closed after any failure so that a late reply dies with
it); what differs is what is said on it. After the handshake the client sends its
``hello`` and reads the server's (its metadata); each episode then opens with
``episode_start`` (the task), each decision is an ``observation`` answered by an
``action`` carrying the same ``seq`` (vla-eval's own client only logs a mismatch; here it
errors the case), and the episode ends with ``episode_end`` before the socket closes.
An ``error`` message errors the case with the server's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import version
from typing import Any, Final

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from pytest_libero.policy.contract import Observation
from pytest_libero.policy.errors import CodecError, ProtocolViolation, ServerError
from pytest_libero.policy.openpi.client import WebsocketPolicyClient
from pytest_libero.policy.openpi.probe import connect_within
from pytest_libero.policy.vla_eval.payload import ServerWants, VlaEvalLayout, executed_action
from pytest_libero.policy.vla_eval.wire import PROTOCOL_VERSION, Message, pack_message, unpack_message

__all__ = ["HEALTH_PATH", "VlaEvalClient", "VlaEvalPolicy"]

HEALTH_PATH: Final = "/health"
"""vla-eval's servers answer GET /health on their websocket port."""


class VlaEvalClient(WebsocketPolicyClient):
    """One connection to a vla-eval model server. Not thread-safe."""

    health_path = HEALTH_PATH

    def __init__(self, uri: str, *, connect_timeout: float, call_timeout: float,
                 layout: VlaEvalLayout) -> None:
        super().__init__(uri, connect_timeout=connect_timeout, call_timeout=call_timeout)
        self.layout = layout
        self.seq = 0
        """The last seq sent; it never restarts, as vla-eval's client's never does."""

    def _send(self, ws: ClientConnection, kind: str, payload: dict[str, Any]) -> int:
        self.seq += 1
        ws.send(pack_message(kind, payload, self.seq, image_format=self.layout.image_format))
        return self.seq

    def _read_metadata(self, ws: ClientConnection) -> dict[Any, Any]:
        """Say hello and read the server's hello: its payload is the metadata."""
        hello = {"harness_version": f"pytest-libero {version('pytest-libero')}",
                 "protocol_version": PROTOCOL_VERSION, "benchmark": self.layout.benchmark}
        try:
            self._send(ws, "hello", hello)
            frame = ws.recv(timeout=self.connect_timeout)
        except TimeoutError as exc:
            self._drop(abort=True)
            raise ProtocolViolation(
                f"{self.uri} accepted the connection but answered no hello within "
                f"{self.connect_timeout}s; vla-eval model servers answer the client's hello "
                "at once (is it another kind of server?)") from exc
        except ConnectionClosed as exc:
            self._drop(abort=True)
            raise self._lost(exc, "before answering the hello") from exc
        message = self._message(frame, "hello")
        return dict(message.payload)

    def _message(self, frame: bytes | str, expected: str | None, seq: int | None = None) -> Message:
        """``frame`` as the ``expected`` message (answering ``seq``), or the socket closed
        and the reason raised; with ``expected`` None no message was due."""
        where = f"the vla-eval server at {self.uri}"
        try:
            if isinstance(frame, str):
                raise ProtocolViolation(f"{where} sent a text frame ({frame[:200]!r}); vla-eval "
                                        "messages are binary msgpack")
            message = unpack_message(frame, where)
            if message.type == "error":
                words = str(message.payload.get("error", message.payload))
                raise ServerError(f"{where} answered with an error: {words}", traceback=words)
            if expected is None:
                raise ProtocolViolation(f"{where} sent a {message.type} message nobody asked "
                                        "for (a second answer?); the connection was closed to "
                                        "stay in step")
            if message.type != expected:
                raise ProtocolViolation(f"{where} sent a {message.type} message where the "
                                        f"{expected} was due")
            if seq is not None and message.seq != seq:
                raise ProtocolViolation(
                    f"{where} answered observation seq {seq} with an action of seq "
                    f"{message.seq}: a reply to another request (batching mixed them up?); "
                    "the connection was closed to stay in step")
        except (CodecError, ProtocolViolation, ServerError):
            self._drop(abort=True)
            raise
        return message

    def _refuse_unsolicited(self, ws: ClientConnection) -> None:
        """A message waiting before a request is an error the server sent on its own (its
        episode_start failed) or an answer nobody asked for: either ends the episode."""
        try:
            frame = ws.recv(timeout=0)
        except TimeoutError:
            return
        except ConnectionClosed as exc:
            self._drop(abort=True)
            raise self._lost(exc, "between requests") from exc
        self._message(frame, None)  # raises for every message

    def start_episode(self, task: Mapping[str, Any]) -> None:
        """Tell the server the episode's task (vla-eval's ``episode_start``)."""
        ws = self._ws
        if ws is None:
            raise self._not_connected()
        try:
            self._send(ws, "episode_start", {"task": dict(task)})
        except ConnectionClosed as exc:
            self._drop(abort=True)
            raise self._lost(exc, "at the episode's start") from exc

    def act(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Send one observation and return the action message's payload."""
        if self._ws is None:
            raise self._not_connected()
        seq = self.seq + 1
        frame, elapsed = self.exchange(pack_message("observation", payload, seq,
                                                    image_format=self.layout.image_format))
        self.seq = seq
        message = self._message(frame, "action", seq)
        self.last_call_s = elapsed
        return message.payload

    def end_episode(self) -> None:
        """Say the episode ended, if a connection is open, and close it cleanly."""
        ws = self._ws
        if ws is not None:
            try:
                self._send(ws, "episode_end", {})
            except (ConnectionClosed, OSError):
                pass  # it is closing anyway
        self.close()


class VlaEvalPolicy:
    """Implements the Policy and EpisodeAware protocols over :class:`VlaEvalClient`."""

    def __init__(self, endpoint: str, *, layout: VlaEvalLayout, connect_timeout: float,
                 call_timeout: float, wait_s: float) -> None:
        self.endpoint = endpoint
        self.layout = layout
        self.wait_s = wait_s
        self.client = VlaEvalClient(endpoint, connect_timeout=connect_timeout,
                                    call_timeout=call_timeout, layout=layout)
        self.metadata: Mapping[str, Any] = {}
        self.wants = ServerWants()
        self.connections = 0

    def reset(self) -> None:
        """End the last episode, then open this one's connection (GET /health first on the
        first one) and read the server's hello within ``wait_s``."""
        self.client.end_episode()
        hello = connect_within(self.client, self.wait_s, health=self.connections == 0)
        self.connections += 1
        try:
            self.wants = ServerWants.from_hello(hello, f"the vla-eval server at {self.endpoint}")
        except ValueError as exc:
            self.client.close()
            raise ProtocolViolation(str(exc)) from None
        self.metadata = {str(k): v for k, v in hello.items()}

    def begin_episode(self, task: Mapping[str, Any]) -> None:
        self.client.start_episode(task)

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        return executed_action(self.client.act(self.layout.payload(observation, self.wants)))

    def close(self) -> None:
        self.client.end_episode()
