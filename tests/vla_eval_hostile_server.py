"""A vla-eval-wire server that misbehaves on purpose, written from the wire's description
alone (it shares no code with pytest_libero.policy.vla_eval).

It answers GET /health and the hello, reads episode_start, and answers each observation through
``reply(message) -> list of frames`` (bytes or str), which is where a test makes it
misbehave; ``None`` from ``reply`` drops the connection without a close frame. ``delay_s``
sleeps before each answer to an observation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgpack
import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection, serve

Reply = Callable[[dict[str, Any]], "list[bytes | str] | None"]


def ndarray(array: np.ndarray) -> dict[str, Any]:
    return {"__ndarray__": True, "data": array.tobytes(), "dtype": array.dtype.str,
            "shape": list(array.shape)}


def message(kind: str, payload: Any, seq: int, **fields: Any) -> bytes:
    body = {"type": kind, "payload": payload, "seq": seq, "timestamp": time.time(), **fields}
    data = msgpack.packb(body, use_bin_type=True)
    assert isinstance(data, bytes)
    return data


def action(request: dict[str, Any], actions: Any = None, seq: int | None = None) -> list[bytes | str]:
    """A well-formed action answering ``request`` (seq echoed unless given)."""
    vector = np.zeros(7, dtype=np.float32) if actions is None else actions
    payload = {"actions": ndarray(vector) if isinstance(vector, np.ndarray) else vector}
    return [message("action", payload, request["seq"] if seq is None else seq)]


def read(frame: bytes | str) -> dict[str, Any]:
    decoded: dict[str, Any] = msgpack.unpackb(frame, raw=False)
    return decoded


@contextmanager
def hostile_server(reply: Reply, *, hello: Callable[[dict[str, Any]], list[bytes | str]] | None = None,
                   delay_s: float = 0.0) -> Iterator[str]:
    """The server on 127.0.0.1, in a thread, for the block; its ws:// address."""

    def handle(ws: ServerConnection) -> None:
        try:
            for frame in ws:
                request = read(frame)
                if request["type"] == "hello":
                    answers = (hello(request) if hello else
                               [message("hello", {"protocol_version": 1, "model_server": "Hostile"},
                                        request["seq"])])
                elif request["type"] == "observation":
                    time.sleep(delay_s)
                    answers = reply(request)
                else:
                    continue
                if answers is None:
                    ws.socket.close()
                    return
                for answer in answers:
                    ws.send(answer)
        except (ConnectionClosed, OSError):
            pass

    def health(connection: ServerConnection, request: Request) -> Response | None:
        return connection.respond(200, "ok\n") if request.path == "/health" else None

    with serve(handle, "127.0.0.1", 0, compression=None, max_size=None, ping_interval=None,
               process_request=health) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        port = server.socket.getsockname()[1]
        try:
            yield f"ws://127.0.0.1:{port}"
        finally:
            server.shutdown()
            thread.join(5)
