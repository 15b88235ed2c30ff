"""A GR00T N1.6 policy server (ZeroMQ REQ/REP), seen through the policy contract.

GR00T ships its own server: a ZeroMQ REP socket (default port 5555) answering msgpack
requests ``{"endpoint": NAME, "data": {...}}`` (plus ``api_token`` when it was started
with one) on the endpoints ``ping``, ``reset``, ``get_modality_config``, ``get_action``
(data ``{"observation": ..., "options": null}``, reply ``[action_dict, info]``) and
``kill``; a failure answers ``{"error": "..."}``, a request without the server's API
token ``{"error": "Unauthorized: Invalid API token"}``. The wire (two generations of
array form) is in ``gr00t.wire``, the key mapping in ``gr00t.layout``.

Which array form a request uses is told from the server's ``get_modality_config``
reply, whose configs carry their generation's marker (:func:`decide_wire`), or pinned by
the profile (``policy.wire``). Preflight decides it once before any case
(:func:`preflight_facts`); each episode reads the marker again, since it fetches the
modality config anyway, so a record's wire is the one its own episode spoke.

Why a request is never answered by a stale reply: REQ/REP is strictly one request, one
reply. A call that times out or loses its peer leaves its REQ socket waiting for a
reply that may still come, so the socket is discarded (closed with linger 0) and never
reused; the next call opens a new one. A socket monitor tells a server that went away
(the TCP connection closed) apart from one that is slow, so a dead server errors its
case as ``connection_lost`` at once instead of running out the call timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from pytest_libero.policy.contract import RAW_REPLY, Observation
from pytest_libero.policy.errors import (
    CallTimeout,
    ConnectionLost,
    ProtocolViolation,
    ReplyTooLarge,
    ServerError,
    ServerUnavailable,
    TokenRefused,
)
from pytest_libero.policy.gr00t.layout import Gr00tLayout
from pytest_libero.policy.gr00t.refusals import hint
from pytest_libero.policy.gr00t.wire import Message, Wire, pack, unpack
from pytest_libero.protocol.errors import PolicyTransportError
from pytest_libero.protocol.parameters import CAMERAS, IMAGE_SIZE
from pytest_libero.protocol.text import clipped

__all__ = ["Gr00tClient", "Gr00tPolicy", "WireUnknown", "decide_wire", "preflight_facts"]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Largest reply accepted (a chunk is a few kilobytes)."""
RECEIVE_CAP_BYTES = 4 * MAX_MESSAGE_BYTES
"""Largest reply ZeroMQ reads at all, so one a little too large is refused by its size;
anything larger makes ZeroMQ drop the connection unread (see ``_lost``)."""
ALIVE_CHECK_S = 0.5
"""How long a dropped connection's server gets to answer ping before it counts as gone."""
POLL_S = 0.05
TELL_AFTER_S = 0.5
"""How long nothing may connect before a waiting caller is told so."""


class Gr00tClient:
    """One REQ socket at a time to a GR00T server, strictly request/reply."""

    def __init__(self, endpoint: str, *, connect_timeout: float, call_timeout: float,
                 api_token: str | None = None, wire: Wire = Wire.NPY) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.api_token = api_token
        self.wire = wire
        """The array form requests are sent in (replies are read in either)."""
        self.last_call_s: float | None = None
        self._sock: zmq.Socket[bytes] | None = None
        self._monitor: zmq.Socket[bytes] | None = None
        self._up = False
        self._down_since = 0.0

    # ----------------------------------------------------------------- sockets

    def _open(self) -> zmq.Socket[bytes]:
        if self._sock is None:
            sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, RECEIVE_CAP_BYTES)
            self._monitor = sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
            try:
                sock.connect(self.endpoint)
            except zmq.ZMQError as exc:
                self._sock = sock
                self.close()
                raise ServerUnavailable(f"{self.endpoint!r} is not a ZeroMQ address ({exc}); "
                                        "give the GR00T server as tcp://HOST:PORT") from exc
            self._sock, self._up, self._down_since = sock, False, time.monotonic()
        return self._sock

    def close(self) -> None:
        """Discard the socket (and with it any reply still on its way); idempotent."""
        sock, monitor, self._sock, self._monitor = self._sock, self._monitor, None, None
        if sock is not None:
            try:
                sock.disable_monitor()
            except zmq.ZMQError:
                pass
            sock.close(linger=0)
        if monitor is not None:
            monitor.close(linger=0)

    def _lost_peer(self) -> bool:
        """Read the monitor's events; True when the peer disconnected since last read."""
        lost = False
        while self._monitor is not None and self._monitor.poll(0):
            event = recv_monitor_message(self._monitor)["event"]
            if event == zmq.EVENT_CONNECTED:
                self._up = True
            elif event == zmq.EVENT_DISCONNECTED:
                self._up, self._down_since, lost = False, time.monotonic(), True
        return lost

    # ------------------------------------------------------------------- calls

    def _send(self, name: str, data: Any) -> zmq.Socket[bytes]:
        request: dict[str, Any] = {"endpoint": name}
        if data is not None:
            request["data"] = data
        if self.api_token:
            request["api_token"] = self.api_token
        payload = pack(request, self.wire)
        sock = self._open()
        self._lost_peer()  # what happened before this request is not its business
        try:
            sock.send(payload, zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            self.close()
            raise ConnectionLost(f"the request to {name} at {self.endpoint} could not be "
                                 f"queued ({exc})") from exc
        return sock

    def abandon(self, name: str, data: Any = None) -> None:
        """Send one request and drop the socket without its reply (a client that dies
        mid-call, as check-server plays one); the request is given half a second to leave."""
        sock = self._send(name, data)
        self._sock = None
        self.close()
        sock.close(linger=500)

    def call(self, name: str, data: Any = None, *, timeout: float | None = None) -> Any:
        """Send one request and return its decoded reply (see :meth:`exchange`)."""
        return self.exchange(name, data, timeout=timeout).value

    def exchange(self, name: str, data: Any = None, *, timeout: float | None = None) -> Message:
        """Send one request and return its decoded reply with the array forms it carried.

        Raises CallTimeout (no reply within ``timeout``, default ``call_timeout``),
        ConnectionLost (the server went away, or nothing connected within
        ``connect_timeout``), ServerError (an ``{"error": ...}`` reply; TokenRefused when
        it refuses the API token) and the wire's errors. After a timeout or a lost peer
        the socket is discarded.
        """
        what = f"the GR00T server at {self.endpoint} ({name})"
        sock = self._send(name, data)
        start = time.monotonic()
        deadline = start + (self.call_timeout if timeout is None else timeout)
        while not sock.poll(int(POLL_S * 1000)):
            now = time.monotonic()
            if self._lost_peer():
                self.close()
                raise self._lost(what)
            if not self._up and now - self._down_since > self.connect_timeout:
                self.close()
                raise ConnectionLost(f"nothing is connected at {self.endpoint} for {name}: "
                                     f"no server accepted the connection within "
                                     f"{self.connect_timeout:g}s")
            if now >= deadline:
                self.close()
                raise CallTimeout(f"{what} did not reply within {deadline - start:g}s; the "
                                  "socket is discarded so a late reply cannot answer a later "
                                  "request")
        message = self._receive(sock, what)
        self.last_call_s = time.monotonic() - start
        return self._checked(unpack(message, what), what)

    def wait_ready(self, wait_s: float,
                   on_wait: Callable[[ServerUnavailable], None] | None = None) -> Any:
        """``ping`` until the server answers, within ``wait_s``; returns its reply.

        A server that is still loading has not bound its port yet: the request waits in
        the socket's queue until it has. A peer that disconnects while we wait (a server
        restarting) gets a fresh socket and a fresh ping.
        """
        start = time.monotonic()
        deadline = start + max(wait_s, 0.0)
        told = False
        sock = self._send("ping", None)
        while not sock.poll(int(POLL_S * 1000)):
            now = time.monotonic()
            if self._lost_peer():
                self.close()
                sock = self._send("ping", None)
            if not told and on_wait is not None and not self._up and now - start > TELL_AFTER_S:
                on_wait(ServerUnavailable(f"nothing answers at {self.endpoint} yet"))
                told = True
            if now >= deadline:
                connected = self._up
                self.close()
                why = ("a peer accepted the connection but did not answer ping" if connected
                       else "nothing accepted the connection")
                raise ServerUnavailable(f"no GR00T server answered ping at {self.endpoint} "
                                        f"after {now - start:.1f}s ({why})")
        what = f"the GR00T server at {self.endpoint} (ping)"
        return self._checked(unpack(self._receive(sock, what), what), what).value

    def _receive(self, sock: zmq.Socket[bytes], what: str) -> bytes:
        """The one frame of a reply; a reply of several frames or past the size limit is
        a protocol violation, and the socket goes (its state is no longer one request,
        one reply)."""
        message = sock.recv()
        frames = 1
        while sock.getsockopt(zmq.RCVMORE):
            sock.recv()
            frames += 1
        if frames > 1:
            self.close()
            raise ProtocolViolation(f"{what} answered with {frames} frames; GR00T's server "
                                    "sends each reply as one msgpack frame")
        if len(message) > MAX_MESSAGE_BYTES:
            self.close()
            raise ReplyTooLarge(f"{what} answered with {len(message) / 2**20:.1f} MiB; "
                                f"replies above {MAX_MESSAGE_BYTES / 2**20:g} MiB are refused "
                                "(an action chunk is a few kilobytes)")
        return message

    def _lost(self, what: str) -> PolicyTransportError:
        """Why the connection went, as well as can be told: ZeroMQ drops a connection whose
        reply is larger than it reads, so a server that still answers ping was alive."""
        try:
            with Gr00tClient(self.endpoint, connect_timeout=ALIVE_CHECK_S,
                             call_timeout=ALIVE_CHECK_S, api_token=self.api_token,
                             wire=self.wire) as check:
                check.wait_ready(ALIVE_CHECK_S)
        except PolicyTransportError:
            return ConnectionLost(f"{what} closed the connection before replying (the server "
                                  "process died or was stopped?)")
        return ReplyTooLarge(f"{what} dropped the connection mid-reply but still answers ping: "
                             f"its reply was most likely larger than "
                             f"{RECEIVE_CAP_BYTES / 2**20:g} MiB, which is dropped unread "
                             "(an action chunk is a few kilobytes)")

    def _checked(self, reply: Message, what: str) -> Message:
        """The reply, unless it is the server's ``{"error": ...}``."""
        if not (isinstance(reply.value, dict) and "error" in reply.value):
            return reply
        text = str(reply.value["error"])
        if text.startswith("Unauthorized"):
            sent = "a token was sent" if self.api_token else "no token was sent"
            raise TokenRefused(f"{what} refused the API token ({sent}): {clipped(text)}",
                               traceback=text)
        raise ServerError(f"{what} answered with an error: "
                          f"{clipped(text)}{hint(text, self.wire)}", traceback=text)

    def __enter__(self) -> Gr00tClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WireUnknown(ProtocolViolation):
    """The server's wire generation cannot be told, or contradicts the profile's pin."""

    cause = "wire_unknown"


def decide_wire(setting: str, seen: frozenset[Wire], where: str) -> tuple[Wire, str]:
    """The array form to send, and how it was decided, from the profile's ``policy.wire``
    (``setting``) and the generations whose markers ``get_modality_config`` carried."""
    pin = None if setting == "auto" else Wire(setting)
    if len(seen) == 1:
        [marked] = seen
        if pin is not None and pin is not marked:
            raise WireUnknown(
                f"{where} marks its modality config as the {marked} generation, but the "
                f"profile pins policy.wire = \"{pin}\"; set it to \"{marked}\" or \"auto\"")
        return marked, "get_modality_config marker"
    if pin is not None:
        return pin, "profile (policy.wire)"
    what = ("markers of both generations" if seen
            else "no ModalityConfig marker of either generation")
    raise WireUnknown(
        f"{where} cannot be told apart by generation: its get_modality_config reply carries "
        f"{what}. Pin the array form in the profile: policy.wire = \"npy\" (np.save bytes, "
        "GR00T servers until late 2026) or \"msgpack-numpy\" (servers since then)")


class Gr00tPolicy:
    """Implements the Policy protocol against a GR00T server.

    Each episode starts on a new socket: ``ping`` (waiting up to ``wait_s``), then
    ``get_modality_config`` (kept as the record's policy metadata; its marker decides
    the array form, with the profile's ``wire`` setting) and ``reset``.
    """

    def __init__(self, endpoint: str, *, layout: Gr00tLayout, connect_timeout: float,
                 call_timeout: float, wait_s: float, api_token: str | None = None,
                 wire: str = "auto") -> None:
        self.endpoint = endpoint
        self.layout = layout
        self.wait_s = wait_s
        self.wire_setting = wire
        self.client = Gr00tClient(endpoint, connect_timeout=connect_timeout,
                                  call_timeout=call_timeout, api_token=api_token)
        self.metadata: Mapping[str, Any] = {}
        self.resets = 0

    def reset(self) -> None:
        self.start_episode()

    def start_episode(self, on_wait: Callable[[ServerUnavailable], None] | None = None) -> None:
        """``reset``, telling ``on_wait`` when the server does not answer at once."""
        self.client.close()
        ping = self.client.wait_ready(self.wait_s, on_wait=on_wait)
        if not (isinstance(ping, dict) and ping.get("status") == "ok"):
            raise ProtocolViolation(f"the GR00T server at {self.endpoint} answered ping with "
                                    f"{clipped(repr(ping))}, not GR00T's {{'status': 'ok', "
                                    "...}}")
        modality = self.client.exchange("get_modality_config")
        wire, decided_by = decide_wire(self.wire_setting, modality.forms,
                                       f"the GR00T server at {self.endpoint}")
        self.client.wire = wire
        self.client.call("reset", {"options": None})
        self.resets += 1
        self.metadata = {"server": "gr00t", "endpoint": self.endpoint, "ping": ping,
                         "modality_config": modality.value, "wire": wire.value,
                         "wire_decided_by": decided_by}

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        what = f"the GR00T server at {self.endpoint} (get_action)"
        reply = self.client.call(
            "get_action", {"observation": self.layout.encode(observation), "options": None}
        )
        if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[0], dict)):
            raise ProtocolViolation(f"{what} answered a {type(reply).__name__}, not "
                                    "[action_dict, info]")
        actions: dict[Any, Any] = reply[0]
        chunk = self.layout.decode(actions, what)
        return {"actions": chunk, RAW_REPLY: {str(k): v for k, v in actions.items()}}

    def close(self) -> None:
        self.client.close()


PROBE_INSTRUCTION = "pytest-libero preflight"
"""The instruction of preflight's one get_action (its images are black)."""


def preflight_facts(policy: Gr00tPolicy,
                    on_wait: Callable[[ServerUnavailable], None] | None = None) -> dict[str, Any]:
    """Before any case: reach the server, decide its wire, and send one ``get_action``
    the way every case will (black images, the profile's state constants and keys), so
    a server that cannot read the requests is found before a simulator is built.

    Returns what run.json records of the server: the wire and how it was decided, and
    how many actions a reply holds. Raises the transport's errors (TokenRefused,
    WireUnknown, ServerError, InvalidAction, ...) for the caller to explain.
    """
    policy.start_episode(on_wait)
    black = np.zeros((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    reply = policy.infer(Observation(language=PROBE_INSTRUCTION,
                                     images={camera: black for camera in CAMERAS}))
    policy.client.call("reset", {"options": None})  # the probe leaves no episode behind
    return {"transport": "gr00t", "endpoint": policy.endpoint,
            "wire": policy.metadata["wire"], "wire_decided_by": policy.metadata["wire_decided_by"],
            "reply_horizon": int(reply["actions"].shape[0])}
