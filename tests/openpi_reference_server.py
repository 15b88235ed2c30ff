"""A minimal openpi-style policy server for tests, built from the documented protocol.

It deliberately does not use ``pytest_libero.policy.openpi.codec``: its own few lines encode
arrays as openpi does (bytes keys ``__ndarray__``/``data``/``dtype``/``shape``), so the
client is tested against an independent implementation of the wire format.

Behaviour, as upstream openpi's server:

* ``GET /healthz`` answers 200 "OK\\n"; compression off; no size limit on requests.
* After the handshake the server sends one binary frame: the msgpack metadata map.
* Each binary request frame is decoded, passed to ``policy(obs) -> dict``, and the
  result sent back as one binary frame. The policy runs inside the event loop (as
  upstream does), so a slow policy also delays pings, handshakes and other clients;
  pass ``policy_in_thread=True`` to run it off the loop instead.
* If the policy raises, the traceback goes out as a TEXT frame and the connection is
  closed with code 1011.

Knobs to make it misbehave: ``delay_s`` (sleep before every reply, blocking the loop),
``close_after_n`` (after n replies, drop the TCP connection on the next request with no
close frame, like a crashed process), ``raw_reply(index, obs)`` (return bytes/str, or a list
of them, to send instead of the packed policy result; None for normal behaviour) and
``raw_metadata`` (bytes/str sent instead of the packed metadata).

Usage::

    with OpenpiReferenceServer(lambda obs: {"actions": np.zeros((10, 7))}) as server:
        client = WebsocketPolicyClient(server.uri, ...)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import http
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response

Policy = Callable[[dict[str, Any]], dict[str, Any]]
RawReply = Callable[[int, Any], "bytes | str | list[bytes | str] | None"]


# --- openpi's array encoding, written out independently --------------------------


def _encode_numpy(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "VOc":
            raise TypeError(f"unsupported dtype {obj.dtype}")
        return {
            b"__ndarray__": True,
            b"data": obj.tobytes(),  # C order, whatever the input layout
            b"dtype": obj.dtype.str,
            b"shape": obj.shape,
        }
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot pack {type(obj).__name__}")


def _decode_numpy(obj: dict[Any, Any]) -> Any:
    if b"__ndarray__" in obj:
        return np.ndarray(
            buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]), shape=obj[b"shape"]
        )
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def server_pack(obj: Any) -> bytes:
    """Encode as openpi's server does."""
    data = msgpack.packb(obj, default=_encode_numpy, use_bin_type=True)
    assert isinstance(data, bytes)
    return data


def server_unpack(data: bytes | str) -> Any:
    """Decode as openpi's server does (arrays are read-only views of ``data``);
    a str (a text frame) raises TypeError, as it does upstream."""
    return msgpack.unpackb(data, object_hook=_decode_numpy)


# --- the server -------------------------------------------------------------------


class OpenpiReferenceServer:
    """Runs the server on 127.0.0.1 in a background thread; see the module doc."""

    def __init__(
        self,
        policy: Policy,
        *,
        metadata: dict[str, Any] | None = None,
        port: int = 0,
        delay_s: float = 0.0,
        close_after_n: int | None = None,
        raw_reply: RawReply | None = None,
        raw_metadata: bytes | str | None = None,
        policy_in_thread: bool = False,
    ) -> None:
        self.policy = policy
        self.metadata = {} if metadata is None else metadata
        self.requested_port = port
        self.delay_s = delay_s
        self.close_after_n = close_after_n
        self.raw_reply = raw_reply
        self.raw_metadata = raw_metadata
        self.policy_in_thread = policy_in_thread
        self.requests: list[Any] = []
        """Every decoded request that was answered or failed, in arrival order,
        across all connections (requests dropped by ``close_after_n`` are not kept)."""
        self.connections = 0
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def uri(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"ws://127.0.0.1:{self.port}"

    # lifecycle

    def start(self, timeout: float = 5.0) -> OpenpiReferenceServer:
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="openpi-reference-server", daemon=True
        )
        self._thread.start()
        self.port = ready.result(timeout=timeout)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close open connections (code 1001) and join the thread."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopped.set)
            except RuntimeError:  # loop already closed
                pass
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> OpenpiReferenceServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: concurrent.futures.Future[int]) -> None:
        try:
            asyncio.run(self._main(ready))
        except BaseException as exc:  # surface startup failures to start()
            if not ready.done():
                ready.set_exception(exc)
            raise

    async def _main(self, ready: concurrent.futures.Future[int]) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        async with serve(
            self._handler,
            "127.0.0.1",
            self.requested_port,
            compression=None,
            max_size=None,
            process_request=_health_check,
        ) as server:
            self._server = server
            port = next(iter(server.sockets)).getsockname()[1]
            ready.set_result(port)
            await self._stopped.wait()

    # protocol

    async def _handler(self, ws: ServerConnection) -> None:
        self.connections += 1
        if self.raw_metadata is not None:
            await ws.send(self.raw_metadata)
        else:
            await ws.send(server_pack(self.metadata))
        replies = 0
        while True:
            try:
                frame = await ws.recv()
            except ConnectionClosed:
                return
            if self.close_after_n is not None and replies >= self.close_after_n:
                ws.transport.abort()  # like a crash: no close frame
                return
            try:
                # A text or undecodable request fails here, as upstream: error frame.
                obs: Any = server_unpack(frame)
                self.requests.append(obs)
                if self.delay_s:
                    time.sleep(self.delay_s)  # blocks the loop, as a slow infer does
                reply: bytes | str | list[bytes | str] | None = None
                if self.raw_reply is not None:
                    reply = self.raw_reply(replies, obs)
                if reply is None:
                    if self.policy_in_thread:
                        result = await asyncio.to_thread(self.policy, obs)
                    else:
                        result = self.policy(obs)
                    reply = server_pack(result)
            except Exception:
                try:
                    await ws.send(traceback.format_exc())
                    await ws.close(
                        CloseCode.INTERNAL_ERROR,
                        "Internal server error. Traceback included in previous frame.",
                    )
                except ConnectionClosed:
                    pass
                return
            try:
                for frame_out in reply if isinstance(reply, list) else [reply]:
                    await ws.send(frame_out)
            except ConnectionClosed:
                return
            replies += 1


def _health_check(connection: ServerConnection, request: Request) -> Response | None:
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None
