"""A policy behind an openpi-compatible websocket server (``python -m pytest_libero.serve``).

The wire is openpi's: a metadata frame on connect, one
binary msgpack request and reply per call, a text frame with the traceback when the
policy raises, GET /healthz answering 200. Requests are turned back into the
contract's :class:`Observation`, so a served policy sees exactly what an in-process
one would.

Concurrency (docs/serving.md): every connection is one episode with its own policy
object, taken from a pool that the factory fills only when all objects are in use, so
``pytest -n 4`` against one server never mixes episode states. Every policy call
(build, reset, infer, infer_batch, close) runs on one daemon thread, one at a time
(``policy_thread.py``); a policy with ``infer_batch`` gets the concurrent requests
gathered into batches.

Whatever a policy call raises is that call's error reply, SystemExit and
KeyboardInterrupt included: raised inside ``infer`` they come from the policy's own
code (a user's Ctrl-C reaches the main thread, never the policy thread), so they end
that call's episode and the server goes on serving the next ones.
"""

from __future__ import annotations

import asyncio
import http
import logging
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from pytest_libero.policy.contract import BatchPolicy, Observation, Policy
from pytest_libero.policy.openpi.client import DEFAULT_MAX_MESSAGE_BYTES
from pytest_libero.policy.openpi.codec import pack, unpack
from pytest_libero.policy.openpi.layout import COUNTER_KEYS, RequestLayout
from pytest_libero.policy.openpi.policy_thread import PolicyThread
from pytest_libero.protocol.parameters import IMAGE_SIZE
from pytest_libero.protocol.text import echo

log = logging.getLogger("pytest_libero.serve")

SERVER_KEY = "pytest_libero/server"
"""The metadata key under which the server states its capabilities (namespaced, so it
cannot collide with a policy's own metadata)."""
LENT_OBJECT = "lent_object"
"""The capability naming the class of the caller's objects that ``evaluate()`` serves from
its own process (``policy/lent.py``): their errors are told in the object's terms."""

_ERROR_CLOSE = "Internal server error. Traceback included in previous frame."
MAX_REPLY_BYTES = DEFAULT_MAX_MESSAGE_BYTES
"""The most a reply may hold, counted before it is packed (a client takes no more by default):
a policy's answer of a billion elements is its call's error, never a copy of it here."""
STOPPED = "RuntimeError: the policy server stopped before this call was answered"
"""The reply of a call still waiting when the server stops (its client is gone)."""

Outcome = dict[str, Any] | str
"""What the policy thread hands a connection: its reply, or the traceback text."""


@dataclass
class _Call:
    """One connection's request waiting for the policy thread."""

    episode: Policy
    observation: Observation
    reset: bool
    done: asyncio.Future[Outcome]
    queued: float = field(default_factory=time.perf_counter)


class PolicyServer:
    """Policies from ``factory`` behind the openpi protocol, one per live connection.

    Episode boundaries: pytest-libero opens one connection per episode, so a
    connection takes a policy object at its first request and resets it then,
    whatever the client's request layout carries; the object goes back to the pool
    when the connection closes. A connection that never sends a request (a client
    checking the server is up) takes and resets nothing. A later request whose
    optional counters say ``policy_calls == 0`` (a client that keeps one connection
    for many episodes) resets it too.

    The first object is built here, so a factory that fails does so at startup; its
    metadata is the metadata frame of every connection. With ``infer_batch`` up to
    ``max_batch`` requests are answered per call, waiting at most ``batch_wait_ms``
    after the first for the other open connections' requests; without it
    ``max_batch`` is 1. ``in_process``: the objects are the caller's own, lent by
    ``evaluate()``; the metadata names their class (:data:`LENT_OBJECT`).
    """

    def __init__(
        self,
        factory: Callable[[], Policy],
        layout: RequestLayout | None = None,
        *,
        max_batch: int = 16,
        batch_wait_ms: float = 0.0,
        in_process: bool = False,
    ) -> None:
        if max_batch < 1 or batch_wait_ms < 0:
            raise ValueError(f"max_batch must be >= 1 and batch_wait_ms >= 0, "
                             f"got {max_batch} and {batch_wait_ms}")
        self.factory = factory
        self.layout = layout or RequestLayout()
        # One thread for every policy call: frameworks with per-thread state (CUDA
        # streams, default graphs) see a single caller, and no policy needs a lock.
        self._thread = PolicyThread()
        first = self._thread.submit(factory).result()
        self.batched = isinstance(first, BatchPolicy)
        self.max_batch = max_batch if self.batched else 1
        self.batch_wait_s = batch_wait_ms / 1000 if self.batched else 0.0
        self.lent_object = f"{type(first).__module__}.{type(first).__qualname__}" if in_process else None
        self.metadata: dict[str, Any] = {**first.metadata, SERVER_KEY: self.capabilities()}
        self.name = type(first).__name__
        self._built: list[Policy] = [first]
        self._idle: list[Policy] = [first]
        self._pending: deque[_Call] = deque()
        self._arrived = asyncio.Event()
        self._connections = 0
        self.port: int | None = None
        """The port it listens on, once :meth:`run` is serving (port 0 binds a free one)."""

    def capabilities(self) -> dict[str, Any]:
        """What the metadata frame tells clients about this server (recorded per case)."""
        return {
            "episode_state": "per_connection",
            "infer_batch": self.batched,
            "max_batch": self.max_batch,
            "batch_wait_ms": self.batch_wait_s * 1000,
            **({LENT_OBJECT: self.lent_object} if self.lent_object else {}),
        }

    async def handler(self, websocket: ServerConnection) -> None:
        episode: Policy | None = None
        self._connections += 1
        try:
            await websocket.send(pack(self.metadata))
            while True:
                try:
                    payload = await websocket.recv()
                except ConnectionClosed:
                    return
                try:
                    observation, new_episode = self._decode(payload)
                    if episode is None:
                        episode, new_episode = await self._acquire(), True
                    outcome = await self._submit(episode, observation, new_episode)
                    reply = outcome if isinstance(outcome, str) else pack(outcome, limit=MAX_REPLY_BYTES)
                except Exception:
                    reply = traceback.format_exc()
                try:
                    await websocket.send(reply)
                    if isinstance(reply, str):  # openpi's error path: traceback, then 1011
                        await websocket.close(1011, _ERROR_CLOSE)
                        return
                except ConnectionClosed:  # its client left while the policy answered
                    return
        finally:
            self._connections -= 1
            self._arrived.set()  # a batch waiting for this connection need not wait
            if episode is not None:
                self._idle.append(episode)

    def _decode(self, payload: str | bytes) -> tuple[Observation, bool]:
        """The request's observation, and whether its counters start a new episode.

        Runs on the event loop, per connection, so a bad request never reaches a batch.
        """
        if isinstance(payload, str):
            raise TypeError("requests must be binary msgpack frames, not text")
        request = unpack(payload)
        if not isinstance(request, dict):
            raise TypeError(f"a request must be a map, got {type(request).__name__}")
        observation = self.layout.decode({str(k): v for k, v in request.items()})
        _check_images(observation)
        return observation, COUNTER_KEYS[0] in request and observation.policy_calls == 0

    async def _acquire(self) -> Policy:
        """An idle policy object, or a new one from the factory when all are in use."""
        if self._idle:
            return self._idle.pop()
        episode = await asyncio.get_running_loop().run_in_executor(self._thread, _built, self.factory)
        self._built.append(episode)
        if self.batched and not isinstance(episode, BatchPolicy):
            raise TypeError(f"the factory built a {type(episode).__name__} without infer_batch "
                            f"after a {self.name} with it")
        return episode

    async def _submit(self, episode: Policy, observation: Observation, reset: bool) -> Outcome:
        call = _Call(episode, observation, reset, asyncio.get_running_loop().create_future())
        self._pending.append(call)
        self._arrived.set()
        return await call.done

    async def _dispatch(self) -> None:
        """Forever: gather waiting calls into a batch, run it on the policy thread."""
        loop = asyncio.get_running_loop()
        batch: list[_Call] = []
        try:
            while True:
                await self._until(lambda: bool(self._pending), None)
                if self.batch_wait_s > 0:
                    deadline = loop.time() + self.batch_wait_s
                    await self._until(self._batch_full, deadline)
                batch = [self._pending.popleft() for _ in range(min(self.max_batch, len(self._pending)))]
                outcomes = await loop.run_in_executor(self._thread, self._run, batch)
                for call, outcome in zip(batch, outcomes, strict=True):
                    if not call.done.done():  # its connection's handler may be cancelled
                        call.done.set_result(outcome)
                batch = []
        finally:  # stopped: a call waiting (or stuck on the policy thread) ends its handler
            for call in [*batch, *self._pending]:
                if not call.done.done():
                    call.done.set_result(STOPPED)
            self._pending.clear()

    def _batch_full(self) -> bool:
        """Full at ``max_batch``, or once every open connection has a request waiting:
        each has at most one in flight, so no more can come (a lone client never
        waits)."""
        return len(self._pending) >= min(self.max_batch, self._connections)

    async def _until(self, ready: Callable[[], bool], deadline: float | None) -> None:
        """Wait until ``ready()`` or the loop time ``deadline``, whichever comes first."""
        loop = asyncio.get_running_loop()
        while not ready():
            self._arrived.clear()
            timeout = None if deadline is None else deadline - loop.time()
            if timeout is not None and timeout <= 0:
                return
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except TimeoutError:
                return

    def _run(self, batch: Sequence[_Call]) -> list[Outcome]:
        """On the policy thread: reset new episodes, infer, time it. Never raises: a
        failing reset errors its own call, a failing inference every call it served."""
        outcomes: dict[int, Outcome] = {}
        for i, call in enumerate(batch):
            try:
                if call.reset:
                    call.episode.reset()
            except BaseException:  # noqa: BLE001 - SystemExit too: the call's error, not the server's
                outcomes[i] = _failure("reset")
        live = [i for i in range(len(batch)) if i not in outcomes]
        started = time.perf_counter()
        try:
            replies = self._infer([batch[i] for i in live]) if live else []
        except BaseException:  # noqa: BLE001 - as above
            failure = _failure("infer_batch" if self.batched else "infer")
            outcomes.update(dict.fromkeys(live, failure))
            return [outcomes[i] for i in range(len(batch))]
        infer_ms = (time.perf_counter() - started) * 1000
        for i, reply in zip(live, replies, strict=True):
            wait_ms = (started - batch[i].queued) * 1000
            reply["server_timing"] = {"infer_ms": infer_ms, "wait_ms": wait_ms, "batch": len(live)}
            outcomes[i] = reply
        return [outcomes[i] for i in range(len(batch))]

    def _infer(self, calls: Sequence[_Call]) -> list[dict[str, Any]]:
        observations = [call.observation for call in calls]
        if not self.batched:
            [call] = calls
            reply = call.episode.infer(call.observation)
            if not isinstance(reply, Mapping):
                raise TypeError(f"infer answered {_what(reply)}, not a map (give a dict with "
                                "'actions', docs/serving.md)")
            return [dict(reply)]
        episodes: list[Any] = [call.episode for call in calls]
        first: BatchPolicy = episodes[0]
        replies = list(first.infer_batch(observations, episodes))
        if len(replies) != len(calls):
            raise ValueError(f"infer_batch answered {len(replies)} replies for "
                             f"{len(calls)} observations")
        for reply in replies:
            if not isinstance(reply, Mapping):
                raise TypeError(f"infer_batch answered {_what(reply)}, not a map")
        return [dict(reply) for reply in replies]

    async def run(self, host: str, port: int, ready: threading.Event | None = None, *,
                  announce: bool = True) -> None:
        async with serve(
            self.handler,
            host,
            port,
            compression=None,
            max_size=None,
            ping_interval=None,
            process_request=_health,
        ) as server:
            dispatcher = asyncio.create_task(self._dispatch())
            bound = server.sockets[0].getsockname()[1] if server.sockets else port
            self.port = bound
            log.info("serving %s on ws://%s:%s (%s)", self.name, host, bound, self.capabilities())
            if announce:
                print(f"pytest-libero serve: ws://{host}:{bound} (GET /healthz)", flush=True)
            if ready is not None:
                ready.set()
            try:
                # Not server.serve_forever(): cancelled, it closes the server and waits for
                # every handler first, and a handler waiting on a call the dispatcher holds
                # (an infer that never returns) would never end.
                await asyncio.get_running_loop().create_future()
            finally:
                dispatcher.cancel()  # answers every waiting call, so each handler ends
                with suppress(asyncio.CancelledError):
                    await dispatcher

    def close(self, *, policies: bool = True, wait_s: float | None = None) -> bool:
        """Close every policy object built that has ``close`` (``policies``), on the policy
        thread, then stop it. A caller that lent its own object keeps it open
        (``policies=False``). ``wait_s``: wait at most that long for the thread (None:
        as long as it takes); a close that raised raises here. Returns whether the
        thread ended: False when a call (an ``infer`` that never returns) still runs on
        it, left behind on its daemon thread."""
        closings = []
        if policies:
            for policy in self._built:
                closing = getattr(policy, "close", None)
                if callable(closing):
                    closings.append(self._thread.submit(closing))
        self._thread.shutdown(wait_s=wait_s)
        for closed in closings:
            if closed.done():
                closed.result()
        return not self._thread.stuck


def _what(reply: object) -> str:
    """A reply that is not a map, named in a few words (its type, a short text's value)."""
    if reply is None or isinstance(reply, (bool, int, float)):
        return repr(reply)
    if isinstance(reply, str):
        return f"the text {echo(reply)}"
    return f"a {type(reply).__module__}.{type(reply).__qualname__}"


def _built(factory: Callable[[], Policy]) -> Policy:
    """A factory's object; a SystemExit or KeyboardInterrupt it raises is its connection's
    error (an Exception), never the event loop's end."""
    try:
        return factory()
    except Exception:
        raise
    except BaseException as exc:  # noqa: BLE001 - not the server's to end
        raise RuntimeError(f"the policy factory raised {type(exc).__name__}: {exc}") from exc


def _failure(where: str) -> str:
    """The reply for the exception being handled, raised by the policy's ``where``: its
    traceback, and for one that is not an Exception (SystemExit, KeyboardInterrupt) a
    last line naming it, which the client shows first."""
    text = traceback.format_exc()
    raised = sys.exc_info()[1]
    if raised is None or isinstance(raised, Exception):
        return text
    said = f": {raised}" if str(raised) else ""
    return (f"{text.rstrip()}\n{type(raised).__name__}{said}, raised by the policy's {where}(): it "
            "fails this call only; the server goes on serving\n")


def _health(connection: ServerConnection, request: Request) -> Response | None:
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None


def _check_images(observation: Observation) -> None:
    """Refuse images that are not what the protocol delivers (P5: uint8, 256x256x3): a
    policy must never be handed a float image or a 2048-pixel one to make sense of."""
    expected = (IMAGE_SIZE, IMAGE_SIZE, 3)
    for camera, image in observation.images.items():
        if image.dtype != np.uint8 or image.shape != expected:
            raise ValueError(f"the {camera} image is {image.dtype} {tuple(image.shape)}; the "
                             f"protocol sends uint8 {expected}")
