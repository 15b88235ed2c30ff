"""A policy object of the caller's, served on 127.0.0.1 from a thread of the caller's process.

``evaluate`` runs the suite in a child ``python -m pytest`` so that the simulator never
shares the trainer's process; the policy stays where it is (its device, its weights) and
is reached over the same websocket wire and serving code as ``python -m
pytest_libero.serve`` (:class:`~pytest_libero.policy.openpi.server.PolicyServer`, with
its batching across workers). The server's event loop runs in a daemon thread; leaving
:func:`serving` stops it and frees the port, whatever ended the block. The policy's calls
run on a daemon thread too: an ``infer`` that never returns errors its case at the call
timeout, and once the run has ended it is left behind (with a warning), so the caller
gets control back and the process can still exit.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from pytest_libero.policy.contract import Policy
from pytest_libero.policy.openpi.server import PolicyServer

HOST = "127.0.0.1"
START_S = 30.0
"""How long the server thread may take to listen (building the first object included)."""
CLOSE_S = 10.0
"""How long a policy call still running when the run has ended is waited for, then left."""


_LENT: set[int] = set()
"""The ids of the policy objects an ``evaluate()`` call of this process is serving."""
_LENDING = threading.Lock()


class AlreadyLent(RuntimeError):
    """The object is being served by another ``evaluate()`` call of this process."""


class OneObject:
    """A factory that lends the caller's one policy object to one episode at a time: a
    second concurrent episode would mix its state with the first's. Within one call that
    is the episodes' rule; across calls (two threads, or a call from inside the policy's
    own methods) :meth:`lent_out` refuses the second."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.lent = False

    @contextmanager
    def lent_out(self) -> Iterator[None]:
        """Hold the object for one ``evaluate()`` call (AlreadyLent if another holds it)."""
        key = id(self.policy)
        with _LENDING:
            if key in _LENT:
                raise AlreadyLent(f"this policy object ({type(self.policy).__qualname__}) is already "
                                  "being evaluated by another evaluate() call of this process, and "
                                  "one object serves one episode at a time: wait for that call, or "
                                  "pass a factory")
            _LENT.add(key)
        try:
            yield
        finally:
            with _LENDING:
                _LENT.discard(key)

    def __call__(self) -> Policy:
        if self.lent:
            raise RuntimeError("one policy object serves one episode at a time, and another "
                               "episode asked for one: pass a factory to evaluate() to run "
                               "episodes concurrently")
        self.lent = True
        lent: Policy = self.policy
        return lent


@contextmanager
def serving(factory: Callable[[], Policy], *, close_policies: bool) -> Iterator[str]:
    """Serve ``factory``'s policies on a free port of 127.0.0.1; yield the endpoint.
    ``close_policies``: close the objects built when done (a lent object stays open)."""
    server = PolicyServer(factory, in_process=True)  # builds the first object: a failing factory raises now
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    failed: list[BaseException] = []

    async def until_stopped() -> None:
        listening = asyncio.create_task(server.run(HOST, 0, ready, announce=False))
        waiting = asyncio.create_task(stop.wait())
        await asyncio.wait({listening, waiting}, return_when=asyncio.FIRST_COMPLETED)
        listening.cancel()  # the listener closes its socket and its connections
        with suppress(asyncio.CancelledError):
            await listening

    def run() -> None:
        try:
            loop.run_until_complete(until_stopped())
        except BaseException as exc:  # told to the caller, who is waiting on ready
            failed.append(exc)
        finally:
            ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    thread = threading.Thread(target=run, name="pytest-libero-evaluate-server", daemon=True)
    thread.start()
    try:
        if not ready.wait(START_S) or failed or server.port is None:
            cause = f": {type(failed[0]).__name__}: {failed[0]}" if failed else ""
            raise RuntimeError(f"the policy server thread did not start listening on {HOST}{cause}")
        yield f"ws://{HOST}:{server.port}"
    finally:
        with suppress(RuntimeError):  # the loop closed itself already (its server failed)
            loop.call_soon_threadsafe(stop.set)
        thread.join(START_S)
        if not server.close(policies=close_policies, wait_s=CLOSE_S):
            warnings.warn(f"a call to the policy ({server.name}) was still running {CLOSE_S:g} s after "
                          "the run ended; it is left behind on its own thread, and the object may "
                          "still be in use", RuntimeWarning, stacklevel=3)
