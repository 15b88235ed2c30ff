"""A small synchronous client for openpi's websocket policy-server protocol.

The protocol: after the websocket handshake the server sends one binary frame, a
msgpack map of policy metadata. Then each request is one binary msgpack frame (the
observation) and each reply one binary msgpack frame (a map holding "actions"). A text
frame is an error: the server's traceback, after which it closes with code 1011.
``GET /healthz`` on the same port answers 200.

Why a request can never be answered by a stale reply: the client keeps a socket open
only while it is in step with the server. Any failure after a request was sent
(timeout, error frame, unreadable reply, closed connection) closes the socket at once,
and ``infer`` on a closed client raises ``ConnectionLost`` until ``connect()`` or
``reconnect()`` opens a new one (which also reads the metadata frame again). Late
replies therefore die with the socket they were meant for. Reconnecting is left to the
caller on purpose: a timed-out case is errored and not retried, and the caller decides
when the next case may start.

The client is not thread-safe: one caller at a time.
"""

from __future__ import annotations

import inspect
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from types import TracebackType
from typing import Any, Final

from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidMessage,
    InvalidURI,
)
from websockets.frames import CloseCode
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from pytest_libero.policy.errors import (
    CallTimeout,
    CodecError,
    ConnectionLost,
    ProtocolViolation,
    ServerError,
    ServerUnavailable,
)
from pytest_libero.policy.openpi.codec import pack, unpack

__all__ = [
    "WebsocketPolicyClient",
    "check_health",
    "health_url",
]

DEFAULT_MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024
"""Largest reply accepted. A LIBERO action chunk is a few kilobytes; 64 MiB leaves
room for servers that echo images back, and still bounds memory."""

RETRY_SLEEP_S: Final = 0.1
"""Pause between connection attempts while waiting for a server to come up."""

CLOSE_TIMEOUT_S: Final = 1.0
"""How long a clean close waits for the server's closing handshake."""

_CONNECT_PARAMS: Final = inspect.signature(ws_connect).parameters
_VERSION_KWARGS: Final[dict[str, Any]] = {
    # websockets >= 15 reads proxy settings from the environment by default; a policy
    # server is local or on the lab network, and an HTTP(S)_PROXY meant for package
    # downloads must not capture it.
    **({"proxy": None} if "proxy" in _CONNECT_PARAMS else {}),
    # websockets >= 17 wants connect() used as a context manager unless told that the
    # caller manages the connection's lifetime itself, as this client does.
    **({"legacy": True} if "legacy" in _CONNECT_PARAMS else {}),
}


def _close_details(exc: ConnectionClosed) -> tuple[int, str]:
    """The close code and reason, preferring what the server sent."""
    frame = exc.rcvd if exc.rcvd is not None else exc.sent
    if frame is None:  # dropped without a close frame, e.g. the server crashed
        return int(CloseCode.ABNORMAL_CLOSURE), "no close frame"
    return int(frame.code), frame.reason


class WebsocketPolicyClient:
    """One connection to an openpi policy server, used strictly request/reply.

    ``connect_timeout`` bounds each connection attempt (handshake plus the metadata
    frame); ``call_timeout`` bounds each ``infer`` from sending the request to having
    the whole reply.

    Keepalive pings are disabled (``ping_interval=None``). The upstream openpi server
    runs the policy inside its event loop, so it answers pings only between requests;
    any ping timeout shorter than the slowest inference would kill a healthy
    connection mid-call. The per-call timeout is the liveness check instead: a server
    that stops answering is detected on the next request, and between requests
    nothing waits on it.
    """

    health_path = "/healthz"
    """Where the server answers a health check on its websocket port."""

    def __init__(
        self,
        uri: str,
        *,
        connect_timeout: float,
        call_timeout: float,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if connect_timeout <= 0 or call_timeout <= 0:
            raise ValueError("connect_timeout and call_timeout must be positive")
        self.uri = uri
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.max_message_bytes = max_message_bytes
        self.metadata: dict[Any, Any] = {}
        self.last_call_s: float | None = None
        """Round trip of the last successful ``infer``: request sent to reply read."""
        self._ws: ClientConnection | None = None
        self._watchdog = _SendWatchdog()

    # ----------------------------------------------------------------- lifecycle

    @property
    def connected(self) -> bool:
        """Whether a socket is open and in step with the server."""
        return self._ws is not None

    def connect(self, wait_s: float = 0.0) -> dict[Any, Any]:
        """Open a connection and read the metadata frame; returns the metadata.

        While the server is not up yet (connection refused or reset), attempts repeat
        every ``RETRY_SLEEP_S`` until ``wait_s`` has passed; at least one attempt is
        made. An open connection is closed first: metadata is read afresh each time.
        """
        self.close()
        start = time.monotonic()
        deadline = start + max(wait_s, 0.0)
        attempts = 0
        while True:
            attempts += 1
            try:
                ws = ws_connect(
                    self.uri,
                    open_timeout=self.connect_timeout,
                    ping_interval=None,
                    ping_timeout=None,
                    close_timeout=CLOSE_TIMEOUT_S,
                    compression=None,
                    max_size=self.max_message_bytes,
                    **_VERSION_KWARGS,
                )
                break
            except InvalidURI as exc:
                raise ServerUnavailable(
                    f"{self.uri!r} is not a websocket address ({exc}); "
                    "give the policy server as ws://HOST:PORT"
                ) from exc
            except (OSError, InvalidMessage) as exc:
                # Refused / reset / handshake cut short: the server is not up yet.
                if time.monotonic() + RETRY_SLEEP_S > deadline:
                    waited = time.monotonic() - start
                    raise ServerUnavailable(
                        f"no policy server answered at {self.uri} after {waited:.1f}s "
                        f"({attempts} attempt{'s' if attempts != 1 else ''}; last "
                        f"error: {type(exc).__name__}: {exc}); start the server, check "
                        "the host and port, or allow a longer wait for it to come up"
                    ) from exc
                time.sleep(RETRY_SLEEP_S)
            except InvalidHandshake as exc:
                raise ProtocolViolation(
                    f"{self.uri} answered, but not as a websocket server ({exc}); "
                    "check that the address points at the policy server's port"
                ) from exc
        self._ws = ws
        self.metadata = self._read_metadata(ws)
        return self.metadata

    def _read_metadata(self, ws: ClientConnection) -> dict[Any, Any]:
        try:
            frame = ws.recv(timeout=self.connect_timeout)
        except TimeoutError as exc:
            self._drop(abort=True)
            raise ProtocolViolation(
                f"{self.uri} accepted the connection but sent no metadata frame within "
                f"{self.connect_timeout}s; openpi servers send one right away (servers "
                "that wait for the client to speak first use another protocol)"
            ) from exc
        except ConnectionClosed as exc:
            self._drop(abort=True)
            raise self._lost(exc, "before sending its metadata frame") from exc
        if isinstance(frame, str):
            self._drop(abort=True)
            raise ServerError(
                f"policy server at {self.uri} sent an error instead of its metadata: "
                f"{_server_text(frame)}",
                traceback=frame,
            )
        try:
            metadata = unpack(frame)
        except CodecError:
            self._drop(abort=True)
            raise
        if not isinstance(metadata, dict):
            self._drop(abort=True)
            raise ProtocolViolation(
                f"the metadata frame from {self.uri} decodes to a "
                f"{type(metadata).__name__}, not a map; is this an openpi policy server?"
            )
        return metadata

    def reconnect(self, wait_s: float = 0.0) -> dict[Any, Any]:
        """Close whatever is open and connect again (see ``connect``)."""
        return self.connect(wait_s)

    def close(self) -> None:
        """Close the connection cleanly; idempotent."""
        self._drop(abort=False)

    def _drop(self, *, abort: bool) -> None:
        """Forget the socket. ``abort`` skips the closing handshake: used after a
        failure, when the server may be busy and would not answer it promptly."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        if abort:
            _shutdown(ws)
        ws.close()

    def __enter__(self) -> WebsocketPolicyClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --------------------------------------------------------------------- calls

    def infer(self, request: dict[str, Any]) -> dict[Any, Any]:
        """Send one observation, return the server's reply map.

        Raises ``ConnectionLost`` when not connected (including after any earlier
        failure), ``CallTimeout``, ``ServerError``, ``ProtocolViolation`` or
        ``CodecError``. After any of these except a ``CodecError`` raised while
        encoding the request (nothing was sent), the socket is closed.
        """
        if self._ws is None:
            raise self._not_connected()
        frame, elapsed = self.exchange(pack(request))
        try:
            reply = unpack(frame)
        except CodecError:
            self._drop(abort=True)
            raise
        if not isinstance(reply, dict):
            self._drop(abort=True)
            raise ProtocolViolation(
                f"the reply from {self.uri} decodes to a {type(reply).__name__}, not a "
                "map; openpi servers answer with a map holding 'actions'"
            )
        self.last_call_s = elapsed
        return reply

    def exchange(self, payload: bytes) -> tuple[bytes, float]:
        """Send one binary frame; return the binary frame that answers it and the round
        trip's seconds. A text frame is the server's error. Raises as ``infer`` does,
        with the socket closed after any failure."""
        ws = self._ws
        if ws is None:
            raise self._not_connected()
        self._refuse_unsolicited(ws)

        start = time.monotonic()
        deadline = start + self.call_timeout
        # websockets has no send timeout: a server that stops reading could block a
        # large send forever. The watchdog shuts the socket down at the deadline.
        fired = self._watchdog.arm(ws, deadline)
        try:
            ws.send(payload)
        except ConnectionClosed as exc:
            self._drop(abort=True)
            if fired.is_set():
                raise self._timeout("sending the request") from exc
            raise self._lost(exc, "while the request was being sent") from exc
        finally:
            self._watchdog.disarm()

        try:
            frame = ws.recv(timeout=max(deadline - time.monotonic(), 0.0))
        except TimeoutError as exc:
            self._drop(abort=True)
            raise self._timeout("waiting for the reply") from exc
        except ConnectionClosed as exc:
            self._drop(abort=True)
            if fired.is_set():  # the watchdog fired just as the send completed
                raise self._timeout("waiting for the reply") from exc
            if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
                raise ProtocolViolation(
                    f"the reply from {self.uri} is larger than max_message_bytes="
                    f"{self.max_message_bytes}; raise the limit if the server "
                    "legitimately sends that much"
                ) from exc
            raise self._lost(exc, "before replying") from exc
        elapsed = time.monotonic() - start

        if isinstance(frame, str):
            self._drop(abort=True)
            raise ServerError(
                f"the policy server at {self.uri} raised while answering: "
                f"{_server_text(frame)}",
                traceback=frame,
            )
        return frame, elapsed

    def abandon(self, payload: bytes) -> None:
        """Send one request frame and drop the connection without waiting for its reply
        (a client that dies mid-call), as check-server does to a server."""
        ws = self._ws
        if ws is None:
            raise self._not_connected()
        try:
            ws.send(payload)
        finally:
            self._drop(abort=True)

    def _refuse_unsolicited(self, ws: ClientConnection) -> None:
        """Check nothing arrived since the last reply before sending a request.

        In strict request/reply a frame waiting here can only be a second answer or
        an error; reading it as the reply to the next request would desynchronise
        every later step.
        """
        try:
            frame = ws.recv(timeout=0)
        except TimeoutError:
            return
        except ConnectionClosed as exc:
            self._drop(abort=True)
            raise self._lost(exc, "between requests") from exc
        self._drop(abort=True)
        if isinstance(frame, str):
            raise ServerError(
                f"the policy server at {self.uri} sent an error between requests: "
                f"{_server_text(frame)}",
                traceback=frame,
            )
        raise ProtocolViolation(
            f"the policy server at {self.uri} sent a frame nobody asked for (more than "
            "one reply to a request?); the connection was closed to stay in step"
        )

    def _not_connected(self) -> ConnectionLost:
        return ConnectionLost(
            f"not connected to the policy server at {self.uri} (never connected, "
            "or closed after an earlier failure so that a late reply cannot answer "
            "this request); call connect() or reconnect() first"
        )

    def _timeout(self, during: str) -> CallTimeout:
        return CallTimeout(
            f"the policy server at {self.uri} did not answer within call_timeout="
            f"{self.call_timeout}s ({during}); the connection was closed and must be "
            "reopened with reconnect(); raise the timeout if inference is this slow"
        )

    def _lost(self, exc: ConnectionClosed, when: str) -> ConnectionLost:
        code, reason = _close_details(exc)
        shown = f"code {code}, reason {reason!r}" if reason else f"code {code}"
        return ConnectionLost(
            f"the policy server at {self.uri} closed the connection {when} ({shown}); "
            "check the server's log, then reconnect()",
            code=code,
            reason=reason,
        )


class _SendWatchdog:
    """One long-lived thread per client that shuts the socket down when a send
    outlives its deadline.

    A thread per call (threading.Timer) cost more than the rest of a local round trip.
    Arming this one only writes two fields under an uncontended lock: the thread is
    never woken per call, it looks at the deadline a few times a second.
    """

    POLL_S = 0.2

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ws: ClientConnection | None = None
        self._deadline: float | None = None
        self._fired = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self, ws: ClientConnection, deadline: float) -> threading.Event:
        """Watch this send; the returned event is set if the watchdog fired."""
        fired = threading.Event()
        with self._lock:
            self._ws, self._deadline, self._fired = ws, deadline, fired
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="policy-send-watchdog", daemon=True
                )
                self._thread.start()
        return fired

    def disarm(self) -> None:
        with self._lock:
            self._ws, self._deadline = None, None

    def _run(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            with self._lock:
                if self._deadline is None or time.monotonic() < self._deadline:
                    continue
                ws, self._ws, self._deadline = self._ws, None, None
                self._fired.set()
            if ws is not None:
                _shutdown(ws)


def _server_text(text: str) -> str:
    """A server's traceback told once: its last non-empty line (the exception) first, for a
    one-line cause, then the lines above it."""
    lines = text.rstrip().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return "(empty error frame)"
    return "\n".join([lines[-1].strip(), *lines[:-1]]).rstrip()


def _shutdown(ws: ClientConnection) -> None:
    """Shut the socket down so that blocked sends and receives return at once."""
    try:
        ws.socket.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def address_problem(uri: object) -> str | None:
    """Why ``uri`` is not a ws://HOST:PORT address (None when it is one)."""
    if not isinstance(uri, str):
        return f"{uri!r} is not a websocket address"
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        return f"{uri!r} is not a websocket address"
    try:
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:  # not a number, or out of range
        return f"{uri!r} has no valid port"
    return None


def health_url(uri: str, path: str = "/healthz") -> str:
    """``ws://h:p/...`` -> ``http://h:p/healthz`` (``wss`` -> ``https``); vla-eval's
    servers answer on ``/health``."""
    problem = address_problem(uri)
    if problem is not None:
        raise ServerUnavailable(f"{problem}; give the policy server as ws://HOST:PORT")
    scheme = "https" if uri.startswith("wss") else "http"
    return urllib.parse.urlunsplit((scheme, urllib.parse.urlsplit(uri).netloc, path, "", ""))


def check_health(uri: str, timeout: float, path: str = "/healthz") -> None:
    """GET ``path`` on the policy server's host and port; raise unless it says 200."""
    url = health_url(uri, path)
    # No proxies, for the same reason as the websocket connection.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerUnavailable(
            f"health check {url} failed ({reason}); start the policy server or check "
            "the host and port"
        ) from exc
    if status != 200:
        raise ServerUnavailable(
            f"health check {url} answered HTTP {status}, not 200; the server is up but "
            "not healthy, or this port belongs to something else"
        )
