"""A policy behind an openpi-compatible websocket server (``python -m pytest_libero.serve``).

The wire is openpi's: a metadata frame on connect, one
binary msgpack request and reply per call, a text frame with the traceback when the
policy raises, GET /healthz answering 200. Requests are turned back into the
contract's :class:`Observation`, so a served policy sees exactly what an in-process
one would.
"""

from __future__ import annotations

import asyncio
import http
import logging
import threading
import time
import traceback

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from pytest_libero.policy.codec import pack, unpack
from pytest_libero.policy.contract import Policy
from pytest_libero.policy.layout import COUNTER_KEYS, RequestLayout

log = logging.getLogger("pytest_libero.serve")


class PolicyServer:
    """One policy behind the openpi protocol; calls are serialized by a lock.

    Episode boundaries: pytest-libero opens one connection per episode, so the policy
    is reset before the first request of every connection, whatever the client's
    request layout carries. A connection that never sends a request (a client
    checking the server is up) resets nothing. A later request whose optional
    counters say ``policy_calls == 0`` (a client that keeps one connection for many
    episodes) resets it too.
    """

    def __init__(self, policy: Policy, layout: RequestLayout | None = None) -> None:
        self.policy = policy
        self.layout = layout or RequestLayout()
        self._lock = threading.Lock()

    def answer(self, payload: bytes, *, first: bool = False) -> bytes:
        """Decode one request, run the policy, encode its reply (raises on failure).

        ``first`` says this is the connection's first request: a new episode.
        """
        request = unpack(payload)
        if not isinstance(request, dict):
            raise TypeError(f"a request must be a map, got {type(request).__name__}")
        observation = self.layout.decode({str(k): v for k, v in request.items()})
        started = time.perf_counter()
        with self._lock:
            if first or (COUNTER_KEYS[0] in request and observation.policy_calls == 0):
                self.policy.reset()
            reply = dict(self.policy.infer(observation))
        reply["server_timing"] = {"infer_ms": (time.perf_counter() - started) * 1000}
        return pack(reply)

    async def handler(self, websocket: ServerConnection) -> None:
        await websocket.send(pack(dict(self.policy.metadata)))
        first = True
        while True:
            try:
                payload = await websocket.recv()
            except ConnectionClosed:
                return
            try:
                if isinstance(payload, str):
                    raise TypeError("requests must be binary msgpack frames, not text")
                reply = await asyncio.to_thread(self.answer, payload, first=first)
                first = False
            except Exception:
                await websocket.send(traceback.format_exc())
                await websocket.close(1011, "Internal server error. Traceback included in previous frame.")
                return
            await websocket.send(reply)

    async def run(self, host: str, port: int, ready: threading.Event | None = None) -> None:
        async with serve(
            self.handler,
            host,
            port,
            compression=None,
            max_size=None,
            ping_interval=None,
            process_request=_health,
        ) as server:
            bound = server.sockets[0].getsockname()[1] if server.sockets else port
            log.info("serving %s on ws://%s:%s", type(self.policy).__name__, host, bound)
            print(f"pytest-libero serve: ws://{host}:{bound} (GET /healthz)", flush=True)
            if ready is not None:
                ready.set()
            await server.serve_forever()


def _health(connection: ServerConnection, request: Request) -> Response | None:
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None
