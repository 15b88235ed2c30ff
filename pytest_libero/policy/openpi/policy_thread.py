"""The one thread every policy call of a server runs on, which never holds its process.

A :class:`concurrent.futures.ThreadPoolExecutor` joins its threads when it shuts down and
again when the interpreter exits, so a policy whose ``infer`` never returns kept
``evaluate()`` (which serves a caller's object from a thread of the caller's process)
waiting forever after its run had ended, and then kept the process from exiting. This
thread is a daemon, and shutting it down waits a bounded time: a call still running
then is left behind, and the caller is told so.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")

_STOP = object()
"""What the queue holds after the last call: the thread ends there."""


class PolicyThread(Executor):
    """One daemon thread running the calls submitted to it, in order, one at a time
    (frameworks with per-thread state see a single caller, and no policy needs a lock)."""

    def __init__(self, name: str = "policy") -> None:
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._closed:
            raise RuntimeError("the policy thread was shut down")
        future: Future[T] = Future()
        self._calls.put((future, fn, args, kwargs))
        return future

    def _work(self) -> None:
        while True:
            item = self._calls.get()
            if item is _STOP:
                return
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on it
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False,
                 wait_s: float | None = None) -> None:
        """Stop taking calls; the thread ends after those already submitted. ``wait``:
        wait for it, at most ``wait_s`` seconds (None: as long as it takes)."""
        self._closed = True
        self._calls.put(_STOP)
        if wait:
            self._thread.join(wait_s)

    @property
    def stuck(self) -> bool:
        """Whether the thread is still running a call (after a bounded :meth:`shutdown`)."""
        return self._thread.is_alive()
